/**
 * ListProjectEvents (what `coinvoice listen` streams): every webhook event of a project, with or
 * without a webhook URL, after a cursor that starts at "now", each with the headers of a real
 * delivery signed with the project's current secret; other projects' events never show; old
 * events are pruned.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { createDb, createLogger, errorFacts, type Queryable, type Sql } from '@coinvoice/runtime';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { Webhook } from 'standardwebhooks';
import { ListenCursors } from '../src/listen-cursors';
import { projectEventsRetention } from '../src/project-events-retention';
import { testDatabaseServerUrl } from '../../../test/support/infra';
import { eventually, startNotifier, type Harness } from './support/harness';

let h: Harness;
beforeAll(async () => {
  h = await startNotifier();
});
afterAll(async () => {
  await h?.dispose();
});

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

const paid = (projectId: string) =>
  toJson(InvoicePaidSchema, create(InvoicePaidSchema, { invoiceId: randomUUID(), projectId, status: 'Paid', amount: '0.5', currency: 'BTC', environment: 'sandbox', transactionHash: 'ab'.repeat(32), paidAt: timestampFromDate(new Date()) }));

test('events after "now", signed like a delivery, for a project without a webhook URL, and only its own', async () => {
  const project = h.auth.addProject({ webhookUrl: undefined });
  const other = h.auth.addProject({ webhookUrl: undefined });
  const before = await h.publish('invoice.paid', paid(project.id));
  await eventually(async () => ((await h.sql`select 1 from project_events where event_id = ${before}`).length > 0 ? true : undefined));

  const { events: none, cursor } = await h.client.listProjectEvents({ projectId: project.id });
  expect(none).toEqual([]);
  const eventId = await h.publish('invoice.paid', paid(project.id));
  await h.publish('invoice.paid', paid(other.id));

  const page = await eventually(async () => {
    const res = await h.client.listProjectEvents({ projectId: project.id, cursor });
    return res.events.length > 0 ? res : undefined;
  });
  expect(page.events.map((e) => e.eventId)).toEqual([eventId]);
  const [event] = page.events;
  if (!event) throw new Error('no event');
  expect(event.eventType).toBe('invoice.paid');
  expect(event.headers).toMatchObject({ 'webhook-id': eventId, 'webhook-event-type': 'invoice.paid', 'content-type': 'application/json' });
  expect(new Webhook(project.webhookSecret).verify(event.body, event.headers)).toEqual(JSON.parse(event.body));
  // Nothing after the last one.
  expect((await h.client.listProjectEvents({ projectId: project.id, cursor: page.cursor })).events).toEqual([]);
});

test('an event is signed with the time it was recorded, not the time it is listed: an old one fails a receiver\'s timestamp check, as a replay does (an outside review replayed a day\'s events with fresh signatures)', async () => {
  const project = h.auth.addProject({ webhookUrl: undefined });
  const { cursor } = await h.client.listProjectEvents({ projectId: project.id });
  const eventId = await h.publish('invoice.paid', paid(project.id));
  await eventually(async () => ((await h.sql`select 1 from project_events where event_id = ${eventId}`).length > 0 ? true : undefined));
  const recordedAt = new Date(Date.now() - 10 * 60_000);
  await h.sql`update project_events set created_at = ${recordedAt} where event_id = ${eventId}`;
  const [event] = (await h.client.listProjectEvents({ projectId: project.id, cursor })).events;
  expect(event?.headers['webhook-timestamp']).toBe(String(Math.floor(recordedAt.getTime() / 1000)));
  expect(() => new Webhook(project.webhookSecret).verify(event!.body, event!.headers)).toThrow(/too old/i);
});

test('a listener never passes an event that commits after a later one was listed', async () => {
  const project = h.auth.addProject({ webhookUrl: undefined });
  const { cursor } = await h.client.listProjectEvents({ projectId: project.id });
  const insert = (sql: Queryable, eventId: string) =>
    sql`insert into project_events (project_id, event_id, event_type, body) values (${project.id}, ${eventId}, 'invoice.paid', '{}')`;
  // A consumer transaction takes seq n and is still running while another commits seq n+1.
  const slow = randomUUID();
  const fast = randomUUID();
  const slowCommitted = h.sql.begin(async (tx) => {
    await insert(tx, slow);
    await insert(h.sql, fast); // autocommit, on another connection of the pool
    const whileRunning = await h.client.listProjectEvents({ projectId: project.id, cursor });
    // n+1 would move the cursor past n, which then commits: it waits until n has settled.
    expect(whileRunning.events.map((e) => e.eventId)).toEqual([]);
  });
  await slowCommitted;
  // Both once settled (another transaction of the cluster, e.g. a parallel test's, may hold it a moment).
  const after = await eventually(async () => {
    const res = await h.client.listProjectEvents({ projectId: project.id, cursor });
    return res.events.length >= 2 ? res : undefined;
  });
  expect(after.events.map((e) => e.eventId)).toEqual([slow, fast]);
});

test('a listener never passes an event of a transaction that began first but took its seq last (the seq order and the commit order differ both ways)', async () => {
  const project = h.auth.addProject({ webhookUrl: undefined });
  const { cursor } = await h.client.listProjectEvents({ projectId: project.id });
  const insert = (sql: Queryable, eventId: string) =>
    sql`insert into project_events (project_id, event_id, event_type, body) values (${project.id}, ${eventId}, 'invoice.paid', '{}')`;
  const early = randomUUID();
  const late = randomUUID();
  // `early` gets its transaction id first and writes its event last; `late` writes its event (the
  // lower seq) and is still running when early commits.
  const lateMayCommit = deferred();
  const lateHasInserted = deferred();
  let lateCommitted: Promise<unknown> = Promise.resolve();
  await h.sql.begin(async (earlyTx) => {
    await earlyTx`select pg_current_xact_id()`;
    lateCommitted = h.sql.begin(async (lateTx) => {
      await lateTx`select pg_current_xact_id()`;
      await insert(lateTx, late);
      lateHasInserted.resolve();
      await lateMayCommit.promise;
    });
    await lateHasInserted.promise;
    await insert(earlyTx, early);
  });
  const page = await h.client.listProjectEvents({ projectId: project.id, cursor });
  // early's event is listed (its transaction is older than late's), late's not yet.
  expect(page.events.map((e) => e.eventId)).toEqual([early]);
  lateMayCommit.resolve();
  await lateCommitted;
  // Resumed from the page's cursor: late's event comes, though its seq is below early's.
  const resumed = await eventually(async () => {
    const res = await h.client.listProjectEvents({ projectId: project.id, cursor: page.cursor });
    return res.events.length > 0 ? res : undefined;
  });
  expect(resumed.events.map((e) => e.eventId)).toEqual([late]);
  const [earlyRow] = await h.sql<{ seq: string }[]>`select seq::text from project_events where event_id = ${early}`;
  const [lateRow] = await h.sql<{ seq: string }[]>`select seq::text from project_events where event_id = ${late}`;
  expect(BigInt(lateRow!.seq)).toBeLessThan(BigInt(earlyRow!.seq));
});

describe('a long transaction elsewhere holds no listener back (a parallel migration held a stream 10 s and more)', () => {
  const holders: Sql[] = [];
  afterAll(async () => {
    await Promise.all(holders.map((sql) => sql.end({ timeout: 1 })));
  });

  /** A transaction with a transaction id, open until the returned function is called. */
  async function holdTransaction(url: string, applicationName: string): Promise<() => Promise<void>> {
    const sql = createDb({ url, schema: 'public', applicationName, max: 1 });
    holders.push(sql);
    const ended = deferred();
    const began = deferred();
    const done = sql.begin(async (tx) => {
      await tx`select pg_current_xact_id()`;
      began.resolve();
      await ended.promise;
    });
    await began.promise;
    return async () => {
      ended.resolve();
      await done;
    };
  }

  test.each([
    ['another service of this database', () => h.svc.database.url, 'invoice'],
    ['another database of the cluster', () => testDatabaseServerUrl(), 'notifier'],
  ])('%s', async (_, url, applicationName) => {
    const project = h.auth.addProject({ webhookUrl: undefined });
    const { cursor } = await h.client.listProjectEvents({ projectId: project.id });
    const release = await holdTransaction(url(), applicationName);
    try {
      const eventId = await h.publish('invoice.paid', paid(project.id));
      const page = await eventually(async () => {
        const res = await h.client.listProjectEvents({ projectId: project.id, cursor });
        return res.events.length > 0 ? res : undefined;
      }, 5_000);
      expect(page.events.map((e) => e.eventId)).toEqual([eventId]);
    } finally {
      await release();
    }
  });

  test.each([
    ['of the notifier itself', 'notifier'],
    ["under a name that is not another service's (a pooler renaming a notifier connection): the safe side", 'notifier-10.0.0.7'],
  ])('a transaction %s holds it back until it ends', async (_, applicationName) => {
    const project = h.auth.addProject({ webhookUrl: undefined });
    const { cursor } = await h.client.listProjectEvents({ projectId: project.id });
    const release = await holdTransaction(h.svc.database.url, applicationName);
    const eventId = await h.publish('invoice.paid', paid(project.id));
    await eventually(async () => ((await h.sql`select 1 from project_events where event_id = ${eventId}`).length > 0 ? true : undefined));
    expect((await h.client.listProjectEvents({ projectId: project.id, cursor })).events).toEqual([]);
    await release();
    const page = await eventually(async () => {
      const res = await h.client.listProjectEvents({ projectId: project.id, cursor });
      return res.events.length > 0 ? res : undefined;
    });
    expect(page.events.map((e) => e.eventId)).toEqual([eventId]);
  });
});

