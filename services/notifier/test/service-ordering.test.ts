/**
 * Issue 28 point 2: one failing event must not hold an invoice's later events for minutes. The
 * notifier in-process on real Postgres and NATS, events published as the invoice service's relay
 * publishes them, the shipped first retry (5 s) and a real receiver:
 * - a receiver that rejects invoice.confirming gets invoice.paid at once, not after confirming's retries;
 * - order is kept while it costs nothing (the earlier event's first attempt);
 * - a successful manual redelivery releases what waits behind the held event, and the held event
 *   is not delivered again afterwards;
 * - every body carries occurredAt, so a receiver can tell the newer state.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { InvoiceConfirmingSchema, InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { DeliveryStatus } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { eventually, Receiver, startNotifier, type Harness, type ReceivedRequest } from './support/harness';

let h: Harness;
const receivers: Receiver[] = [];

beforeAll(async () => {
  // The shipped schedule's first retry (5 s, then 5 min); attempts time out after 4 s here.
  h = await startNotifier({ WEBHOOK_RETRY_SCHEDULE: '5s,5m,30m', WEBHOOK_TIMEOUT_MS: '4000' });
});
afterAll(async () => {
  for (const r of receivers) await r.stop();
  await h?.dispose();
});

async function receiver(respond: ConstructorParameters<typeof Receiver>[0]): Promise<Receiver> {
  const r = await new Receiver(respond).start();
  receivers.push(r);
  return r;
}

const base = (projectId: string, invoiceId: string) => ({ invoiceId, projectId, orderId: 'order-7', currency: 'ETH', environment: 'live', amount: '0.5' });

function confirming(projectId: string, invoiceId: string): JsonValue {
  return toJson(InvoiceConfirmingSchema, create(InvoiceConfirmingSchema, { ...base(projectId, invoiceId), status: 'Confirming', confirmations: 1, confirmationsRequired: 3 }));
}

function paid(projectId: string, invoiceId: string): JsonValue {
  return toJson(
    InvoicePaidSchema,
    create(InvoicePaidSchema, { ...base(projectId, invoiceId), status: 'Paid', transactionHash: 'ab'.repeat(32), paidAt: timestampFromDate(new Date()) }),
  );
}

const typeOf = (q: ReceivedRequest) => String(q.headers['webhook-event-type']);

async function deliveryOf(projectId: string, eventId: string, original: boolean) {
  return eventually(async () => {
    const [row] = await h.sql<{ id: string; status: string; attempt_count: number; next_attempt_at: Date | null; delivered_by: string | null }[]>`
      select id, status, attempt_count, next_attempt_at, delivered_by from webhook_deliveries
      where project_id = ${projectId} and event_id = ${eventId} and (redelivery_of is null) = ${original}`;
    return row;
  });
}

test('a receiver that rejects invoice.confirming gets invoice.paid at once, not after confirming’s retries; occurredAt orders them', async () => {
  const r = await receiver((q) => (typeOf(q) === 'invoice.confirming' ? { status: 400, body: 'not handled' } : { status: 200 }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  const invoiceId = randomUUID();
  const confirmedAt = new Date(Date.now() - 1_000);
  await h.publish('invoice.confirming', confirming(project.id, invoiceId), { key: invoiceId, occurredAt: confirmedAt });
  const paidAt = new Date();
  await h.publish('invoice.paid', paid(project.id, invoiceId), { key: invoiceId, occurredAt: paidAt });

  const [paidRequest] = await r.waitFor(1, 30_000, (q) => typeOf(q) === 'invoice.paid');
  // Before this work it waited for confirming's 5 s retry, then its 5 min one: minutes.
  expect(paidRequest!.at - paidAt.getTime()).toBeLessThan(5_000);
  expect(r.requests.map(typeOf)).toEqual(['invoice.confirming', 'invoice.paid']);

  // The receiver tells the newer state by occurredAt, whatever order retries bring them in.
  const [confirmingRequest] = r.requests;
  expect(JSON.parse(confirmingRequest!.body).occurredAt).toBe(confirmedAt.toISOString());
  expect(JSON.parse(paidRequest!.body).occurredAt).toBe(paidAt.toISOString());
});

test('order is kept while it costs nothing: invoice.paid waits for confirming’s first attempt, not longer', async () => {
  // confirming's first attempt hangs until the 4 s timeout.
  const r = await receiver((q, i) => (typeOf(q) === 'invoice.confirming' && i === 0 ? 'hang' : { status: 200 }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  const invoiceId = randomUUID();
  await h.publish('invoice.confirming', confirming(project.id, invoiceId), { key: invoiceId });
  await h.publish('invoice.paid', paid(project.id, invoiceId), { key: invoiceId });
  const [first, second] = await r.waitFor(2, 15_000);
  expect([first, second].map((q) => typeOf(q!))).toEqual(['invoice.confirming', 'invoice.paid']);
  // Held during the first attempt (order), released when it timed out, before its retry (5 s later).
  expect(second!.at - first!.at).toBeGreaterThanOrEqual(3_800);
  expect(second!.at - first!.at).toBeLessThan(8_000);
});

test('a successful redelivery releases what waits behind the held event, which is then never delivered again', async () => {
  // confirming's original attempt hangs (until the 4 s timeout); anything after it is answered 200.
  const r = await receiver((q, i) => (typeOf(q) === 'invoice.confirming' && i === 0 ? 'hang' : { status: 200 }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  const invoiceId = randomUUID();
  const confirmingId = await h.publish('invoice.confirming', confirming(project.id, invoiceId), { key: invoiceId });
  await h.publish('invoice.paid', paid(project.id, invoiceId), { key: invoiceId });
  await r.waitFor(1);
  const original = await deliveryOf(project.id, confirmingId, true);

  // The merchant presses Redeliver while the original hangs: it succeeds, and invoice.paid follows.
  const asked = Date.now();
  const redelivery = await h.client.redeliverWebhook({ projectId: project.id, deliveryId: original.id });
  const requests = await r.waitFor(3, 10_000);
  expect(requests.map(typeOf)).toEqual(['invoice.confirming', 'invoice.confirming', 'invoice.paid']);
  expect(requests[2]!.at - asked).toBeLessThan(3_000); // not after the original's 4 s timeout

  // The original is closed as delivered by the redelivery: no retry is left to send confirming again.
  const closed = await h.client.getWebhookDelivery({ projectId: project.id, deliveryId: original.id });
  expect(closed.delivery).toMatchObject({ status: DeliveryStatus.SUCCEEDED, deliveredBy: redelivery.delivery?.id });
  expect(closed.delivery?.nextAttemptAt).toBeUndefined();
  // The redelivery itself delivered it: nothing names another.
  expect((await h.client.getWebhookDelivery({ projectId: project.id, deliveryId: redelivery.delivery!.id })).delivery?.deliveredBy).toBeUndefined();
  expect(await deliveryOf(project.id, confirmingId, true)).toMatchObject({ status: 'succeeded', delivered_by: redelivery.delivery?.id, next_attempt_at: null });

  // The hung attempt ends (timeout) and is logged, and nothing more goes out past its retry time.
  await eventually(async () => {
    const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_attempts where delivery_id = ${original.id}`;
    return row && row.n === 1 ? row : undefined;
  });
  await new Promise((resolve) => setTimeout(resolve, 6_000));
  expect(r.requests.map(typeOf)).toEqual(['invoice.confirming', 'invoice.confirming', 'invoice.paid']);
  // It stays closed as delivered by the redelivery, and shows the one attempt it made (the hung one).
  expect(await deliveryOf(project.id, confirmingId, true)).toMatchObject({ status: 'succeeded', delivered_by: redelivery.delivery?.id, attempt_count: 1, next_attempt_at: null });
});

test('issue 28 as reported: confirming rejected, paid delivered, the merchant fixes the receiver and redelivers: confirming arrives once more, never a third time', async () => {
  let fixed = false;
  const r = await receiver((q) => (typeOf(q) === 'invoice.confirming' && !fixed ? { status: 500 } : { status: 200 }));
  const project = h.auth.addProject({ webhookUrl: r.url });
  const invoiceId = randomUUID();
  const confirmingId = await h.publish('invoice.confirming', confirming(project.id, invoiceId), { key: invoiceId });
  await h.publish('invoice.paid', paid(project.id, invoiceId), { key: invoiceId });
  await r.waitFor(1, 10_000, (q) => typeOf(q) === 'invoice.paid');
  const original = await deliveryOf(project.id, confirmingId, true);
  expect(original).toMatchObject({ status: 'pending', attempt_count: 1 }); // its retry due in 5 s

  fixed = true;
  await h.client.redeliverWebhook({ projectId: project.id, deliveryId: original.id });
  await r.waitFor(2, 10_000, (q) => typeOf(q) === 'invoice.confirming');
  // Past the original's retry time (5 s ± 20 %): the event is not sent a third time.
  await new Promise((resolve) => setTimeout(resolve, 6_500));
  expect(r.requests.map(typeOf)).toEqual(['invoice.confirming', 'invoice.paid', 'invoice.confirming']);
  expect(await deliveryOf(project.id, confirmingId, true)).toMatchObject({ status: 'succeeded', attempt_count: 1 });
});

test('a finished event wakes the replicas only when an event of its invoice waits behind it', async () => {
  const notifications: string[] = [];
  const listener = await h.sql.listen('notifier_deliveries', (payload) => notifications.push(payload));
  try {
    // Four invoices, one event each: each delivery is leased at insert and sent at once; nothing
    // waits behind any of them, so no replica is woken to claim (before: one wake-up per success).
    // Four is the project's share of slots (WEBHOOK_MAX_PER_PROJECT's default): a fifth event
    // arriving while four attempts are in flight is left to the claim path, a wake-up of its own.
    const r = await receiver((q) => (typeOf(q) === 'invoice.confirming' ? { status: 200, delayMs: 300 } : { status: 200 }));
    const project = h.auth.addProject({ webhookUrl: r.url });
    for (let i = 0; i < 4; i++) {
      const invoiceId = randomUUID();
      await h.publish('invoice.paid', paid(project.id, invoiceId), { key: invoiceId });
    }
    await r.waitFor(4);
    await eventually(async () => {
      const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where project_id = ${project.id} and status = 'succeeded'`;
      return row?.n === 4 ? true : undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(notifications).toHaveLength(0);

    // paid arrives while confirming's attempt (300 ms) is in flight: it waits (a wake-up as it is
    // queued for the claim path), and confirming's end releases it (a wake-up); paid's own end
    // has nothing behind it.
    const invoiceId = randomUUID();
    await h.publish('invoice.confirming', confirming(project.id, invoiceId), { key: invoiceId });
    await r.waitFor(5);
    await h.publish('invoice.paid', paid(project.id, invoiceId), { key: invoiceId });
    const delivered = await r.waitFor(6);
    expect(delivered.slice(4).map(typeOf)).toEqual(['invoice.confirming', 'invoice.paid']);
    await eventually(async () => {
      const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_deliveries where project_id = ${project.id} and status = 'succeeded'`;
      return row?.n === 6 ? true : undefined;
    });
    await new Promise((resolve) => setTimeout(resolve, 300));
    expect(notifications).toHaveLength(2);
  } finally {
    await listener.unlisten();
  }
});
