/**
 * The notifier's consumer applies an event in ONE statement (docs/performance.md#events): the
 * processed_events claim, the project event and the original delivery (leased to a reserved slot,
 * or due now with a NOTIFY) together, with no transaction around them. It was a transaction of
 * five round trips (BEGIN, claim, project event, delivery, COMMIT) per event. The handler runs
 * against the notifier's real schema; the statements sent are counted by postgres.js's debug hook (test/support/statements.ts).
 */
import { randomUUID } from 'node:crypto';
import { createLogger, type ConsumedEvent } from '@coinvoice/runtime';
import { NotifierEventHandler, type NotifierConsumerDeps } from '../src/events/consumers';
import type { ProjectContext } from '../src/project-context';
import { DELIVERIES_CHANNEL, type DeliveryRow } from '../src/store/deliveries';
import { invoicePaid } from './support/events';
import { eventually, startNotifier, type Harness } from './support/harness';
import { recordingPool, type StatementRecorder } from '../../../test/support/statements';

const CONSUMER = 'notifier-invoice-events';

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

function project(webhookUrl: string | undefined): ProjectContext {
  return { projectId: randomUUID(), environment: 'sandbox', webhookUrl, webhookSecret: 'whsec_test', previousWebhookSecrets: [], merchantEmail: 'm@example.com' };
}

/** The consumer's handler with a project directory that knows `context` only, and this replica's worker as `dispatch`. */
function handlerFor(context: ProjectContext, dispatch?: NotifierConsumerDeps['dispatch']): NotifierEventHandler {
  const known = async (id: string) => (id === context.projectId ? context : undefined);
  return new NotifierEventHandler({
    sql: recorder.sql,
    logger: createLogger({ service: 'notifier-test', level: 'silent' }),
    projects: { get: known, current: known },
    mailer: { description: 'none', send: async () => ({ messageId: 'unused' }), close: () => undefined },
    onDeliveryCreated: () => undefined,
    dispatch,
  });
}

/** A reservation of a slot as the worker hands out, counting its releases. */
function reserving(token: string): { dispatch: NotifierConsumerDeps['dispatch']; released: () => number } {
  let released = 0;
  return {
    dispatch: { reserve: () => ({ token, leaseMs: 30_000, release: () => void (released += 1), launch: () => undefined }) },
    released: () => released,
  };
}

function paidEvent(projectId: string): ConsumedEvent {
  const invoiceId = randomUUID();
  return { id: randomUUID(), type: 'invoice.paid', subject: 'ns.invoice.paid', payload: invoicePaid(projectId, { invoiceId }), key: invoiceId, deliveryCount: 1, streamSequence: 1 };
}

/** The consumer's claim, as IdempotentConsumer makes it. */
function claimOf(event: ConsumedEvent) {
  return recorder.sql`
    insert into processed_events (consumer_name, event_id) values (${CONSUMER}, ${event.id})
    on conflict do nothing returning event_id`;
}

async function rowsOf(event: ConsumedEvent): Promise<{ processed: number; projectEvents: number; deliveries: DeliveryRow[] }> {
  const [processed] = await h.sql<{ n: number }[]>`select count(*)::int as n from processed_events where consumer_name = ${CONSUMER} and event_id = ${event.id}`;
  const [projectEvents] = await h.sql<{ n: number }[]>`select count(*)::int as n from project_events where event_id = ${event.id}`;
  const deliveries = await h.sql<DeliveryRow[]>`select * from webhook_deliveries where event_id = ${event.id}`;
  return { processed: processed!.n, projectEvents: projectEvents!.n, deliveries };
}