test('a cursor of the earlier form (a bare seq) resumes without skipping: from the first transaction that wrote a later event', async () => {
  const project = h.auth.addProject({ webhookUrl: undefined });
  const first = await h.publish('invoice.paid', paid(project.id));
  await eventually(async () => ((await h.sql`select 1 from project_events where event_id = ${first}`).length > 0 ? true : undefined));
  const [row] = await h.sql<{ seq: string }[]>`select seq::text from project_events where event_id = ${first}`;
  const second = await h.publish('invoice.paid', paid(project.id));
  const page = await eventually(async () => {
    const res = await h.client.listProjectEvents({ projectId: project.id, cursor: row!.seq });
    return res.events.length > 0 ? res : undefined;
  });
  expect(page.events.map((e) => e.eventId)).toEqual([second]);
  expect(page.cursor).toMatch(/^[A-Za-z0-9_-]{40,120}$/);
  // Nothing kept after it: "now".
  const now = await h.client.listProjectEvents({ projectId: project.id, cursor: String(BigInt(row!.seq) + 1_000_000n) });
  expect(now.events).toEqual([]);
  expect(now.cursor).toMatch(/^[A-Za-z0-9_-]{40,120}$/);
});

test('a cursor of the earlier form never passes a writer still running: its event, committed after a later one, comes (a review)', async () => {
  const project = h.auth.addProject({ webhookUrl: undefined });
  const insert = (sql: Queryable, eventId: string) =>
    sql`insert into project_events (project_id, event_id, event_type, body) values (${project.id}, ${eventId}, 'invoice.paid', '{}')`;
  const before = randomUUID();
  await insert(h.sql, before);
  const [row] = await h.sql<{ seq: string }[]>`select seq::text from project_events where event_id = ${before}`;
  const slow = randomUUID();
  const fast = randomUUID();
  const slowMayCommit = deferred();
  const slowInserted = deferred();
  // `slow` takes its transaction id and writes, then `fast` (a later transaction) writes and commits.
  const slowCommitted = h.sql.begin(async (tx) => {
    await tx`select pg_current_xact_id()`;
    await insert(tx, slow);
    slowInserted.resolve();
    await slowMayCommit.promise;
  });
  await slowInserted.promise;
  await insert(h.sql, fast);
  // A listener resumes with the bare seq of `before` while `slow` still runs.
  const first = await h.client.listProjectEvents({ projectId: project.id, cursor: row!.seq });
  expect(first.events.map((e) => e.eventId)).toEqual([]);
  slowMayCommit.resolve();
  await slowCommitted;
  const page = await eventually(async () => {
    const res = await h.client.listProjectEvents({ projectId: project.id, cursor: first.cursor });
    return res.events.length >= 2 ? res : undefined;
  });
  expect(page.events.map((e) => e.eventId)).toEqual([slow, fast]);
});

