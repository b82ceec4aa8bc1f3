/**
 * A claim reads the pending deliveries in due order only as far as its limit, however long the
 * backlog (docs/webhook-delivery.md#claims). Written as a bare NOT EXISTS, the check that an
 * earlier delivery of the same invoice holds this one became an anti-join over every pending
 * delivery, and the window ranking deliveries per project sorted all of them: 15-27 ms per claim
 * with 9,000 waiting, one claim per webhook while a burst drains. Counted here with the
 * transaction's own statistics: rows read by sequential scans and index entries read.
 */
import { claimDueDeliveries, nextDueAt } from '../src/store/deliveries';
import { startNotifier, type Harness } from './support/harness';
import type { TransactionSql } from '@coinvoice/runtime';
import { indexScansStarted, rowsTouched } from '../../../test/support/plans';

const BACKLOG = 3_000;

let h: Harness;

beforeAll(async () => {
  h = await startNotifier();
});

afterAll(async () => {
  await h?.dispose();
});

test(`claiming from a backlog of ${BACKLOG.toLocaleString('en')} due deliveries reads the first of them, not all`, async () => {
  const { claimed, touched, projects } = await h.sql.begin(async (tx) => {
    // Inserted and claimed in one transaction: the running worker never sees these rows.
    await tx`
      insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at)
      select gen_random_uuid(), case when g % 10 = 0 then 'plan-other' else 'plan-busy' end, gen_random_uuid()::text, 'invoice.paid',
             gen_random_uuid()::text, 'https://shop.example/hooks', '{}', now() - interval '1 minute' + g * interval '1 millisecond'
      from generate_series(1, ${BACKLOG}) g`;
    await tx`analyze webhook_deliveries`;
    const before = await rowsTouched(tx, 'webhook_deliveries');
    // 'plan-busy' has 3 of its 4 slots in use here: one more of its deliveries may go, and one of 'plan-other's.
    const { rows: claimed } = await claimDueDeliveries(tx, { limit: 2, perProject: 4, busy: new Map([['plan-busy', 3]]), leaseMs: 60_000 });
    return { claimed: claimed.length, touched: (await rowsTouched(tx, 'webhook_deliveries')) - before, projects: claimed.map((d) => d.project_id).sort() };
  });
  expect(claimed).toBe(2);
  expect(projects).toEqual(['plan-busy', 'plan-other']);
  expect(touched).toBeLessThan(500);
});

test(`when to look again, with ${BACKLOG.toLocaleString('en')} due deliveries of a project at its limit, reads what is still to come, not that backlog`, async () => {
  const { due, touched } = await measuredAndRolledBack(async (tx) => {
    // Only this test's rows (what the test above left behind is retried by the running worker).
    await tx`delete from webhook_deliveries`;
    await insertDueBacklog(tx, 'plan-full', BACKLOG);
    // A retry of another project, due in 30 s: what the worker must wake up for.
    await tx`
      insert into webhook_deliveries (id, project_id, event_id, event_type, url, body, next_attempt_at)
      values (gen_random_uuid(), 'plan-later', gen_random_uuid()::text, 'invoice.paid', 'https://shop.example/hooks', '{}', now() + interval '30 seconds')`;
    await tx`analyze webhook_deliveries`;
    const before = await rowsTouched(tx, 'webhook_deliveries');
    const due = await nextDueAt(tx, { perProject: 4, busy: new Map([['plan-full', 4]]) });
    const [now] = await tx<{ now: Date }[]>`select now()`;
    return { due: due && due.getTime() - now!.now.getTime(), touched: (await rowsTouched(tx, 'webhook_deliveries')) - before };
  });
  expect(due).toBe(30_000);
  expect(touched).toBeLessThan(100);
});

