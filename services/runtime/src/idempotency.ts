/**
 * `idempotency_keys`: a creating RPC's Idempotency-Key (CreateInvoice, RequestPayout), per
 * project, kept for a retention period (24 h). The key is claimed as the FIRST statement of the
 * creating transaction: a concurrent request with the same key blocks on the primary key until
 * that transaction ends, then finds the committed row (replay or refuse) or, if it rolled back,
 * claims the key itself. So however many duplicates race, one resource is created.
 *
 * The table is the same in every service that has one except for the column naming the created
 * resource (invoice_id, payout_id) and the table it references: both are parameters here, and its
 * one DDL is built-in-migrations.ts's (`idempotencyKeysMigration`, a built-in migration of those services).
 */
import { createHash } from 'node:crypto';
import type { Queryable, Sql, TransactionSql } from './db';
import { Code, errors, serviceError } from './errors';
import type { Logger } from './log';
import { IDEMPOTENCY_RETENTION_HOURS, idempotencyKeysMigration } from './built-in-migrations';
import type { MigrationFile } from './migrations';
import { fail, pass, type Check } from './validation';

export const IDEMPOTENCY_KEY_MAX_LENGTH = 255;

/** An Idempotency-Key header value: 1–255 printable ASCII characters. */
export function checkIdempotencyKey(raw: unknown): Check<string> {
  if (typeof raw !== 'string') return fail('must be a string');
  if (raw === '') return fail('must not be empty');
  if (raw.length > IDEMPOTENCY_KEY_MAX_LENGTH) return fail(`must be at most ${IDEMPOTENCY_KEY_MAX_LENGTH} characters`);
  if (!/^[\x20-\x7e]+$/.test(raw)) return fail('must be printable ASCII');
  return pass(raw);
}

/**
 * A request's fingerprint for idempotent replays: SHA-256 over the merchant's fields exactly as
 * sent, in a fixed order. The same body with the same Idempotency-Key replays; any other is refused.
 */
export function requestFingerprintOf(fields: readonly unknown[]): string {
  return createHash('sha256').update(JSON.stringify(fields)).digest('hex');
}

export interface IdempotencyRecord {
  request_hash: string;
  /** The id of the resource the first request created (the table's `<resource>_id` column). */
  resource_id: string;
  response: Buffer | null;
}

export interface IdempotencyClaim {
  projectId: string;
  key: string;
  requestHash: string;
  resourceId: string;
}

/** How a replay gets the first response back: its stored bytes, or else the resource itself. */
export interface StoredResponse<T> {
  decode(response: Uint8Array): T;
  load(resourceId: string): Promise<T | undefined>;
}

export class IdempotencyKeys {
  private readonly column: string;
  /** The built-in migration that creates the table (ServiceDefinition.builtInMigrations). */
  readonly migration: MigrationFile;

  /**
   * `resource` names what the keys create ("invoice"); its id is stored in `<resource>_id` and
   * references `table` (the resource's table, e.g. "invoices").
   */
  constructor(
    private readonly resource: string,
    table: string,
  ) {
    this.migration = idempotencyKeysMigration(resource, table);
    this.column = `${resource}_id`;
  }

  /**
   * Claims (projectId, key) for a new resource. A row whose retention has run out is taken over.
   * Returns false when a live row exists: look it up with `find` (or answer with `replay`).
   */
  async claim(tx: TransactionSql, claim: IdempotencyClaim): Promise<boolean> {
    return (await this.claimMany(tx, [claim]))[0]!;
  }

  /**
   * Claims several keys in one statement (a group-committed batch; no two may be the same key):
   * for each claim, in order, whether it was claimed. Rows are locked in key order, so two batches
   * claiming overlapping keys wait for each other rather than deadlock.
   */
  async claimMany(tx: TransactionSql, claims: readonly IdempotencyClaim[]): Promise<boolean[]> {
    if (claims.length === 0) return [];
    const column = tx(this.column);
    const records = claims.map((c) => ({ project_id: c.projectId, key: c.key, request_hash: c.requestHash, resource_id: c.resourceId }));
    const claimed = await tx<{ project_id: string; key: string }[]>`
      insert into idempotency_keys (project_id, key, request_hash, ${column}, expires_at)
      select c.project_id, c.key, c.request_hash, c.resource_id, now() + make_interval(hours => ${IDEMPOTENCY_RETENTION_HOURS})
      from jsonb_to_recordset(${tx.json(records)}) as c(project_id uuid, key text, request_hash text, resource_id uuid)
      order by c.project_id, c.key
      on conflict (project_id, key) do update
        set request_hash = excluded.request_hash, ${column} = excluded.${column}, response = null,
            created_at = now(), expires_at = excluded.expires_at
        where idempotency_keys.expires_at <= now()
      returning project_id, key`;
    const won = new Set(claimed.map((row) => `${row.project_id.toLowerCase()} ${row.key}`));
    return claims.map((c) => won.has(`${c.projectId.toLowerCase()} ${c.key}`));
  }

