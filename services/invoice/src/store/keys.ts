/** `address_keys` (one index sequence per key material) and `development_keys`. */
import type { Queryable, Sql } from '@coinvoice/runtime';
import type { DevelopmentKeyPair } from '@coinvoice/chains/addresses';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Network } from '@coinvoice/domain/project-network';

export interface DevelopmentKeyRow {
  currency: CryptoCode;
  network: Network;
  path: string;
  xpub: string;
}

export async function findDevelopmentKeys(sql: Queryable): Promise<DevelopmentKeyRow[]> {
  return sql<DevelopmentKeyRow[]>`select currency, network, path, xpub from development_keys`;
}

/**
 * Stores freshly generated pairs; a pair another replica stored first wins (ON CONFLICT DO
 * NOTHING), so every replica ends up reading the same keys.
 */
export async function insertDevelopmentKeys(sql: Sql, pairs: readonly DevelopmentKeyPair[]): Promise<void> {
  if (pairs.length === 0) return;
  const rows = pairs.map((p) => ({ currency: p.currency, network: p.network, path: p.path, xprv: p.xprv, xpub: p.xpub }));
  await sql`insert into development_keys ${sql(rows, 'currency', 'network', 'path', 'xprv', 'xpub')} on conflict do nothing`;
}

/** Registers keys by their material hash (idempotent, safe from several replicas) and returns their ids. */
export async function registerAddressKeys(
  sql: Sql,
  keys: ReadonlyArray<{ keyHash: string; xpub: string }>,
): Promise<Map<string, number>> {
  const unique = [...new Map(keys.map((k) => [k.keyHash, { key_hash: k.keyHash, xpub: k.xpub }])).values()];
  if (unique.length > 0) {
    await sql`insert into address_keys ${sql(unique, 'key_hash', 'xpub')} on conflict (key_hash) do nothing`;
  }
  const rows = await sql<{ id: number; key_hash: string }[]>`
    select id, key_hash from address_keys where key_hash = any(${unique.map((k) => k.key_hash)})`;
  for (const row of rows) await ensureIndexSequence(sql, row.id);
  return new Map(rows.map((row) => [row.key_hash, row.id]));
}

function indexSequence(keyId: number): string {
  if (!Number.isSafeInteger(keyId) || keyId < 0) throw new Error(`invalid address key id ${keyId}`);
  return `address_index_${keyId}`;
}

/** Postgres reports a concurrent CREATE of the same sequence as one of these; the other replica won. */
const ALREADY_CREATED = new Set(['42P07', '23505']);

async function ensureIndexSequence(sql: Sql, keyId: number): Promise<void> {
  try {
    await sql.unsafe(`create sequence if not exists ${indexSequence(keyId)} as integer minvalue 0 maxvalue 2147483647 start with 0`);
  } catch (err) {
    if (!ALREADY_CREATED.has((err as { code?: string }).code ?? '')) throw err;
  }
}

/**
 * Hands out the next unused index of each key named (one per entry, in order; a key named twice
 * gets two indexes), never one handed out before: the key's sequence. nextval is outside any
 * transaction's rollback and takes no lock, so concurrent creations never wait for each other
 * here; a creation that fails afterwards leaves a gap (wallets scan past it). One statement for a
 * whole group-committed batch (docs/performance.md#group-commit).
 */
export async function allocateAddressIndexes(sql: Queryable, keyIds: readonly number[]): Promise<number[]> {
  if (keyIds.length === 0) return [];
  for (const keyId of keyIds) indexSequence(keyId);
  const rows = await sql<{ index: number }[]>`
    select nextval(('address_index_' || k.key_id)::regclass)::int as index
    from unnest(${keyIds as number[]}::int[]) with ordinality as k(key_id, n)
    order by k.n`;
  if (rows.length !== keyIds.length) throw new Error(`allocated ${rows.length} address indexes for ${keyIds.length} keys`);
  return rows.map((row) => row.index);
}
