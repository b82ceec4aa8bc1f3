/**
 * The notifier in-process, on what protects it and the merchants: the SSRF guard at delivery time,
 * bounded concurrency (one silent endpoint cannot hold up the others), recovery of a delivery
 * whose sender died mid-attempt, and the payout verification email over real SMTP.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { DeliveryStatus } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { PayoutVerificationCodeIssuedSchema } from '@coinvoice/runtime/gen/coinvoice/payout/v1/events_pb';
import { Webhook } from 'standardwebhooks';
import { eventually, Receiver, startNotifier, type Harness } from './support/harness';
import { mailHeader, mailText, SmtpInbox } from './support/smtp';

function invoicePaid(projectId: string): JsonValue {
  return toJson(
    InvoicePaidSchema,
    create(InvoicePaidSchema, {
      invoiceId: randomUUID(),
      projectId,
      status: 'Paid',
      amount: '12.5',
      currency: 'USDT',
      environment: 'sandbox',
      transactionHash: 'cd'.repeat(32),
      paidAt: timestampFromDate(new Date()),
    }),
  );
}

describe('production mode (WEBHOOK_ALLOW_PRIVATE_DESTINATIONS=false)', () => {
  let h: Harness;
  let r: Receiver;
  beforeAll(async () => {
    r = await new Receiver().start();
    h = await startNotifier({ WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'false', WEBHOOK_RETRY_SCHEDULE: '50ms' });
  });
  afterAll(async () => {
    await h?.dispose();
    await r?.stop();
  });

  test('a loopback webhook URL is refused at delivery time: failed attempts with a clear error, nothing sent', async () => {
    const project = h.auth.addProject({ webhookUrl: r.url });
    await h.publish('invoice.paid', invoicePaid(project.id));
    const list = await eventually(async () => {
      const res = await h.client.listWebhookDeliveries({ projectId: project.id });
      return res.deliveries[0]?.status === DeliveryStatus.FAILED ? res : undefined;
    });
    const delivery = await h.client.getWebhookDelivery({ projectId: project.id, deliveryId: list.deliveries[0]?.id ?? '' });
    expect(delivery.attempts).toHaveLength(2);
    for (const attempt of delivery.attempts) {
      expect(attempt.responseStatus).toBeUndefined();
      expect(attempt.error).toBe(
        'destination refused (blocked_address): 127.0.0.1 is in the loopback range 127.0.0.0/8: webhook URLs must point to a public address',
      );
    }
    expect(list.endpointHealth).toMatchObject({ url: r.url, consecutiveFailures: 2 });
    expect(r.requests).toEqual([]);
  });
});

describe('one slow endpoint does not hold up the others', () => {
  let h: Harness;
  const receivers: Receiver[] = [];
  beforeAll(async () => {
    // The silent endpoint holds its slots for 4 s: the other project's deliveries must all arrive well
    // before that (the bound leaves room for a loaded machine; waiting behind it would take 4 s or more).
    h = await startNotifier({ WEBHOOK_TIMEOUT_MS: '4000', WEBHOOK_MAX_PER_PROJECT: '2', WEBHOOK_RETRY_SCHEDULE: '10s' });
  });
  afterAll(async () => {
    await h?.dispose();
    for (const r of receivers) await r.stop();
  });

  test('a receiver that never answers gets at most 2 requests at once, while another project gets all of its own promptly', async () => {
    const silent = await new Receiver(() => 'hang').start();
    const healthy = await new Receiver().start();
    receivers.push(silent, healthy);
    const a = h.auth.addProject({ webhookUrl: silent.url });
    const b = h.auth.addProject({ webhookUrl: healthy.url });
    for (let i = 0; i < 10; i++) await h.publish('invoice.paid', invoicePaid(a.id));
    await silent.waitFor(2);
    const started = Date.now();
    for (let i = 0; i < 10; i++) await h.publish('invoice.paid', invoicePaid(b.id));
    await healthy.waitFor(10, 4_000);
    expect(Date.now() - started).toBeLessThan(2_500);
    // Per-project limit: the silent one has only ever seen its project's two slots' worth while hanging.
    expect(silent.requests.length).toBe(2);

    // After the timeout the attempts fail and the next two go out.
    await silent.waitFor(4, 8_000);
    const first = await eventually(async () => {
      const rows = await h.sql<{ error: string | null; duration_ms: number }[]>`
        select a.error, a.duration_ms from webhook_attempts a join webhook_deliveries d on d.id = a.delivery_id
        where d.project_id = ${a.id} and a.error is not null`;
      return rows.length > 0 ? rows[0] : undefined;
    });
    expect(first.error).toBe('no response within 4000 ms');
    expect(first.duration_ms).toBeGreaterThanOrEqual(3900);
  });

  test('a delivery whose sender died mid-attempt (lease left behind) is sent again by the next worker', async () => {
    const r = await new Receiver().start();
    receivers.push(r);
    const project = h.auth.addProject({ webhookUrl: r.url });
    const id = randomUUID();
    const eventId = randomUUID();
    // As a dead replica leaves it: pending, leased, its lease run out.
    await h.sql`
      insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at, lease_token)
      values (${id}, ${project.id}, ${eventId}, 'invoice.paid', ${randomUUID()}, ${r.url}, '{"x":1}', now() - interval '1 second', ${randomUUID()})`;
    const [req] = await r.waitFor(1, 5_000);
    expect(req?.headers['webhook-id']).toBe(eventId);
    expect(() => new Webhook(project.webhookSecret).verify('{"x":1}', req?.headers as Record<string, string>)).not.toThrow();
    await eventually(async () => {
      const [row] = await h.sql<{ status: string; lease_token: string | null }[]>`select status, lease_token from webhook_deliveries where id = ${id}`;
      return row?.status === 'succeeded' && row.lease_token === null ? row : undefined;
    });
  });
});

function codeEmail(email: string, code: string, expiresAt: Date) {
  return {
    payoutId: randomUUID(),
    environment: 'live',
    amount: '0.5',
    currency: 'BTC',
    email,
    code,
    expiresAt: timestampFromDate(expiresAt),
    address: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq',
    network: 'bitcoin',
  };
}

function codeIssued(projectId: string, email: string, code: string, expiresAt: Date): JsonValue {
  return toJson(
    PayoutVerificationCodeIssuedSchema,
    create(PayoutVerificationCodeIssuedSchema, {
      payoutId: randomUUID(),
      projectId,
      environment: 'live',
      amount: '0.5',
      currency: 'BTC',
      status: 'AwaitingVerification',
      email,
      code,
      expiresAt: timestampFromDate(expiresAt),
    }),
  );
}

describe('code emails (SendPayoutVerificationEmail, SendEmailVerificationEmail)', () => {
  let h: Harness;
  let inbox: SmtpInbox;
  let r: Receiver;
  beforeAll(async () => {
    inbox = await new SmtpInbox().start();
    r = await new Receiver().start();
    h = await startNotifier({ SMTP_URL: inbox.url, EMAIL_FROM: 'coinvoice <no-reply@coinvoice.test>' });
  });
  afterAll(async () => {
    await h?.dispose();
    await inbox?.stop();
    await r?.stop();
  });

  test('the payout code reaches the merchant by SMTP from the RPC only: never stored, never a webhook; an expired code is not sent', async () => {
    const project = h.auth.addProject({ webhookUrl: r.url });
    expect(await h.client.sendPayoutVerificationEmail(codeEmail('late@example.com', '111111', new Date(Date.now() - 1000))).then(() => 'sent', (err: { rawMessage: string }) => err.rawMessage)).toMatch(/expired/);
    const request = codeEmail(project.merchantEmail, '482913', new Date(Date.now() + 15 * 60_000));
    const sent = await h.client.sendPayoutVerificationEmail(request);
    expect(sent.messageId).not.toBe('');

    const mail = await inbox.waitFor((m) => m.to.includes(project.merchantEmail));
    expect(mail.from).toBe('no-reply@coinvoice.test');
    expect(mailHeader(mail.raw, 'subject')).toBe('Confirm your payout of 0.5 BTC');
    expect(mailHeader(mail.raw, 'subject')).not.toContain('482913');
    const text = mailText(mail.raw);
    expect(text).toContain('482913');
    expect(text).toContain('0.5 BTC');
    expect(text).toContain(request.payoutId);
    // What the code confirms: the amount and where it goes (issue 27).
    expect(text).toContain('Amount: 0.5 BTC');
    expect(text).toContain('To the address: bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq');
    // And on which network (issue 24: one EVM address is valid on every EVM network).
    expect(text).toContain('On the network: bitcoin');

    expect(inbox.messages.filter((m) => m.to.includes('late@example.com'))).toEqual([]);
    expect(r.requests).toEqual([]);
    const rows = await h.sql`select t::text as row from webhook_deliveries t`;
    expect(rows.map((row) => String(row.row)).join('\n')).not.toContain('482913');
  });

  test('an old-style payout.verification_code_issued event is not emailed (codes never travel through NATS)', async () => {
    const project = h.auth.addProject({});
    const before = inbox.messages.length;
    await h.publish('payout.verification_code_issued', codeIssued(project.id, project.merchantEmail, '730155', new Date(Date.now() + 60_000)));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(inbox.messages.slice(before).filter((m) => m.to.includes(project.merchantEmail))).toEqual([]);
  });

  test('the auto-sweep code names every destination; never in the subject; refused when expired or naming none', async () => {
    const projectId = randomUUID();
    const destinations = [
      { currency: 'USDT', address: '0x52908400098527886E0F7030069857D2E4169EE7', threshold: '250.5' },
      { currency: 'BTC', address: 'bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq', threshold: '0.1' },
    ];
    const request = { projectId, environment: 'live', email: 'sweeper@example.com', code: '604218', expiresAt: timestampFromDate(new Date(Date.now() + 60_000)), destinations };
    expect((await h.client.sendAutoSweepVerificationEmail(request)).messageId).not.toBe('');
    const mail = await inbox.waitFor((m) => m.to.includes('sweeper@example.com'));
    expect(mailHeader(mail.raw, 'subject')).toBe('Confirm your auto-sweep destinations');
    const text = mailText(mail.raw);
    expect(text).toMatch(/^\s+604218\s*$/m);
    expect(text).toContain(projectId);
    expect(text).toContain('USDT: to 0x52908400098527886E0F7030069857D2E4169EE7 from 250.5 USDT');
    expect(text).toContain('BTC: to bc1qar0srrr7xfkvy5l643lydnw9re59gtzzwf5mdq from 0.1 BTC');

    const refused = (req: typeof request) => h.client.sendAutoSweepVerificationEmail(req).then(() => 'sent', (err: { rawMessage: string }) => err.rawMessage);
    expect(await refused({ ...request, email: 'late@example.com', expiresAt: timestampFromDate(new Date(Date.now() - 1000)) })).toMatch(/expired/);
    expect(await refused({ ...request, email: 'none@example.com', destinations: [] })).toMatch(/destination/);
    expect(await refused({ ...request, email: 'bad@example.com', code: '12' })).not.toBe('sent');
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(inbox.messages.filter((m) => ['late@', 'none@', 'bad@'].some((to) => m.to.some((t) => t.startsWith(to))))).toEqual([]);
  });

  test('the email verification code', async () => {
    await h.client.sendEmailVerificationEmail({ email: 'new@example.com', code: '123456', expiresAt: timestampFromDate(new Date(Date.now() + 60_000)) });
    const mail = await inbox.waitFor((m) => m.to.includes('new@example.com'));
    expect(mailText(mail.raw)).toContain('123456');
    expect(mailHeader(mail.raw, 'subject')).not.toContain('123456');
  });
});

describe('development without SMTP_URL', () => {
  let h: Harness;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'coinvoice-mailbox-'));
    h = await startNotifier({ SMTP_URL: '', MAILBOX_DIR: dir });
  });
  afterAll(async () => {
    await h?.dispose();
    rmSync(dir, { recursive: true, force: true });
  });

  test('the email is written to the mailbox folder as an .eml file', async () => {
    const project = h.auth.addProject({});
    await h.client.sendPayoutVerificationEmail(codeEmail(project.merchantEmail, '730155', new Date(Date.now() + 60_000)));
    const file = await eventually(async () => readdirSync(dir).find((f) => f.endsWith('.eml')));
    const raw = readFileSync(path.join(dir, file), 'utf8');
    expect(mailHeader(raw, 'to')).toBe(project.merchantEmail);
    expect(mailText(raw)).toContain('730155');
  });
});
