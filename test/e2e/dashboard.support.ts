/**
 * What the dashboard's end-to-end tests share: the verification codes read from the mailbox folder
 * (npm start writes each email there as an .eml file when SMTP_URL is unset), valid payout
 * addresses, and a live balance (a live invoice cannot be paid in a test, so its invoice.paid
 * event is published as the invoice service publishes them).
 */
import { randomUUID } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { connectNats, EventNamespace } from '@coinvoice/runtime';
import { createAddressDeriver, generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Network } from '@coinvoice/domain/project-network';
import { codeInMail, mailHeader, mailText } from '../../deploy/local/src/mailbox';
import { eventually } from '../../services/notifier/test/support/receiver';
import { copyHeaders, signInto, systemEventKeys } from '../support/event-keys';
import { testNatsUrl } from '../support/infra';
import type { BootedSystem } from '../support/system';

export { eventually, Receiver } from '../../services/notifier/test/support/receiver';

export function mailboxDir(system: Pick<BootedSystem, 'dataDir'>): string {
  return path.join(system.dataDir, 'mailbox');
}

/** The 6-digit code of the email about `payoutId`, once it has been written. */
export async function emailedCode(system: Pick<BootedSystem, 'dataDir'>, payoutId: string): Promise<string> {
  return eventually(
    async () => {
      const dir = mailboxDir(system);
      if (!existsSync(dir)) return undefined;
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.eml'))) {
        const text = mailText(readFileSync(path.join(dir, file), 'utf8'));
        if (!text.includes(payoutId)) continue;
        const code = codeInMail(text);
        if (code) return code;
      }
      return undefined;
    },
    20_000,
    `the verification email of payout ${payoutId} in the mailbox`,
  );
}

/**
 * The email verification codes sent to `email`, oldest first (the mailbox's file names start
 * with the time they were written), once there are at least `count` of them.
 */
export async function emailVerificationCodes(system: Pick<BootedSystem, 'dataDir'>, email: string, count: number): Promise<string[]> {
  return eventually(
    async () => {
      const dir = mailboxDir(system);
      if (!existsSync(dir)) return undefined;
      const codes: string[] = [];
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.eml')).sort()) {
        const raw = readFileSync(path.join(dir, file), 'utf8');
        if (!mailHeader(raw, 'To')?.includes(email)) continue;
        const text = mailText(raw);
        if (!text.includes('email verification code')) continue;
        const code = codeInMail(text);
        if (code) codes.push(code);
      }
      return codes.length >= count ? codes : undefined;
    },
    20_000,
    `${count} email verification code(s) for ${email} in the mailbox`,
  );
}

const derivers = new Map<string, { addressAt(i: number): string }>();
let nextAddress = 0;

/** A fresh valid address of the coin: testnet for sandbox projects, mainnet for live ones. */
export function addressFor(currency: CryptoCode, network: Network): string {
  let deriver = derivers.get(`${currency}/${network}`);
  if (!deriver) {
    const created = createAddressDeriver(generateDevelopmentKeyPair(currency, network).xpub, currency, network);
    if (!created.ok) throw new Error(created.reason);
    deriver = created.value;
    derivers.set(`${currency}/${network}`, deriver);
  }
  return deriver.addressAt(nextAddress++);
}

/**
 * Credits a live project's balance: the latest invoice.paid on the stream (a sandbox one this
 * test caused) published again as a live project's payment of `amount`, with a new event id.
 */
export async function creditLiveBalance(system: BootedSystem, projectId: string, amount: string): Promise<void> {
  const nats = await connectNats({ url: testNatsUrl(), name: 'e2e-live-credit' });
  try {
    const namespace = new EventNamespace(system.namespace);
    const jsm = await nats.jetstreamManager();
    const original = await jsm.streams.getMessage(namespace.streamName('invoice'), { last_by_subj: namespace.subject('invoice.paid') });
    const live = { ...original.json<Record<string, unknown>>(), invoiceId: randomUUID(), projectId, environment: 'live', amount };
    // Signed with the system's invoice key, as the invoice service would sign it.
    const body = new TextEncoder().encode(JSON.stringify(live));
    const id = randomUUID();
    await nats.jetstream().publish(original.subject, body, { msgID: id, headers: signInto(copyHeaders(original.header), systemEventKeys(system), original.subject, id, body) });
  } finally {
    await nats.close();
  }
}

/** Removes the test's JetStream streams. */
export async function deleteStreams(namespace: string): Promise<void> {
  const nats = await connectNats({ url: testNatsUrl(), name: 'e2e-cleanup' });
  try {
    const jsm = await nats.jetstreamManager();
    for await (const stream of jsm.streams.list()) {
      if (stream.config.name.startsWith(`${namespace.toUpperCase()}_`)) await jsm.streams.delete(stream.config.name).catch(() => undefined);
    }
  } finally {
    await nats.close();
  }
}