test('a project auth does not know answers not_found; a malformed cursor validation_failed', async () => {
  await expect(h.client.listProjectEvents({ projectId: randomUUID() }).catch((e: unknown) => errorFacts(e).code)).resolves.toBe('not_found');
  const project = h.auth.addProject({ webhookUrl: undefined });
  // Another project's cursor, a cursor with one character changed, and a token no key sealed: none opens.
  const other = h.auth.addProject({ webhookUrl: undefined });
  const { cursor: othersCursor } = await h.client.listProjectEvents({ projectId: other.id });
  const { cursor: ownCursor } = await h.client.listProjectEvents({ projectId: project.id });
  const changed = `${ownCursor.slice(0, 20)}${ownCursor[20] === 'A' ? 'B' : 'A'}${ownCursor.slice(21)}`;
  for (const cursor of ['abc', '1.', '.1', '01.1', '18446744073709551616.1', '1.9223372036854775808', '9223372036854775808', othersCursor, changed, 'A'.repeat(60)]) {
    await expect(h.client.listProjectEvents({ projectId: project.id, cursor }).catch((e: unknown) => errorFacts(e).code)).resolves.toBe('validation_failed');
  }
  expect((await h.client.listProjectEvents({ projectId: project.id, cursor: ownCursor })).events).toEqual([]);
});

