/**
 * Issue 5 end to end, through the gateway, against the whole system as real processes (real
 * Postgres, NATS, a real HTTP receiver on 127.0.0.1, a real SMTP server in this process):
 * signed invoice.paid webhooks, retries with the same webhook-id, the delivery log, one silent
 * endpoint not slowing the others, redelivery from the dashboard, the payout verification email
 * (code never logged), and a SIGKILLed notifier losing nothing.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { connectNats, ensureServiceStream, EVENT_HEADERS, EventNamespace } from '@coinvoice/runtime';
import { PayoutVerificationCodeIssuedSchema } from '@coinvoice/runtime/gen/coinvoice/payout/v1/events_pb';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { headers as natsHeaders } from 'nats';
import { Webhook } from 'standardwebhooks';
import { InvoicePaidWebhook } from '../../gateway/src/schemas/webhook-events';
import { generateWebhookSecret, signWebhook } from '../../services/notifier/src/domain/signing';
import { bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { signInto, systemEventKeys } from '../support/event-keys';
import { testNatsUrl } from '../support/infra';
import { bootSystem, isAlive, type BootedSystem } from '../support/system';
import {
  allDeliveries,
  bounded,
  createAndPay,
  deleteStreams,
  deliveryLog,
  eventually,
  logOf,
  logsText,
  mailHeader,
  mailText,
  percentile,
  Receiver,
  SmtpInbox,
  type ReceivedRequest,
} from './webhooks.support';
import { smtpMailbox } from '../support/mail';

FormatRegistry.Set('uuid', (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v));
FormatRegistry.Set('date-time', (v) => !Number.isNaN(Date.parse(v)) && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(v));

let system: BootedSystem;
let api: GatewayClient;
let inbox: SmtpInbox;
const receivers: Receiver[] = [];

beforeAll(async () => {
  inbox = await new SmtpInbox().start();
  system = await bootSystem({
    mail: smtpMailbox(inbox),
    env: {
      WEBHOOK_RETRY_SCHEDULE: '200ms,300ms,300ms',
      WEBHOOK_TIMEOUT_MS: '2000',
      SMTP_URL: inbox.url,
      EMAIL_FROM: 'coinvoice <no-reply@coinvoice.test>',
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  for (const r of receivers) await r.stop();
  await inbox?.stop();
});

async function receiver(respond?: ConstructorParameters<typeof Receiver>[0]): Promise<Receiver> {
  const r = await new Receiver(respond).start();
  receivers.push(r);
  return r;
}

async function merchantWithProject(webhookUrl: string): Promise<{ merchant: MerchantFixture; project: ProjectFixture }> {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl });
  return { merchant, project };
}

function headersOf(req: ReceivedRequest): Record<string, string> {
  return {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  };
}

const invoiceIdOf = (req: ReceivedRequest) => (JSON.parse(req.body) as { invoiceId: string }).invoiceId;

describe('invoice.paid', () => {
  test('sandbox pay → the receiver gets exactly the documented body, and standardwebhooks verifies it; tampering and replay are rejected', async () => {
    const r = await receiver();
    const { project } = await merchantWithProject(r.url);
    const paid = await createAndPay(api, project.key, { orderId: 'order-1001' });
    const [req] = await r.waitFor(1);
    if (!req) throw new Error('no webhook');

    const body = JSON.parse(req.body);
    // The seed's six fields exactly, then the additions amountDecimal (the amount's exact digits),
    // payNetwork (issue 24) and occurredAt (receivers order events by it).
    expect(body).toEqual({ invoiceId: paid.id, orderId: 'order-1001', status: 'Paid', amount: paid.amountReceived, currency: 'BTC', environment: 'sandbox', amountDecimal: expect.stringMatching(/^\d+\.\d+$/), payNetwork: 'bitcoin', occurredAt: expect.any(String) });
    expect(Number(body.amountDecimal)).toBe(body.amount);
    expect(Object.keys(body)).toEqual(['invoiceId', 'orderId', 'status', 'amount', 'currency', 'environment', 'amountDecimal', 'payNetwork', 'occurredAt']);
    expect(Math.abs(Date.parse(body.occurredAt) - req.at)).toBeLessThan(5_000);
    expect(Value.Check(InvoicePaidWebhook, body)).toBe(true);
    expect(req.headers['content-type']).toBe('application/json');
    expect(req.headers['webhook-event-type']).toBe('invoice.paid');

    const wh = new Webhook(project.webhookSecret);
    expect(wh.verify(req.body, headersOf(req))).toEqual(body);
    // One changed byte of the body: refused.
    expect(() => wh.verify(req.body.replace('"sandbox"', '"live"'), headersOf(req))).toThrow();
    // Another project's secret: refused.
    const other = await merchantWithProject(r.url);
    expect(() => new Webhook(other.project.webhookSecret).verify(req.body, headersOf(req))).toThrow();
    // A replay signed correctly but 10 minutes old: refused for its timestamp.
    const old = signWebhook({ id: headersOf(req)['webhook-id'] ?? '', timestamp: new Date(Date.now() - 10 * 60_000), body: req.body, secrets: [project.webhookSecret] });
    expect(() => wh.verify(req.body, old)).toThrow(/timestamp too old/i);
  });

  test('a rotation keeps the replaced secrets signing next to the new one until they end (docs/webhook-delivery.md#secret-rotation)', async () => {
    const r = await receiver();
    const { merchant, project } = await merchantWithProject(r.url);
    const path = `/api/merchant/projects/${project.id}`;
    const verifies = (secret: string, req: ReceivedRequest) => {
      try {
        new Webhook(secret).verify(req.body, headersOf(req));
        return true;
      } catch {
        return false;
      }
    };
    const signatures = (req: ReceivedRequest) => headersOf(req)['webhook-signature']!.split(' ');
    // The next invoice.paid signed as auth's rotation says (it reaches the notifier within milliseconds).
    const webhookSignedWith = (secret: string) =>
      eventually(async () => {
        const paid = await createAndPay(api, project.key);
        const [req] = await r.waitFor(1, 10_000, (q) => invoiceIdOf(q) === paid.id);
        return req && verifies(secret, req) ? req : undefined;
      }, 10_000, `a webhook signed with the secret ${secret.slice(0, 10)}…`);

    // Out of range, a field it does not know, the setting in the query string: refused, nothing rotated.
    for (const body of [{ previousSecretExpiresInMinutes: 1441 }, { previousSecretExpiresInMinutes: -1 }, { previousSecretExpiresInMinutes: 1.5 }, { overlap: 5 }]) {
      expectProblem(await api.post(`${path}/webhook-secret/rotate`, body, { headers: bearer(merchant.token) }), 400, 'validation_failed');
    }
    expectProblem(await api.post(`${path}/webhook-secret/rotate?previousSecretExpiresInMinutes=0`, undefined, { headers: bearer(merchant.token) }), 400, 'validation_failed');
    const first = await webhookSignedWith(project.webhookSecret);
    expect(signatures(first)).toHaveLength(1);

    // Default: the replaced secret signs for a day.
    const rotated = await api.post(`${path}/webhook-secret/rotate`, undefined, { headers: bearer(merchant.token) });
    expect(rotated.status).toBe(200);
    // A secret in the body: never stored on the way.
    expect(rotated.headers.get('cache-control')).toBe('no-store');
    expect(Object.keys(rotated.body).sort()).toEqual(['previousSecretExpiresAt', 'webhookSecret']);
    const until = Date.parse(rotated.body.previousSecretExpiresAt);
    expect(until - Date.now()).toBeGreaterThan(1439 * 60_000);
    expect(until - Date.now()).toBeLessThanOrEqual(1440 * 60_000);
    expect((await api.get(path, { headers: bearer(merchant.token) })).body.previousWebhookSecretExpiresAt).toBe(rotated.body.previousSecretExpiresAt);
    const both = await webhookSignedWith(rotated.body.webhookSecret);
    expect(signatures(both)).toHaveLength(2);
    expect(verifies(project.webhookSecret, both)).toBe(true);
    expect(verifies(generateWebhookSecret(), both)).toBe(false);

    // Rotated again (a retry whose first answer was lost, say): the secret the receiver checks still signs.
    const retried = await api.post(`${path}/webhook-secret/rotate`, undefined, { headers: bearer(merchant.token) });
    const three = await webhookSignedWith(retried.body.webhookSecret);
    expect(signatures(three)).toHaveLength(3);
    expect(verifies(project.webhookSecret, three)).toBe(true);
    expect(verifies(rotated.body.webhookSecret, three)).toBe(true);

    // Ended early: the next attempts carry the new secret's signature alone.
    const ended = await api.delete(`${path}/webhook-secret/previous`, { headers: bearer(merchant.token) });
    expect(ended.status).toBe(200);
    expect(ended.body).toMatchObject({ id: project.id, previousWebhookSecretExpiresAt: null });
    const alone = await eventually(async () => {
      const paid = await createAndPay(api, project.key);
      const [req] = await r.waitFor(1, 10_000, (q) => invoiceIdOf(q) === paid.id);
      return req && !verifies(project.webhookSecret, req) ? req : undefined;
    }, 10_000, 'a webhook the old secret no longer verifies');
    expect(signatures(alone)).toHaveLength(1);
    expect(verifies(retried.body.webhookSecret, alone)).toBe(true);
    expect(verifies(rotated.body.webhookSecret, alone)).toBe(false);

    // A leaked secret: 0 minutes, the replaced one stops at once.
    const leaked = await api.post(`${path}/webhook-secret/rotate`, { previousSecretExpiresInMinutes: 0 }, { headers: bearer(merchant.token) });
    expect(leaked.body).toEqual({ webhookSecret: expect.stringMatching(/^whsec_/), previousSecretExpiresAt: null });
    const fresh = await webhookSignedWith(leaked.body.webhookSecret);
    expect(signatures(fresh)).toHaveLength(1);
    expect(verifies(retried.body.webhookSecret, fresh)).toBe(false);
    // Another merchant cannot end (or learn about) this project's previous secret.
    const stranger = await registerMerchant(api);
    expectProblem(await api.delete(`${path}/webhook-secret/previous`, { headers: bearer(stranger.token) }), 404, 'not_found');
  });

  test('an invoice without orderId sends orderId "" (as the public Invoice has it)', async () => {
    const r = await receiver();
    const { project } = await merchantWithProject(r.url);
    const paid = await createAndPay(api, project.key);
    expect(paid.orderId).toBe('');
    const [req] = await r.waitFor(1);
    expect(JSON.parse(req?.body ?? '{}')).toMatchObject({ invoiceId: paid.id, orderId: '' });
  });

  test('pay-to-webhook latency at low load (sequential pays): measured and reported', async () => {
    const r = await receiver();
    const { project } = await merchantWithProject(r.url);
    const latencies: number[] = [];
    const afterAnswer: number[] = [];
    for (let i = 0; i < 40; i++) {
      const paid = await createAndPay(api, project.key);
      const [req] = await r.waitFor(1, 5_000, (q) => invoiceIdOf(q) === paid.id);
      latencies.push((req?.at ?? Infinity) - paid.payStartedAt);
      afterAnswer.push((req?.at ?? Infinity) - paid.payAnsweredAt);
    }
    const p50 = percentile(latencies, 50);
    const p99 = percentile(latencies, 99);
    console.log(
      `pay-to-webhook latency over ${latencies.length} sequential pays, from the pay request: p50 ${p50} ms, p99 ${p99} ms, max ${Math.max(...latencies)} ms; ` +
        `from its response: p50 ${percentile(afterAnswer, 50)} ms, p99 ${percentile(afterAnswer, 99)} ms`,
    );
    // Generous bound for a shared 2-core machine; the target (p99 < 50 ms) is what the report shows.
    expect(p50).toBeLessThan(250);

  });
});

test('500, 500, 200 → the same webhook-id three times; the delivery log shows three attempts with their status codes', async () => {
  const statuses = [500, 500, 200];
  const r = await receiver((_q, i) => ({ status: statuses[i] ?? 200, body: i < 2 ? 'boom' : 'thanks' }));
  const { merchant, project } = await merchantWithProject(r.url);
  const paid = await createAndPay(api, project.key);
  const requests = await r.waitFor(3);
  const ids = requests.map((q) => q.headers['webhook-id']);
  expect(new Set(ids).size).toBe(1);
  for (const q of requests) expect(new Webhook(project.webhookSecret).verify(q.body, headersOf(q))).toMatchObject({ invoiceId: paid.id });

  const log = await eventually(async () => {
    const res = await deliveryLog(api, merchant, project.id);
    return res.items[0]?.status === 'succeeded' ? res : undefined;
  });
  expect(log.items).toHaveLength(1);
  expect(log.items[0]).toMatchObject({ eventId: ids[0], eventType: 'invoice.paid', status: 'succeeded', attemptCount: 3, url: r.url, redeliveryOf: null, payload: requests[0]?.body });
  expect(log.endpoint).toEqual({ url: r.url, lastSuccessAt: expect.any(String), consecutiveFailures: 0 });

  const one = await api.get(`/api/merchant/projects/${project.id}/webhook-deliveries/${log.items[0]?.id}`, { headers: bearer(merchant.token) });
  expect(one.status).toBe(200);
  expect(one.body.attempts.map((a: { attemptNumber: number; responseStatus: number; responseBodyExcerpt: string }) => [a.attemptNumber, a.responseStatus, a.responseBodyExcerpt])).toEqual([
    [1, 500, 'boom'],
    [2, 500, 'boom'],
    [3, 200, 'thanks'],
  ]);
  for (const [i, attempt] of (one.body.attempts as Array<{ requestHeaders: Record<string, string>; requestBody: string; error: string | null }>).entries()) {
    expect(attempt.requestHeaders).toMatchObject({ 'webhook-id': ids[0], 'webhook-signature': requests[i]?.headers['webhook-signature'], 'webhook-timestamp': requests[i]?.headers['webhook-timestamp'] });
    expect(attempt.requestBody).toBe(requests[i]?.body);
    expect(attempt.error).toBeNull();
  }

  // Filters and validation of the log route.
  expect((await deliveryLog(api, merchant, project.id, '?status=failed')).items).toEqual([]);
  expect((await deliveryLog(api, merchant, project.id, '?eventType=invoice.paid&limit=1')).items).toHaveLength(1);
  expectProblem(await api.get(`/api/merchant/projects/${project.id}/webhook-deliveries?status=done`, { headers: bearer(merchant.token) }), 400, 'validation_failed');
  expectProblem(await api.get(`/api/merchant/projects/${project.id}/webhook-deliveries?cursor=zzz`, { headers: bearer(merchant.token) }), 400, 'validation_failed');
  expectProblem(await api.get(`/api/merchant/projects/${project.id}/webhook-deliveries`), 401);
});

test('a receiver that never answers (project A) does not slow deliveries to project B', async () => {
  const silent = await receiver(() => 'hang');
  const prompt = await receiver();
  const a = await merchantWithProject(silent.url);
  const b = await merchantWithProject(prompt.url);
  await bounded(6, 3, () => createAndPay(api, a.project.key));
  await silent.waitFor(2);

  const latencies: number[] = [];
  await bounded(6, 2, async () => {
    const paid = await createAndPay(api, b.project.key);
    const [req] = await prompt.waitFor(1, 5_000, (q) => invoiceIdOf(q) === paid.id);
    latencies.push((req?.at ?? Infinity) - paid.payStartedAt);
  });
  // While A's attempts hang for up to 2 s each, B's webhooks arrive as if A did not exist.
  expect(Math.max(...latencies)).toBeLessThan(1_000);
  expect(prompt.requests).toHaveLength(6);
});

test('redeliver from the dashboard: the same event again (same webhook-id and body), as a new delivery row pointing at the original', async () => {
  const r = await receiver();
  const { merchant, project } = await merchantWithProject(r.url);
  await createAndPay(api, project.key);
  const [first] = await r.waitFor(1);
  const original = await eventually(async () => {
    const log = await deliveryLog(api, merchant, project.id);
    return log.items[0]?.status === 'succeeded' ? log.items[0] : undefined;
  });

  const res = await api.post(`/api/merchant/projects/${project.id}/webhook-deliveries/${original.id}/redeliver`, undefined, { headers: bearer(merchant.token) });
  expect(res.status).toBe(201);
  expect(res.body).toEqual({
    id: expect.any(String),
    eventId: original.eventId,
    eventType: 'invoice.paid',
    url: r.url,
    status: 'pending',
    attemptCount: 0,
    nextAttemptAt: expect.any(String),
    createdAt: expect.any(String),
    redeliveryOf: original.id,
    deliveredBy: null,
    payload: original.payload,
    lastResponseStatus: null,
  });
  expect(res.body.id).not.toBe(original.id);

  const [, again] = await r.waitFor(2);
  expect(again?.headers['webhook-id']).toBe(first?.headers['webhook-id']);
  expect(again?.body).toBe(first?.body);
  expect(new Webhook(project.webhookSecret).verify(again?.body ?? '', headersOf(again as ReceivedRequest))).toBeTruthy();

  const log = await eventually(async () => {
    const l = await deliveryLog(api, merchant, project.id);
    return l.items.every((d) => d.status === 'succeeded') ? l : undefined;
  });
  expect(log.items.map((d) => [d.id, d.redeliveryOf])).toEqual([
    [res.body.id, original.id],
    [original.id, null],
  ]);

  // Another merchant cannot see or redeliver it: 404 as if it did not exist.
  const stranger = await registerMerchant(api);
  expectProblem(await api.post(`/api/merchant/projects/${project.id}/webhook-deliveries/${original.id}/redeliver`, undefined, { headers: bearer(stranger.token) }), 404, 'not_found');
  expectProblem(await api.get(`/api/merchant/projects/${project.id}/webhook-deliveries`, { headers: bearer(stranger.token) }), 404, 'not_found');
  // A delivery of another project of the same merchant: 404 too.
  const second = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: r.url });
  expectProblem(await api.post(`/api/merchant/projects/${second.id}/webhook-deliveries/${original.id}/redeliver`, undefined, { headers: bearer(merchant.token) }), 404, 'not_found');
  expectProblem(await api.post(`/api/merchant/projects/${project.id}/webhook-deliveries/${randomUUID()}/redeliver`, undefined, { headers: bearer(merchant.token) }), 404, 'not_found');
});

test('a payout.verification_code_issued event on the stream is neither emailed nor a webhook: codes travel only by RPC (issue 12)', async () => {
  const r = await receiver();
  const { merchant, project } = await merchantWithProject(r.url);
  // What the payout service published before issue 12 (security.test.ts proves the real flow).
  const code = String(100000 + Math.floor(Math.random() * 900000));
  const payoutId = randomUUID();
  const nats = await connectNats({ url: testNatsUrl(), name: 'e2e-payout' });
  try {
    const namespace = new EventNamespace(system.namespace);
    await ensureServiceStream(nats, { namespace, service: 'payout' });
    const event = create(PayoutVerificationCodeIssuedSchema, {
      payoutId,
      projectId: project.id,
      environment: 'sandbox',
      amount: '0.015',
      currency: 'BTC',
      status: 'AwaitingVerification',
      email: merchant.email,
      code,
      expiresAt: timestampFromDate(new Date(Date.now() + 15 * 60_000)),
    });
    const h = natsHeaders();
    h.set(EVENT_HEADERS.eventType, 'payout.verification_code_issued');
    h.set(EVENT_HEADERS.eventKey, payoutId);
    // Signed with the payout service's key: the notifier must ignore it for what it is, not for a bad signature.
    const subject = namespace.subject('payout.verification_code_issued');
    const body = new TextEncoder().encode(JSON.stringify(toJson(PayoutVerificationCodeIssuedSchema, event)));
    const id = randomUUID();
    await nats.jetstream().publish(subject, body, { msgID: id, headers: signInto(h, systemEventKeys(system), subject, id, body) });
  } finally {
    await nats.close();
  }

  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect(inbox.messages.filter((m) => mailText(m.raw).includes(payoutId))).toEqual([]);
  expect(logsText(system)).not.toContain(code);
  expect(r.requests).toEqual([]);
  expect((await deliveryLog(api, merchant, project.id)).items).toEqual([]);
});

// Last: it kills the notifier.
test('SIGKILL the notifier while deliveries are pending: the launcher restarts it and every event is delivered, none lost', async () => {
  // The receiver is slow at first (attempts in flight hang), then healthy after the kill.
  let healthy = false;
  const r = await receiver(() => (healthy ? { status: 200 } : 'hang'));
  const { merchant, project } = await merchantWithProject(r.url);
  const paid = await bounded(20, 4, () => createAndPay(api, project.key));
  // Every event consumed (20 deliveries recorded) and attempts in flight: the state a crash hits.
  await eventually(async () => ((await allDeliveries(api, merchant, project.id)).length === 20 ? true : undefined), 15_000, '20 deliveries');
  await r.waitFor(2);

  const before = system.current().notifier;
  if (!before) throw new Error('no notifier in system.json');
  process.kill(before.pid, 'SIGKILL');
  healthy = true;
  await eventually(async () => (!isAlive(before.pid) ? true : undefined), 5_000, 'the notifier to die');
  const after = await eventually(async () => {
    const now = system.current().notifier;
    return now && now.pid !== before.pid && now.restarts > before.restarts ? now : undefined;
  }, 20_000, 'the launcher to restart the notifier');
  expect(isAlive(after.pid)).toBe(true);

  // Every invoice's webhook arrives (the ones in flight at the kill once their lease runs out).
  await eventually(async () => (new Set(r.requests.map(invoiceIdOf)).size >= 20 ? true : undefined), 30_000, 'all 20 invoices delivered');
  expect(new Set(r.requests.map(invoiceIdOf))).toEqual(new Set(paid.map((p) => p.id)));
  const log = await eventually(async () => {
    const items = await allDeliveries(api, merchant, project.id);
    return items.length === 20 && items.every((d) => d.status === 'succeeded') ? items : undefined;
  }, 30_000, 'every delivery succeeded');
  expect(new Set(log.map((d) => d.eventId)).size).toBe(20);
}, 90_000);