test('an event of a project with a webhook: claim, project event and delivery due now in one statement, other replicas woken; again, nothing', async () => {
  const context = project('https://merchant.example/hooks');
  const handler = handlerFor(context);
  const event = paidEvent(context.projectId);
  recorder.reset();
  const first = await handler.handle(recorder.sql, event, claimOf(event));
  expect(recorder.statements).toHaveLength(1);
  expect(recorder.statements[0]).not.toMatch(/^\s*(begin|commit)/i);
  expect(first).toEqual({ claimed: true, then: { kind: 'queued', projectId: context.projectId } });
  const rows = await rowsOf(event);
  expect(rows).toMatchObject({ processed: 1, projectEvents: 1 });
  expect(rows.deliveries).toHaveLength(1);
  // Left to the claim path (the NOTIFY below says so): the running worker may have claimed it since.
  expect(rows.deliveries[0]).toMatchObject({ project_id: context.projectId, event_type: 'invoice.paid', event_key: event.key, url: context.webhookUrl });
  await eventually(async () => {
    expect(notifications).toContain(context.projectId);
    return true;
  });

  // Delivered again (an ack lost): the claim finds the event, and nothing else is written.
  recorder.reset();
  const again = await handler.handle(recorder.sql, event, claimOf(event));
  expect(recorder.statements).toHaveLength(1);
  expect(again).toEqual({ claimed: false, then: { kind: 'nothing' } });
  const after = await rowsOf(event);
  expect(after).toMatchObject({ processed: 1, projectEvents: 1 });
  expect(after.deliveries.map((row) => row.id)).toEqual(rows.deliveries.map((row) => row.id));
});

test('with a slot reserved, the delivery is inserted leased to it (sent right after the statement) and wakes no replica', async () => {
  const context = project('https://merchant.example/leased');
  const token = randomUUID();
  const slot = reserving(token);
  const handler = handlerFor(context, slot.dispatch);
  const event = paidEvent(context.projectId);
  const notified = notifications.length;
  recorder.reset();
  const handled = await handler.handle(recorder.sql, event, claimOf(event));
  expect(recorder.statements).toHaveLength(1);
  expect(handled.claimed).toBe(true);
  expect(handled.then.kind).toBe('leased');
  const { deliveries } = await rowsOf(event);
  expect(deliveries).toHaveLength(1);
  expect(deliveries[0]!.lease_token).toBe(token);
  expect(slot.released()).toBe(0);
  // A NOTIFY would have come by now had the statement sent one (the one above arrived within it).
  const probe = randomUUID();
  await h.sql`select pg_notify(${DELIVERIES_CHANNEL}, ${probe})`;
  await eventually(async () => {
    expect(notifications).toContain(probe);
    return true;
  });
  expect(notifications.slice(notified)).toEqual([probe]);
});

test('a project without a webhook: its project event is kept (coinvoice listen), no delivery; an unknown project: the claim alone', async () => {
  const context = project(undefined);
  const handler = handlerFor(context);
  const event = paidEvent(context.projectId);
  recorder.reset();
  expect(await handler.handle(recorder.sql, event, claimOf(event))).toEqual({ claimed: true, then: { kind: 'nothing' } });
  expect(recorder.statements).toHaveLength(1);
  expect(await rowsOf(event)).toEqual({ processed: 1, projectEvents: 1, deliveries: [] });

  const stranger = paidEvent(randomUUID());
  recorder.reset();
  expect(await handler.handle(recorder.sql, stranger, claimOf(stranger))).toEqual({ claimed: true, then: { kind: 'nothing' } });
  expect(recorder.statements).toHaveLength(1);
  expect(await rowsOf(stranger)).toEqual({ processed: 1, projectEvents: 0, deliveries: [] });
});

test('a statement that fails writes nothing, and the reserved slot is given back', async () => {
  const context = project('https://merchant.example/fails');
  // Not a UUID: the delivery's insert fails after the claim's has run in the same statement.
  const slot = reserving('not-a-uuid');
  const handler = handlerFor(context, slot.dispatch);
  const event = paidEvent(context.projectId);
  await expect(handler.handle(recorder.sql, event, claimOf(event))).rejects.toThrow(/uuid/);
  expect(slot.released()).toBe(1);
  expect(await rowsOf(event)).toEqual({ processed: 0, projectEvents: 0, deliveries: [] });
});
