/**
 * A real SMTP server in the test process (the `smtp-server` package) that keeps every message it
 * accepts, so tests read what the notifier sent exactly as a mail server received it.
 */
import type { AddressInfo } from 'node:net';
import { SMTPServer } from 'smtp-server';

export interface ReceivedMail {
  from: string;
  to: string[];
  /** The raw RFC 5322 message. */
  raw: string;
}

export class SmtpInbox {
  readonly messages: ReceivedMail[] = [];
  private server: SMTPServer | undefined;
  url = '';

  async start(): Promise<this> {
    this.server = new SMTPServer({
      authOptional: true,
      // Plain SMTP on loopback: no certificate to trust in tests.
      disabledCommands: ['STARTTLS', 'AUTH'],
      logger: false,
      onData: (stream, session, callback) => {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', () => {
          this.messages.push({
            from: session.envelope.mailFrom ? session.envelope.mailFrom.address : '',
            to: session.envelope.rcptTo.map((r) => r.address),
            raw: Buffer.concat(chunks).toString('utf8'),
          });
          callback();
        });
      },
    });
    const server = this.server;
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const address = server.server.address() as AddressInfo;
    this.url = `smtp://127.0.0.1:${address.port}`;
    return this;
  }

  async waitFor(predicate: (m: ReceivedMail) => boolean, timeoutMs = 15_000): Promise<ReceivedMail> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.messages.find(predicate);
      if (found) return found;
      if (Date.now() > deadline) throw new Error(`no matching email within ${timeoutMs} ms (${this.messages.length} received)`);
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  async stop(): Promise<void> {
    const server = this.server;
    if (server) await new Promise<void>((resolve) => server.close(() => resolve()));
  }
}

// How a raw message is read is shared with the tools that read the development mailbox folder.
export { mailHeader, mailText } from '../../../../deploy/local/src/mailbox';
