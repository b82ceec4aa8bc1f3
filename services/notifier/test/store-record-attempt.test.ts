/**
 * An ended attempt is recorded in one statement (docs/webhook-delivery.md#recording): the attempt
 * row and the endpoint's health always, the delivery's next state only while the lease is still
 * the worker's, and what its end settles (duplicates closed, replicas woken). Against the
 * notifier's real schema; the statements sent are counted by postgres.js's debug hook (test/support/statements.ts).
 */
import { randomUUID } from 'node:crypto';
import { DELIVERIES_CHANNEL, recordAttempt, type DeliveryRow, type EndedAttempt } from '../src/store/deliveries';
import { rowsTouched } from '../../../test/support/plans';
import { eventually, startNotifier, type Harness } from './support/harness';
import { recordingPool, type StatementRecorder } from '../../../test/support/statements';

let h: Harness;
let recorder: StatementRecorder;
const notifications: string[] = [];
let unlisten: (() => Promise<void>) | undefined;

beforeAll(async () => {
  h = await startNotifier();
  recorder = await recordingPool(h.svc.database.url, 'notifier');
  const listening = await h.sql.listen(DELIVERIES_CHANNEL, (payload) => notifications.push(payload));
  unlisten = () => listening.unlisten();
});
afterAll(async () => {
  await unlisten?.();
  await recorder?.end();
  await h?.dispose();
});

/** A delivery of a project the running worker does not know, leased to `token` (the worker leaves it alone). */
async function leasedDelivery(fields: { projectId?: string; eventId?: string; eventKey?: string | null; redeliveryOf?: string; attemptCount?: number } = {}): Promise<DeliveryRow & { lease_token: string }> {
  const token = randomUUID();
  const [row] = await h.sql<DeliveryRow[]>`
    insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at, lease_token, redelivery_of, attempt_count)
    values (${randomUUID()}, ${fields.projectId ?? `record-${randomUUID()}`}, ${fields.eventId ?? randomUUID()}, 'invoice.paid',
            ${fields.eventKey === undefined ? randomUUID() : fields.eventKey}, 'https://shop.example/hooks', '{}',
            now() + interval '1 hour', ${token}, ${fields.redeliveryOf ?? null}, ${fields.attemptCount ?? 0})
    returning *`;
  return { ...row!, lease_token: token };
}

function ended(row: DeliveryRow, leaseToken: string, outcome: 'success' | 'retry' | 'failed'): EndedAttempt {
  const at = new Date();
  const success = outcome === 'success';
  return {
    delivery: row,
    leaseToken,
    success,
    update: {
      url: row.url,
      status: outcome === 'success' ? 'succeeded' : outcome === 'failed' ? 'failed' : 'pending',
      attemptCount: row.attempt_count + 1,
      nextAttemptAt: outcome === 'retry' ? new Date(at.getTime() + 60_000) : null,
      finishedAt: outcome === 'retry' ? null : at,
      lastAttemptAt: at,
      lastResponseStatus: success ? 204 : 500,
      lastError: success ? null : 'HTTP 500',
    },
    attempt: {
      attemptNumber: row.attempt_count + 1,
      attemptedAt: at,
      url: row.url,
      requestHeaders: { 'webhook-id': row.event_id },
      requestBody: row.body,
      responseStatus: success ? 204 : 500,
      responseBodyExcerpt: success ? '' : 'oops',
      durationMs: 3,
      error: null,
    },
  };
}

async function deliveryNow(id: string): Promise<DeliveryRow> {
  const [row] = await h.sql<DeliveryRow[]>`select * from webhook_deliveries where id = ${id}`;
  return row!;
}

async function endpointOf(projectId: string): Promise<{ consecutive_failures: number; last_success_at: Date | null; last_failure_at: Date | null } | undefined> {
  const [row] = await h.sql<{ consecutive_failures: number; last_success_at: Date | null; last_failure_at: Date | null }[]>`
    select consecutive_failures, last_success_at, last_failure_at from webhook_endpoints where project_id = ${projectId}`;
  return row;
}

/** Lets a NOTIFY sent at the statement's commit arrive, then says how many came since `from`. */
async function notificationsSince(from: number): Promise<number> {
  const marker = `marker-${randomUUID()}`;
  await h.sql`select pg_notify(${DELIVERIES_CHANNEL}, ${marker})`;
  await eventually(async () => (notifications.includes(marker) ? true : undefined));
  return notifications.slice(from).filter((n) => n !== marker).length;
}

