/**
 * project_events: every webhook event of a project, for `coinvoice listen` (ListProjectEvents).
 * Written with the event's delivery, in one statement: insertEventRows (store/deliveries.ts).
 */
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';

export interface ProjectEventRow {
  seq: string;
  event_id: string;
  event_type: string;
  body: string;
  created_at: Date;
}

/**
 * Rows a cursor may pass: those of transactions older than every transaction still running. A seq
 * is taken at insert, not at commit, so a row of a running transaction may yet appear below rows
 * already visible; listing stops short of it until it has committed (or rolled back). The price:
 * a transaction left open anywhere in the cluster holds the stream back until it ends (a
 * development stream; deliveries never depend on it).
 */
const settled = (sql: Queryable) => sql`tx_id < pg_snapshot_xmin(pg_current_snapshot())`;

/** The project's events after `afterSeq`, oldest first, never passing one that may still commit. */
export async function listProjectEvents(sql: Queryable, q: { projectId: string; afterSeq: string; limit: number }): Promise<ProjectEventRow[]> {
  return sql<ProjectEventRow[]>`
    select seq::text as seq, event_id, event_type, body, created_at from project_events
    where project_id = ${q.projectId} and seq > ${q.afterSeq} and ${settled(sql)}
    order by seq limit ${q.limit}`;
}

/**
 * Where "now" is for a new listener: the last committed seq of the whole table, not of the
 * project. An event whose transaction is running at that very instant with a lower seq is before
 * "now" for this listener; from there on, listing never passes one.
 */
export async function currentProjectEventSeq(sql: Queryable): Promise<string> {
  const [row] = await sql<{ seq: string }[]>`select coalesce(max(seq), 0)::text as seq from project_events`;
  return row?.seq ?? '0';
}

/** Deletes events older than `olderThanMs`, at most `limit`; returns how many. */
export async function deleteOldProjectEvents(sql: Sql, options: { olderThanMs: number; limit: number }): Promise<number> {
  const cutoff = new Date(Date.now() - options.olderThanMs);
  const result = await sql`
    delete from project_events where seq in (
      select seq from project_events where created_at < ${cutoff} order by seq limit ${options.limit})`;
  return result.count;
}