test(`a claim over every project while one has ${BACKLOG.toLocaleString('en')} due and every slot in use checks none of them for a hold, even with statistics taken when the table was empty`, async () => {
  // Walking past a full project's due deliveries is a known cost (docs/webhook-delivery.md#claims);
  // checking each for a hold on the way made it a probe per row, and with the statistics of a new
  // database (the planner believing the table tiny) a probe read every earlier pending delivery
  // through the due-time index: ~n²/2 rows, 10-30 ms per claim while a burst drained.
  const { claimed, probes } = await measuredAndRolledBack(async (tx) => {
    await tx`delete from webhook_deliveries`;
    await tx`analyze webhook_deliveries`;
    await insertDueBacklog(tx, 'plan-full', BACKLOG);
    await tx`
      insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at)
      values (gen_random_uuid(), 'plan-free', gen_random_uuid()::text, 'invoice.paid', gen_random_uuid()::text,
              'https://shop.example/hooks', '{}', now() - interval '1 second')`;
    const before = await indexScansStarted(tx, 'webhook_deliveries');
    const { rows: claimed } = await claimDueDeliveries(tx, { limit: 4, perProject: 4, busy: new Map([['plan-full', 4]]), leaseMs: 60_000 });
    return { claimed: claimed.map((d) => d.project_id), probes: (await indexScansStarted(tx, 'webhook_deliveries')) - before };
  });
  expect(claimed).toEqual(['plan-free']);
  // The walk, plan-free's hold check, the lock and the update: a handful, not one per walked row.
  expect(probes).toBeLessThan(20);
});

test('a claim for some projects says whether it saw every due delivery they have: only then may a slot left free mean there is nothing more', async () => {
  const { stoppedAtLimit, sawAll } = await measuredAndRolledBack(async (tx) => {
    await tx`
      insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at)
      select gen_random_uuid(), case when g <= 3 then 'seen-a' else 'seen-b' end, gen_random_uuid()::text, 'invoice.paid',
             gen_random_uuid()::text, 'https://shop.example/hooks', '{}', now() - interval '1 minute' + g * interval '1 millisecond'
      from generate_series(1, 4) g`;
    // One free slot each: seen-a's three due rows come first; the walk reads two rows (the slots) and
    // stops at that limit, seen-b's row unseen: seen-b left its slot free but may have more.
    const first = await claimDueDeliveries(tx, { limit: 8, perProject: 4, busy: new Map([['seen-a', 3], ['seen-b', 3]]), leaseMs: 60_000, onlyProjects: ['seen-a', 'seen-b'] });
    // seen-b alone, two free slots, one due row: all seen.
    const second = await claimDueDeliveries(tx, { limit: 8, perProject: 4, busy: new Map([['seen-b', 2]]), leaseMs: 60_000, onlyProjects: ['seen-b'] });
    return {
      stoppedAtLimit: { claimed: first.rows.map((d) => d.project_id), sawAllDue: first.sawAllDue },
      sawAll: { claimed: second.rows.map((d) => d.project_id), sawAllDue: second.sawAllDue },
    };
  });
  expect(stoppedAtLimit).toEqual({ claimed: ['seen-a'], sawAllDue: false });
  expect(sawAll).toEqual({ claimed: ['seen-b'], sawAllDue: true });
});

/** `count` due deliveries of `projectId`, each of its own invoice, due a minute ago onwards in creation order. */
async function insertDueBacklog(tx: TransactionSql, projectId: string, count: number): Promise<void> {
  await tx`
    insert into webhook_deliveries (id, project_id, event_id, event_type, event_key, url, body, next_attempt_at)
    select gen_random_uuid(), ${projectId}, gen_random_uuid()::text, 'invoice.paid', gen_random_uuid()::text,
           'https://shop.example/hooks', '{}', now() - interval '1 minute' + g * interval '1 millisecond'
    from generate_series(1, ${count}) g`;
}

/** Runs `measure` in a transaction that is rolled back afterwards: nothing it wrote is left for the worker. */
async function measuredAndRolledBack<T>(measure: (tx: TransactionSql) => Promise<T>): Promise<T> {
  const result: { value?: T } = {};
  await h.sql
    .begin(async (tx) => {
      result.value = await measure(tx);
      throw ROLLBACK;
    })
    .catch((err: unknown) => {
      if (err !== ROLLBACK) throw err;
    });
  return result.value as T;
}
const ROLLBACK = new Error('rolled back on purpose');