test('a success is recorded in one statement: the delivery, the attempt and the endpoint', async () => {
  const row = await leasedDelivery();
  recorder.reset();
  const result = await recordAttempt(recorder.sql, ended(row, row.lease_token, 'success'));
  expect(recorder.statements).toHaveLength(1);
  expect(result.ours).toBe(true);
  const after = await deliveryNow(row.id);
  expect(after).toMatchObject({ status: 'succeeded', attempt_count: 1, lease_token: null, next_attempt_at: null, last_response_status: 204 });
  const attempts = await h.sql`select attempt_number, response_status, request_headers from webhook_attempts where delivery_id = ${row.id}`;
  expect(attempts).toEqual([{ attempt_number: 1, response_status: 204, request_headers: { 'webhook-id': row.event_id } }]);
  expect(await endpointOf(row.project_id)).toMatchObject({ consecutive_failures: 0, last_failure_at: null });
});

test('failures count up on the endpoint and a success resets them; a retry keeps the delivery pending with its next due time', async () => {
  const projectId = `record-${randomUUID()}`;
  const first = await leasedDelivery({ projectId });
  await recordAttempt(recorder.sql, ended(first, first.lease_token, 'retry'));
  const second = await leasedDelivery({ projectId });
  await recordAttempt(recorder.sql, ended(second, second.lease_token, 'failed'));
  expect(await endpointOf(projectId)).toMatchObject({ consecutive_failures: 2, last_success_at: null });
  expect(await deliveryNow(first.id)).toMatchObject({ status: 'pending', attempt_count: 1, lease_token: null });
  expect((await deliveryNow(first.id)).next_attempt_at!.getTime()).toBeGreaterThan(Date.now() + 30_000);
  expect(await deliveryNow(second.id)).toMatchObject({ status: 'failed', next_attempt_at: null });
  const third = await leasedDelivery({ projectId });
  await recordAttempt(recorder.sql, ended(third, third.lease_token, 'success'));
  const health = await endpointOf(projectId);
  expect(health?.consecutive_failures).toBe(0);
  expect(health?.last_success_at).not.toBeNull();
  expect(health?.last_failure_at).not.toBeNull();
});