  /**
   * Whether another request holds (projectId, key) — claimed, in flight or answered — waiting for
   * an in-flight one to commit or roll back: a claim that would block on it is tried and undone.
   * Then `find` or `replay` sees the other's outcome.
   */
  async heldByAnother(sql: Sql, claim: IdempotencyClaim): Promise<boolean> {
    const undo = Symbol('undo');
    try {
      await sql.begin(async (tx) => {
        if (await this.claim(tx, claim)) throw undo;
      });
      return true;
    } catch (err) {
      if (err === undo) return false;
      throw err;
    }
  }

  async find(sql: Queryable, projectId: string, key: string): Promise<IdempotencyRecord | undefined> {
    const [row] = await sql<IdempotencyRecord[]>`
      select request_hash, ${sql(this.column)} as resource_id, response from idempotency_keys
      where project_id = ${projectId} and key = ${key} and expires_at > now()`;
    return row;
  }

  /** Stores the first response, in the same transaction as the resource. */
  async saveResponse(tx: TransactionSql, projectId: string, key: string, response: Uint8Array): Promise<void> {
    await this.saveResponses(tx, [{ projectId, key, response }]);
  }

  /** Stores the first responses of several claimed keys in one statement. */
  async saveResponses(tx: TransactionSql, responses: ReadonlyArray<{ projectId: string; key: string; response: Uint8Array }>): Promise<void> {
    if (responses.length === 0) return;
    const records = responses.map((r) => ({ project_id: r.projectId, key: r.key, response: Buffer.from(r.response).toString('base64') }));
    // The `= any(…)` conditions let the planner find the rows by the primary key (project_id, key);
    // with the join alone it hashes the record set and scans the whole table (docs/performance.md#plans).
    await tx`
      update idempotency_keys k set response = decode(r.response, 'base64')
      from jsonb_to_recordset(${tx.json(records)}) as r(project_id uuid, key text, response text)
      where k.project_id = any(${records.map((r) => r.project_id)}::uuid[]) and k.key = any(${records.map((r) => r.key)}::text[])
        and k.project_id = r.project_id and k.key = r.key`;
  }

  /**
   * The answer to a request whose claim failed: the key is held by an earlier request (committed:
   * the claim waited for it). The same body gets the first response again; another is refused.
   */
  async replay<T>(tx: TransactionSql, request: { projectId: string; key: string; fingerprint: string }, stored: StoredResponse<T>): Promise<T> {
    const record = await this.find(tx, request.projectId, request.key);
    if (!record) {
      // Unreachable: the claim and this read share the transaction's now(), and only rows past it
      // are ever deleted. Answered as a retryable conflict rather than an internal error.
      throw serviceError(Code.Aborted, 'conflict', 'the idempotency key changed during the request; retry');
    }
    if (record.request_hash !== request.fingerprint) {
      throw errors.conflict(
        'idempotency_key_reused',
        'this Idempotency-Key was already used with a different request body; use a new key for a new request',
      );
    }
    if (record.response) return stored.decode(record.response);
    const resource = await stored.load(record.resource_id);
    if (resource === undefined) throw new Error(`idempotency key refers to missing ${this.resource} ${record.resource_id}`);
    return resource;
  }

  /** Deletes keys past their retention, a bounded batch at a time; returns how many. */
  async deleteExpired(sql: Sql, limit = 1000): Promise<number> {
    const result = await sql`
      delete from idempotency_keys
      where (project_id, key) in (
        select project_id, key from idempotency_keys where expires_at <= now() limit ${limit}
      )`;
    return result.count;
  }

  /** A chore for a periodic worker: deletes expired keys at most once per `everyMs` (default 60 s). */
  expiredKeyCleanup(sql: Sql, everyMs = 60_000): (logger: Logger) => Promise<void> {
    let lastCleanup = 0;
    return async (logger) => {
      if (Date.now() - lastCleanup < everyMs) return;
      lastCleanup = Date.now();
      const deleted = await this.deleteExpired(sql);
      if (deleted > 0) logger.info({ deleted }, 'deleted idempotency keys past their retention');
    };
  }
}
