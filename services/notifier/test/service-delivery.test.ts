/**
 * The notifier service in-process, against real Postgres and NATS and a real HTTP receiver:
 * events in, signed webhooks out, every attempt in the log, retries, ordering, failure, the
 * delivery log RPCs and redelivery.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { errorFacts } from '@coinvoice/runtime';
import { InvoiceExpiredSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { PayoutVerificationCodeIssuedSchema } from '@coinvoice/runtime/gen/coinvoice/payout/v1/events_pb';
import { WebhookDeliveryFailedSchema } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/events_pb';
import { DeliveryStatus } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { fromJson } from '@bufbuild/protobuf';
import { AckPolicy, DeliverPolicy } from 'nats';
import { Webhook } from 'standardwebhooks';
import { generateWebhookSecret } from '../src/domain/signing';
import { invoicePaid } from './support/events';
import { eventually, Receiver, startNotifier, type Harness } from './support/harness';

let h: Harness;
const receivers: Receiver[] = [];

beforeAll(async () => {
  h = await startNotifier({ WEBHOOK_RETRY_SCHEDULE: '100ms,200ms' });
});
afterAll(async () => {
  for (const r of receivers) await r.stop();
  await h?.dispose();
});

async function receiver(respond?: ConstructorParameters<typeof Receiver>[0]): Promise<Receiver> {
  const r = await new Receiver(respond).start();
  receivers.push(r);
  return r;
}

function invoiceExpired(projectId: string, invoiceId: string): JsonValue {
  return toJson(
    InvoiceExpiredSchema,
    create(InvoiceExpiredSchema, { invoiceId, projectId, status: 'Expired', currency: 'ETH', environment: 'live', expiredAt: timestampFromDate(new Date()) }),
  );
}

async function deliveriesOf(projectId: string) {
  return h.sql<{ id: string; status: string; attempt_count: number; event_id: string; body: string }[]>`
    select id, status, attempt_count, event_id, body from webhook_deliveries where project_id = ${projectId} order by seq`;
}

test('invoice.paid → one signed POST with the exact documented body, verified by the standardwebhooks package', async () => {
  const r = await receiver();
  const project = h.auth.addProject({ webhookUrl: r.url });
  const invoiceId = randomUUID();
  const occurredAt = new Date('2026-11-25T03:42:08.123Z');
  const eventId = await h.publish('invoice.paid', invoicePaid(project.id, { invoiceId, orderId: 'order-42', amount: '0.00123400' }), { key: invoiceId, occurredAt });

  const [req] = await r.waitFor(1);
  if (!req) throw new Error('no request');
  // The documented six fields exactly, then amountDecimal, payNetwork (issue 24) and occurredAt: the event-time the producer's relay sent.
  expect(req.body).toBe(
    `{"invoiceId":"${invoiceId}","orderId":"order-42","status":"Paid","amount":0.001234,"currency":"BTC","environment":"sandbox","amountDecimal":"0.001234","payNetwork":"bitcoin","occurredAt":"2026-11-25T03:42:08.123Z"}`,
  );
  expect(req.headers['webhook-id']).toBe(eventId);
  expect(req.headers['content-type']).toBe('application/json');
  const verified = new Webhook(project.webhookSecret).verify(req.body, {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  });
  expect(verified).toEqual(JSON.parse(req.body));

  const [delivery] = await eventually(async () => {
    const rows = await deliveriesOf(project.id);
    return rows[0]?.status === 'succeeded' ? rows : undefined;
  });
  expect(delivery).toMatchObject({ attempt_count: 1, event_id: eventId, body: req.body });

  // Published again (a relay re-publish past the duplicate window): still one delivery.
  await h.publish('invoice.paid', invoicePaid(project.id, { invoiceId }), { id: eventId, key: invoiceId });
  await new Promise((r2) => setTimeout(r2, 300));
  expect(await deliveriesOf(project.id)).toHaveLength(1);
  expect(r.requests).toHaveLength(1);
});

test('500, 500, 200 → three attempts with the same webhook-id, each recorded with its status code', async () => {
  const statuses = [500, 500, 200];
  const r = await receiver((_req, i) => ({ status: statuses[i] ?? 200, body: `answer ${i + 1}` }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  const eventId = await h.publish('invoice.paid', invoicePaid(project.id));

  const requests = await r.waitFor(3);
  expect(new Set(requests.map((q) => q.headers['webhook-id']))).toEqual(new Set([eventId]));
  // Each attempt signed afresh (its own timestamp), each verifiable.
  for (const q of requests) {
    expect(() => new Webhook(project.webhookSecret).verify(q.body, q.headers as Record<string, string>)).not.toThrow();
  }

  const [row] = await eventually(async () => {
    const rows = await deliveriesOf(project.id);
    return rows[0]?.status === 'succeeded' ? rows : undefined;
  });
  const got = await h.client.getWebhookDelivery({ projectId: project.id, deliveryId: row?.id ?? '' });
  expect(got.delivery).toMatchObject({ status: DeliveryStatus.SUCCEEDED, attemptCount: 3, eventId, lastResponseStatus: 200 });
  expect(got.attempts.map((a) => [a.attemptNumber, a.responseStatus, a.responseBodyExcerpt])).toEqual([
    [1, 500, 'answer 1'],
    [2, 500, 'answer 2'],
    [3, 200, 'answer 3'],
  ]);
  for (const [i, a] of got.attempts.entries()) {
    expect(a.requestBody).toBe(requests[i]?.body);
    expect(a.requestHeaders['webhook-id']).toBe(eventId);
    expect(a.requestHeaders['webhook-signature']).toBe(requests[i]?.headers['webhook-signature']);
    expect(a.requestHeaders['webhook-timestamp']).toBe(requests[i]?.headers['webhook-timestamp']);
    expect(a.durationMs).toBeGreaterThanOrEqual(0);
  }
  // The retry waits follow the schedule (100 ms, 200 ms, ±20% jitter).
  const gaps = requests.slice(1).map((q, i) => q.at - (requests[i]?.at ?? 0));
  expect(gaps[0]).toBeGreaterThanOrEqual(75);
  expect(gaps[1]).toBeGreaterThanOrEqual(155);

  const list = await h.client.listWebhookDeliveries({ projectId: project.id });
  expect(list.endpointHealth).toMatchObject({ url: r.url, consecutiveFailures: 0 });
  expect(list.endpointHealth?.lastSuccessAt).toBeDefined();
});

test('307, 500, 200: the redirect is not followed, and its attempt says so (the status alone does not); a plain failure\'s status says enough', async () => {
  const statuses = [307, 500, 200];
  const r = await receiver((_req, i) => ({ status: statuses[i] ?? 200, body: '' }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  await h.publish('invoice.paid', invoicePaid(project.id));
  await r.waitFor(3);
  const [row] = await eventually(async () => {
    const rows = await deliveriesOf(project.id);
    return rows[0]?.status === 'succeeded' ? rows : undefined;
  });
  const got = await h.client.getWebhookDelivery({ projectId: project.id, deliveryId: row?.id ?? '' });
  expect(got.attempts.map((a) => [a.responseStatus, a.error ?? ''])).toEqual([
    [307, 'HTTP 307 (redirects are not followed)'],
    [500, ''],
    [200, ''],
  ]);
});

test("a retry goes to the project's webhook URL of the moment: a merchant who fixes a broken URL gets the pending retries there", async () => {
  const broken = await receiver(() => ({ status: 500, body: 'down' }));
  const fixed = await receiver();
  const project = h.auth.addProject({ webhookUrl: broken.url });
  const eventId = await h.publish('invoice.paid', invoicePaid(project.id));
  await broken.waitFor(1);
  await h.updateProject(project.id, { webhookUrl: fixed.url }); // the merchant's PATCH

  const [request] = await fixed.waitFor(1);
  expect(request?.headers['webhook-id']).toBe(eventId);
  expect(() => new Webhook(project.webhookSecret).verify(request!.body, request!.headers as Record<string, string>)).not.toThrow();
  const [row] = await eventually(async () => {
    const rows = await deliveriesOf(project.id);
    return rows[0]?.status === 'succeeded' ? rows : undefined;
  });
  const got = await h.client.getWebhookDelivery({ projectId: project.id, deliveryId: row?.id ?? '' });
  expect(got.delivery).toMatchObject({ url: fixed.url, status: DeliveryStatus.SUCCEEDED, lastResponseStatus: 200 });
  const attempts = await h.sql<{ url: string; response_status: number }[]>`
    select url, response_status from webhook_attempts where delivery_id = ${row!.id} order by attempt_number`;
  expect(attempts.at(0)).toEqual({ url: broken.url, response_status: 500 });
  expect(attempts.at(-1)).toEqual({ url: fixed.url, response_status: 200 });
  expect(broken.requests.length + fixed.requests.length).toBe(attempts.length);
});

test('retries exhausted → failed, the last error kept, notifier.webhook_delivery_failed published; the endpoint shows its failures', async () => {
  const r = await receiver(() => ({ status: 503, body: 'down for maintenance' }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  const eventId = await h.publish('invoice.paid', invoicePaid(project.id));
  await r.waitFor(3);
  const [row] = await eventually(async () => {
    const rows = await deliveriesOf(project.id);
    return rows[0]?.status === 'failed' ? rows : undefined;
  });
  expect(row?.attempt_count).toBe(3);
  await new Promise((resolve) => setTimeout(resolve, 300));
  expect(r.requests).toHaveLength(3); // nothing after the last attempt

  const list = await h.client.listWebhookDeliveries({ projectId: project.id });
  expect(list.deliveries[0]).toMatchObject({ status: DeliveryStatus.FAILED, attemptCount: 3, lastResponseStatus: 503 });
  expect(list.deliveries[0]?.nextAttemptAt).toBeUndefined();
  expect(list.endpointHealth).toMatchObject({ url: r.url, consecutiveFailures: 3 });
  expect(list.endpointHealth?.lastSuccessAt).toBeUndefined();

  // The failure event reaches the notifier's stream through its outbox.
  const jsm = await h.nats.jetstreamManager();
  const stream = h.namespace.streamName('notifier');
  const failed = await eventually(async () => {
    const info = await jsm.streams.info(stream).catch(() => undefined);
    if (!info || info.state.messages === 0) return undefined;
    const name = `t-${randomUUID().slice(0, 8)}`;
    await jsm.consumers.add(stream, { name, ack_policy: AckPolicy.None, deliver_policy: DeliverPolicy.All });
    const consumer = await h.nats.jetstream().consumers.get(stream, name);
    const msgs = await consumer.fetch({ max_messages: 100, expires: 1000 });
    for await (const m of msgs) {
      if (m.subject !== h.namespace.subject('notifier.webhook_delivery_failed')) continue;
      const event = fromJson(WebhookDeliveryFailedSchema, m.json<JsonValue>());
      if (event.eventId === eventId) return event;
    }
    return undefined;
  });
  expect(failed).toMatchObject({ deliveryId: row?.id, projectId: project.id, eventType: 'invoice.paid', url: r.url, attemptCount: 3, lastResponseStatus: 503 });
  expect(failed.failedAt && timestampDate(failed.failedAt).getTime()).toBeLessThanOrEqual(Date.now());
});

test('a project without a webhook URL, non-webhook events and unknown projects record nothing to deliver', async () => {
  const r = await receiver();
  const withoutUrl = h.auth.addProject({});
  const withUrl = h.auth.addProject({ webhookUrl: r.url });
  await h.publish('invoice.paid', invoicePaid(withoutUrl.id));
  await h.publish('invoice.paid', invoicePaid(randomUUID()));
  await h.publish(
    'payout.verification_code_issued',
    toJson(
      PayoutVerificationCodeIssuedSchema,
      create(PayoutVerificationCodeIssuedSchema, { payoutId: randomUUID(), projectId: withUrl.id, environment: 'live', amount: '1', currency: 'USDT', status: 'AwaitingVerification', email: 'm@example.com', code: '123456' }),
    ),
  );
  await h.publish('invoice.paid', { invoiceId: 42 }); // malformed: skipped, does not block what follows
  const marker = await h.publish('invoice.paid', invoicePaid(withUrl.id));
  await r.waitFor(1);
  expect(r.requests.map((q) => q.headers['webhook-id'])).toEqual([marker]);
  expect(await deliveriesOf(withoutUrl.id)).toEqual([]);
  const all = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where project_id = ${withUrl.id}`;
  expect(all[0]?.n).toBe(1);
});

test('events about one invoice keep their order while the earlier one is on its first attempt, and stop waiting once it failed', async () => {
  // invoice.paid fails once (answered after 300 ms); invoice.expired of the same key waits for that
  // first attempt, then goes without waiting for paid's retry.
  const r = await receiver((_req, i) => (i === 0 ? { status: 500, delayMs: 300 } : { status: 200 }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  const invoiceId = randomUUID();
  const paid = await h.publish('invoice.paid', invoicePaid(project.id, { invoiceId }), { key: invoiceId });
  const expired = await h.publish('invoice.expired', invoiceExpired(project.id, invoiceId), { key: invoiceId });
  const requests = await r.waitFor(3);
  expect(requests.map((q) => q.headers['webhook-id'])).toEqual([paid, expired, paid]);
  // expired left only after paid's first attempt had its answer.
  expect(requests[1]!.at - requests[0]!.at).toBeGreaterThanOrEqual(280);
});

test('the delivery log: filters, cursor pagination newest first, not_found for another project, validation', async () => {
  const r = await receiver();
  const project = h.auth.addProject({ webhookUrl: r.url });
  const other = h.auth.addProject({ webhookUrl: r.url });
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) ids.push(await h.publish('invoice.paid', invoicePaid(project.id)));
  const expiredId = await h.publish('invoice.expired', invoiceExpired(project.id, randomUUID()));
  await r.waitFor(6);
  await eventually(async () => ((await deliveriesOf(project.id)).every((d) => d.status === 'succeeded') ? true : undefined));

  const page1 = await h.client.listWebhookDeliveries({ projectId: project.id, pageSize: 4 });
  const page2 = await h.client.listWebhookDeliveries({ projectId: project.id, pageSize: 4, cursor: page1.nextCursor });
  expect(page1.nextCursor).not.toBe('');
  expect(page2.nextCursor).toBe('');
  const seen = [...page1.deliveries, ...page2.deliveries].map((d) => d.eventId);
  expect(seen).toEqual([expiredId, ...[...ids].reverse()]);

  const paidOnly = await h.client.listWebhookDeliveries({ projectId: project.id, eventType: 'invoice.paid' });
  expect(paidOnly.deliveries).toHaveLength(5);
  const failedOnly = await h.client.listWebhookDeliveries({ projectId: project.id, status: DeliveryStatus.FAILED });
  expect(failedOnly.deliveries).toEqual([]);
  const succeeded = await h.client.listWebhookDeliveries({ projectId: project.id, status: DeliveryStatus.SUCCEEDED, pageSize: 100 });
  expect(succeeded.deliveries).toHaveLength(6);
  expect(succeeded.deliveries[0]).toMatchObject({ projectId: project.id, url: r.url, eventType: 'invoice.expired', attemptCount: 1, lastResponseStatus: 200 });
  expect(succeeded.deliveries[0]?.redeliveryOf).toBeUndefined();

  const someId = page1.deliveries[0]?.id ?? '';
  expect(await failure(h.client.getWebhookDelivery({ projectId: other.id, deliveryId: someId }))).toMatchObject({ code: 'not_found' });
  expect(await failure(h.client.redeliverWebhook({ projectId: other.id, deliveryId: someId }))).toMatchObject({ code: 'not_found' });
  expect(await failure(h.client.listWebhookDeliveries({ projectId: project.id, cursor: 'bogus!' }))).toMatchObject({
    code: 'validation_failed',
    violations: [{ field: 'cursor', message: expect.any(String) }],
  });
  expect(await failure(h.client.listWebhookDeliveries({ projectId: 'nope', pageSize: 1000 }))).toMatchObject({
    code: 'validation_failed',
    violations: [{ field: 'projectId', message: 'must be a UUID' }, { field: 'pageSize', message: expect.any(String) }],
  });
});

test('redelivery: a new pending row pointing at the original, same event id and body, signed with the CURRENT secret', async () => {
  const r = await receiver();
  const project = h.auth.addProject({ webhookUrl: r.url });
  const eventId = await h.publish('invoice.paid', invoicePaid(project.id));
  const [first] = await r.waitFor(1);
  const [original] = await eventually(async () => {
    const rows = await deliveriesOf(project.id);
    return rows[0]?.status === 'succeeded' ? rows : undefined;
  });

  // The merchant rotates the secret, then asks for the event again.
  const rotated = generateWebhookSecret();
  h.auth.projects.set(project.id, { ...project, webhookSecret: rotated });
  const res = await h.client.redeliverWebhook({ projectId: project.id, deliveryId: original?.id ?? '' });
  expect(res.delivery).toMatchObject({ eventId, redeliveryOf: original?.id, status: DeliveryStatus.PENDING, attemptCount: 0, payload: first?.body });
  expect(res.delivery?.id).not.toBe(original?.id);

  const [, again] = await r.waitFor(2);
  expect(again?.headers['webhook-id']).toBe(eventId);
  expect(again?.body).toBe(first?.body);
  expect(() => new Webhook(rotated).verify(again?.body ?? '', again?.headers as Record<string, string>)).not.toThrow();
  expect(() => new Webhook(project.webhookSecret).verify(again?.body ?? '', again?.headers as Record<string, string>)).toThrow();

  // Without a webhook URL there is nowhere to redeliver to.
  h.auth.projects.set(project.id, { ...project, webhookUrl: undefined });
  expect(await failure(h.client.redeliverWebhook({ projectId: project.id, deliveryId: original?.id ?? '' }))).toMatchObject({
    code: 'webhook_not_configured',
  });
});

test('auth unreachable: events wait (nothing lost), and deliveries are postponed without counting an attempt', async () => {
  const r = await receiver();
  const project = h.auth.addProject({ webhookUrl: r.url });
  h.auth.down = true;
  try {
    await h.publish('invoice.paid', invoicePaid(project.id));
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(r.requests).toHaveLength(0);
  } finally {
    h.auth.down = false;
  }
  // The consumer retries the event (nak with backoff) and the webhook goes out.
  await r.waitFor(1, 15_000);
  const [row] = await eventually(async () => {
    const rows = await deliveriesOf(project.id);
    return rows[0]?.status === 'succeeded' ? rows : undefined;
  });
  expect(row?.attempt_count).toBe(1);
});

async function failure(call: Promise<unknown>) {
  try {
    await call;
  } catch (err) {
    return errorFacts(err);
  }
  throw new Error('expected the call to fail');
}

test('a receiver that answers 200 at once and trickles its body past the timeout has the event: delivered in one attempt, never sent again (a second review saw the worker retry it)', async () => {
  const trickle = await startNotifier({ WEBHOOK_TIMEOUT_MS: '1000', WEBHOOK_RETRY_SCHEDULE: '100ms,200ms' });
  const http = await import('node:http');
  const got: string[] = [];
  const server = http.createServer((req, res) => {
    got.push(String(req.headers['webhook-id']));
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('x'); // and never ends
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const project = trickle.auth.addProject({ webhookUrl: `http://127.0.0.1:${(server.address() as { port: number }).port}/hook` });
    const eventId = await trickle.publish('invoice.paid', invoicePaid(project.id));
    const [row] = await eventually(async () => {
      const rows = await trickle.sql<{ id: string; status: string; attempt_count: number }[]>`select id, status, attempt_count from webhook_deliveries where project_id = ${project.id}`;
      return rows[0]?.status === 'succeeded' ? rows : undefined;
    }, 10_000);
    expect(row).toMatchObject({ status: 'succeeded', attempt_count: 1 });
    await new Promise((r) => setTimeout(r, 1_500)); // the retry schedule's waits, twice over
    expect(got).toEqual([eventId]);
    const detail = await trickle.client.getWebhookDelivery({ projectId: project.id, deliveryId: row!.id });
    expect(detail.attempts.map((a) => [a.responseStatus, a.error ?? '', a.durationMs < 1_000])).toEqual([[200, '', true]]);
  } finally {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
    await trickle.dispose();
  }
}, 30_000);