test('a lost lease logs the attempt and leaves the delivery to the replica that holds it now', async () => {
  const row = await leasedDelivery();
  const result = await recordAttempt(recorder.sql, ended(row, randomUUID(), 'success'));
  expect(result.ours).toBe(false);
  expect(await deliveryNow(row.id)).toMatchObject({ status: 'pending', attempt_count: 0, lease_token: row.lease_token });
  const [attempts] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_attempts where delivery_id = ${row.id}`;
  expect(attempts?.n).toBe(1);
});

test("a redelivery's success closes the original still pending, and wakes the replicas for what waited behind it", async () => {
  const projectId = `record-${randomUUID()}`;
  const eventId = randomUUID();
  const original = await leasedDelivery({ projectId, eventId, attemptCount: 2 });
  const redelivery = await leasedDelivery({ projectId, eventId, redeliveryOf: original.id, eventKey: original.event_key });
  const from = notifications.length;
  const result = await recordAttempt(recorder.sql, ended(redelivery, redelivery.lease_token, 'success'));
  expect(result.ours).toBe(true);
  expect(await deliveryNow(original.id)).toMatchObject({ status: 'succeeded', delivered_by: redelivery.id, lease_token: null, next_attempt_at: null });
  expect(await notificationsSince(from)).toBe(1);
});

test('concurrent redeliveries: one closed in flight by another\'s success stays succeeded and still shows its own attempt (count, time, answer)', async () => {
  const projectId = `record-${randomUUID()}`;
  const eventId = randomUUID();
  const original = await leasedDelivery({ projectId, eventId, attemptCount: 1 });
  const first = await leasedDelivery({ projectId, eventId, redeliveryOf: original.id, eventKey: original.event_key });
  const second = await leasedDelivery({ projectId, eventId, redeliveryOf: original.id, eventKey: original.event_key });
  expect(await recordAttempt(recorder.sql, ended(first, first.lease_token, 'success'))).toEqual({ ours: true, deliveredMeanwhile: false });
  expect(await deliveryNow(second.id)).toMatchObject({ status: 'succeeded', delivered_by: first.id, attempt_count: 0, last_response_status: null });
  // The second was already sending: its answer arrives after the first closed it (an outside review
  // saw such rows listed as succeeded with no attempt, and a "lease lost" warning with one replica).
  const late = ended(second, second.lease_token, 'success');
  expect(await recordAttempt(recorder.sql, late)).toEqual({ ours: false, deliveredMeanwhile: true });
  expect(await deliveryNow(second.id)).toMatchObject({ status: 'succeeded', delivered_by: first.id, attempt_count: 1, last_response_status: 204, last_attempt_at: late.update.lastAttemptAt });
  const [attempts] = await h.sql<{ n: number }[]>`select count(*)::int as n from webhook_attempts where delivery_id = ${second.id}`;
  expect(attempts?.n).toBe(1);
  // A lease taken over by another replica is still no such case.
  const taken = await leasedDelivery();
  expect(await recordAttempt(recorder.sql, ended(taken, randomUUID(), 'success'))).toEqual({ ours: false, deliveredMeanwhile: false });
});

test("an original's first attempt wakes the replicas when it ends only if a later original of its invoice waits behind it", async () => {
  const projectId = `record-${randomUUID()}`;
  const alone = await leasedDelivery({ projectId });
  let from = notifications.length;
  await recordAttempt(recorder.sql, ended(alone, alone.lease_token, 'success'));
  expect(await notificationsSince(from)).toBe(0);

  const invoice = randomUUID();
  const first = await leasedDelivery({ projectId, eventKey: invoice });
  await leasedDelivery({ projectId, eventKey: invoice }); // queued behind it (its own lease keeps the worker away)
  from = notifications.length;
  await recordAttempt(recorder.sql, ended(first, first.lease_token, 'retry'));
  // Its first attempt failed: the later one no longer waits for its retries, and goes now.
  expect(await notificationsSince(from)).toBe(1);

  // A retry's end releases nothing: only a first attempt holds (see heldBy).
  const retried = await leasedDelivery({ projectId, eventKey: randomUUID(), attemptCount: 1 });
  await leasedDelivery({ projectId, eventKey: retried.event_key });
  from = notifications.length;
  await recordAttempt(recorder.sql, ended(retried, retried.lease_token, 'success'));
  expect(await notificationsSince(from)).toBe(0);
});

test('recording reads a handful of rows even when the statistics say no delivery is pending and know none of its project (taken between bursts)', async () => {
  // Between bursts: only finished deliveries, and the statistics taken then.
  await h.sql`
    insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, status, attempt_count, next_attempt_at, finished_at)
    select gen_random_uuid(), 'record-finished', gen_random_uuid()::text, 'invoice.paid', gen_random_uuid()::text,
           'https://shop.example/hooks', '{}', 'succeeded', 1, null, now()
    from generate_series(1, 5000)`;
  await h.sql`analyze webhook_deliveries`;
  const read = await h.sql
    .begin(async (tx) => {
      // The next burst, of a project those statistics have not seen (rolled back below: the running worker never sees it).
      await tx`
        insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at)
        select gen_random_uuid(), 'record-burst', gen_random_uuid()::text, 'invoice.paid', gen_random_uuid()::text,
               'https://shop.example/hooks', '{}', now() - interval '1 minute' + g * interval '1 millisecond'
        from generate_series(1, 3000) g`;
      const [row] = await tx<DeliveryRow[]>`
        update webhook_deliveries set lease_token = gen_random_uuid(), next_attempt_at = now() + interval '1 minute'
        where id = (select id from webhook_deliveries where project_id = 'record-burst' order by seq limit 1)
        returning *`;
      const before = await rowsTouched(tx, 'webhook_deliveries');
      const { ours } = await recordAttempt(tx, ended(row!, row!.lease_token!, 'success'));
      expect(ours).toBe(true);
      throw new Rollback((await rowsTouched(tx, 'webhook_deliveries')) - before);
    })
    .catch((err: unknown) => {
      if (err instanceof Rollback) return err.value;
      throw err;
    });
  // The delivery by id, its event's other pending deliveries by event and project: a handful of
  // rows, not the project's 3,000 (migration 0043).
  expect(read).toBeLessThan(20);
});

class Rollback {
  constructor(readonly value: number) {}
}
