/**
 * `idempotency_keys`: RequestPayout's Idempotency-Key, per project, kept for a retention period
 * (24 h). The key is claimed as the FIRST statement of the creating transaction: a concurrent
 * request with the same key blocks on the primary key until that transaction ends, then finds
 * the committed row (replay or refuse) or, if it rolled back, claims the key itself. So however
 * many duplicates race, one payout is created.
 */
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';

export const IDEMPOTENCY_RETENTION_HOURS = 24;

export interface IdempotencyRecord {
  request_hash: string;
  payout_id: string;
  response: Buffer | null;
}

/**
 * Claims (projectId, key) for a new payout. A row whose retention has run out is taken over.
 * Returns false when a live row exists: look it up with `findIdempotencyKey`.
 */
export async function claimIdempotencyKey(
  tx: TransactionSql,
  claim: { projectId: string; key: string; requestHash: string; payoutId: string },
): Promise<boolean> {
  const rows = await tx`
    insert into idempotency_keys (project_id, key, request_hash, payout_id, expires_at)
    values (${claim.projectId}, ${claim.key}, ${claim.requestHash}, ${claim.payoutId},
            now() + make_interval(hours => ${IDEMPOTENCY_RETENTION_HOURS}))
    on conflict (project_id, key) do update
      set request_hash = excluded.request_hash, payout_id = excluded.payout_id, response = null,
          created_at = now(), expires_at = excluded.expires_at
      where idempotency_keys.expires_at <= now()
    returning 1`;
  return rows.length === 1;
}

export async function findIdempotencyKey(sql: Queryable, projectId: string, key: string): Promise<IdempotencyRecord | undefined> {
  const [row] = await sql<IdempotencyRecord[]>`
    select request_hash, payout_id, response from idempotency_keys
    where project_id = ${projectId} and key = ${key} and expires_at > now()`;
  return row;
}

/** Stores the first response, in the same transaction as the payout. */
export async function saveIdempotentResponse(tx: TransactionSql, projectId: string, key: string, response: Uint8Array): Promise<void> {
  await tx`update idempotency_keys set response = ${Buffer.from(response)} where project_id = ${projectId} and key = ${key}`;
}

/** Deletes keys past their retention, a bounded batch at a time; returns how many. */
export async function deleteExpiredIdempotencyKeys(sql: Sql, limit = 1000): Promise<number> {
  const result = await sql`
    delete from idempotency_keys
    where (project_id, key) in (
      select project_id, key from idempotency_keys where expires_at <= now() limit ${limit}
    )`;
  return result.count;
}