test('a cursor tells nothing of other projects or of the database: sealed, a fresh token each time (an outside review read other tenants\' event counts and the transaction counter from plain positions)', async () => {
  const project = h.auth.addProject({ webhookUrl: undefined });
  const first = await h.client.listProjectEvents({ projectId: project.id });
  const again = await h.client.listProjectEvents({ projectId: project.id });
  expect(first.cursor).not.toBe(again.cursor);
  for (const cursor of [first.cursor, again.cursor]) {
    expect(cursor).toMatch(/^[A-Za-z0-9_-]{40,120}$/);
  }
  // Sealed: the position is not in the bytes; another project, or a key of another notifier, opens nothing.
  const cursors = new ListenCursors(randomBytes(32));
  const token = cursors.seal(project.id, { tx: '4711815', seq: '10522' });
  expect(Buffer.from(token, 'base64url').toString('latin1')).not.toContain('4711815');
  expect(cursors.open(project.id, token)).toEqual({ tx: '4711815', seq: '10522' });
  expect(cursors.open(randomUUID(), token)).toBeUndefined();
  expect(new ListenCursors(randomBytes(32)).open(project.id, token)).toBeUndefined();
});

test('events older than a day are pruned', async () => {
  await h.sql`insert into project_events (project_id, event_id, event_type, body, created_at) values (${randomUUID()}, ${randomUUID()}, 'invoice.paid', '{}', now() - interval '25 hours')`;
  const fresh = randomUUID();
  await h.sql`insert into project_events (project_id, event_id, event_type, body) values (${randomUUID()}, ${fresh}, 'invoice.paid', '{}')`;
  const job = projectEventsRetention({ sql: h.sql, logger: createLogger({ service: 'test', level: 'silent' }) });
  expect(await job.processBatch()).toBeGreaterThanOrEqual(1);
  expect(await h.sql`select 1 from project_events where created_at < now() - interval '24 hours'`).toHaveLength(0);
  expect(await h.sql`select 1 from project_events where event_id = ${fresh}`).toHaveLength(1);
});
