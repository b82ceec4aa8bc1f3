/**
 * API keys: only the SHA-256 hash (lookup) and the display prefix (listings) are stored, never the
 * plain key.
 */
import type { Sql, TransactionSql } from '@coinvoice/runtime';
import type { ApiKeyRow, ApiKeyVerificationRow } from './rows';

const API_KEY_COLUMNS = ['id', 'project_id', 'name', 'display_prefix', 'created_at', 'revoked_at', 'last_used_at'];

export interface NewApiKey {
  projectId: string;
  name: string;
  keyHash: string;
  displayPrefix: string;
}

export interface RevokedApiKey {
  key: ApiKeyRow;
  keyHash: string;
  /** False when the key was already revoked (revoking again changes nothing). */
  revokedNow: boolean;
}

export class ApiKeyStore {
  constructor(private readonly sql: Sql) {}

  /** Creates the project's key unless it has `maxActive` unrevoked keys already ('limit_reached'). */
  async create(key: NewApiKey, maxActive: number): Promise<ApiKeyRow | 'limit_reached'> {
    return this.sql.begin(async (tx) => {
      // The project's row lock serialises its key creations: the count below cannot race another.
      await tx`select 1 from projects where id = ${key.projectId} for update`;
      const [counted] = await tx<{ n: number }[]>`select count(*)::int as n from api_keys where project_id = ${key.projectId} and revoked_at is null`;
      if ((counted?.n ?? 0) >= maxActive) return 'limit_reached';
      const [row] = await tx<ApiKeyRow[]>`
        insert into api_keys (project_id, name, key_hash, display_prefix)
        values (${key.projectId}, ${key.name}, ${key.keyHash}, ${key.displayPrefix})
        returning ${tx(API_KEY_COLUMNS)}`;
      if (!row) throw new Error('insert into api_keys returned no row');
      return row;
    });
  }

  /** Newest first, revoked keys included. */
  async listByProject(projectId: string): Promise<ApiKeyRow[]> {
    return this.sql<ApiKeyRow[]>`
      select ${this.sql(API_KEY_COLUMNS)} from api_keys
      where project_id = ${projectId}
      order by created_at desc, id desc`;
  }

  /**
   * Revokes key `keyId` of the merchant's project `projectId`; undefined when there is no such key
   * there (or the project is not the merchant's). The row lock makes concurrent revocations agree
   * on which of them revoked it (`revokedNow`), so exactly one publishes the event.
   */
  async revoke(tx: TransactionSql, merchantId: string, projectId: string, keyId: string): Promise<RevokedApiKey | undefined> {
    const [target] = await tx<{ key_hash: string; was_active: boolean }[]>`
      select k.key_hash, k.revoked_at is null as was_active
      from api_keys k join projects p on p.id = k.project_id
      where k.id = ${keyId} and k.project_id = ${projectId} and p.merchant_id = ${merchantId}
      for update of k`;
    if (!target) return undefined;
    const [row] = await tx<ApiKeyRow[]>`
      update api_keys set revoked_at = coalesce(revoked_at, now())
      where id = ${keyId}
      returning ${tx(API_KEY_COLUMNS)}`;
    if (!row) throw new Error('locked api key vanished');
    return { key: row, keyHash: target.key_hash, revokedNow: target.was_active };
  }

  /** The key with this hash and its project, revoked or not; undefined when unknown. */
  async findForVerification(keyHash: string): Promise<ApiKeyVerificationRow | undefined> {
    const [row] = await this.sql<ApiKeyVerificationRow[]>`
      select k.id as key_id, k.revoked_at, k.last_used_at,
             p.id as project_id, p.name as project_name, p.environment, p.merchant_id, p.invoice_lifetime_minutes, p.payment_tolerance_percent::text as payment_tolerance_percent
      from api_keys k join projects p on p.id = k.project_id
      where k.key_hash = ${keyHash}`;
    return row;
  }

  /**
   * Records a use, unless one was recorded less than `minIntervalSeconds` ago: a busy key costs
   * one write per interval, not one per request.
   */
  async touchLastUsed(keyId: string, minIntervalSeconds: number): Promise<void> {
    await this.sql`
      update api_keys set last_used_at = now()
      where id = ${keyId}
        and (last_used_at is null or last_used_at < now() - make_interval(secs => ${minIntervalSeconds}))`;
  }
}
