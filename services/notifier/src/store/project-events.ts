/** project_events: every webhook event of a project, for `coinvoice listen` (ListProjectEvents). */
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';

export interface ProjectEventRow {
  seq: string;
  event_id: string;
  event_type: string;
  body: string;
}

/** Records the event once, whatever replays the bus makes. */
export async function insertProjectEvent(
  tx: TransactionSql,
  e: { projectId: string; eventId: string; eventType: string; body: string },
): Promise<void> {
  await tx`
    insert into project_events (project_id, event_id, event_type, body)
    values (${e.projectId}, ${e.eventId}, ${e.eventType}, ${e.body})
    on conflict (event_id) do nothing`;
}

/**
 * The project's events after `afterSeq`, oldest first. A seq is taken at insert, not at commit: an
 * event whose consumer transaction commits after a later one was already listed can be passed
 * over by a listener. Acceptable for a development stream (a delivery never depends on it).
 */
export async function listProjectEvents(sql: Queryable, q: { projectId: string; afterSeq: string; limit: number }): Promise<ProjectEventRow[]> {
  return sql<ProjectEventRow[]>`
    select seq::text as seq, event_id, event_type, body from project_events
    where project_id = ${q.projectId} and seq > ${q.afterSeq}
    order by seq limit ${q.limit}`;
}

/**
 * Where "now" is for a new listener: the last seq of the whole table, not of the project, so an
 * event of the project committed later (always a higher seq) is after it.
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
