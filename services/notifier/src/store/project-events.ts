/**
 * project_events: every webhook event of a project, for `coinvoice listen` (ListProjectEvents).
 * Written with the event's delivery, in one statement: insertEventRows (store/deliveries.ts).
 *
 * A listener's position is (tx_id, seq), read only below a horizon no running writer is under
 * (docs/webhook-delivery.md#the-listen-stream).
 */
import type { Queryable, Sql } from '@coinvoice/runtime';
import type { ListenPosition } from '../listen-cursors';

export interface ProjectEventRow {
  /** The position right after this event: its transaction and seq. */
  tx: string;
  seq: string;
  event_id: string;
  event_type: string;
  body: string;
  created_at: Date;
}

/**
 * Connections known not to write this table: the other services' (their `application_name` is
 * their schema, services/runtime/src/db.ts) and the signer's. Named positively: a notifier
 * connection under another name (a pooler adding its host, a replica's own name) must hold
 * listeners back, never be taken for another service (a review).
 */
const OTHER_SERVICES = ['auth', 'invoice', 'payout', 'payout-signer'];

/**
 * The lowest transaction id a listing must not reach: the lowest one still running that may be a
 * writer of this table. A transaction of another database (a parallel test's system, another
 * application of the cluster) or of another coinvoice service never writes here, so it does not
 * hold listeners back; any other — this service's, an operator's psql, a prepared transaction, one
 * that ended since the snapshot — does, until it ends. Without one: the snapshot's xmax, above
 * every transaction it sees.
 */
const horizon = (sql: Queryable) => sql`(
  select coalesce(min(running.xid), pg_snapshot_xmax(pg_current_snapshot()))
  from pg_snapshot_xip(pg_current_snapshot()) as running (xid)
  where not exists (
    select from pg_stat_activity elsewhere
    where elsewhere.backend_xid = xid(running.xid)
      and (elsewhere.datname is distinct from current_database() or elsewhere.application_name = any(${OTHER_SERVICES}::text[]))))`;

/**
 * The position of a bare seq (a cursor handed out before positions): before the first transaction
 * that wrote a later seq, or before the horizon when a writer below that is still running (its
 * events may come twice, none is skipped); with neither, at the horizon: "now".
 */
export async function positionOfSeq(sql: Queryable, projectId: string, seq: string): Promise<ListenPosition> {
  const [row] = await sql<{ tx: string }[]>`
    select least((select min(tx_id) from project_events where project_id = ${projectId} and seq > ${seq}), ${horizon(sql)})::text as tx`;
  if (!row) throw new Error('no position');
  return { tx: row.tx, seq: '0' };
}

/** The project's events after `after`, in position order, never passing one that may still commit. */
export async function listProjectEvents(sql: Queryable, q: { projectId: string; after: ListenPosition; limit: number }): Promise<ProjectEventRow[]> {
  return sql<ProjectEventRow[]>`
    select tx_id::text as tx, seq::text as seq, event_id, event_type, body, created_at from project_events
    where project_id = ${q.projectId} and (tx_id, seq) > (${q.after.tx}::xid8, ${q.after.seq}::bigint) and tx_id < ${horizon(sql)}
    order by tx_id, seq limit ${q.limit}`;
}

/**
 * Where "now" is for a new listener: before the horizon's transaction. An event of a writer running
 * at this instant is after "now"; from there on, listing never passes one.
 */
export async function currentProjectEventPosition(sql: Queryable): Promise<ListenPosition> {
  const [row] = await sql<{ tx: string }[]>`select ${horizon(sql)}::text as tx`;
  if (!row) throw new Error('no horizon');
  return { tx: row.tx, seq: '0' };
}

/** Deletes events older than `olderThanMs`, at most `limit`; returns how many. */
export async function deleteOldProjectEvents(sql: Sql, options: { olderThanMs: number; limit: number }): Promise<number> {
  const cutoff = new Date(Date.now() - options.olderThanMs);
  const result = await sql`
    delete from project_events where seq in (
      select seq from project_events where created_at < ${cutoff} order by seq limit ${options.limit})`;
  return result.count;
}
