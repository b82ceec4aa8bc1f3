/** `address_keys` (per-key next unused index) and `development_keys`. */
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';
import type { CryptoCode, DevelopmentKeyPair, Network } from '../domain';

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
  return new Map(rows.map((row) => [row.key_hash, row.id]));
}

/**
 * Hands out the next unused index of a key, never one handed out before. It runs as a statement
 * of its own (not inside the invoice's transaction) so the counter row is locked for that one
 * statement only: concurrent creations no longer queue behind each other's derivation, insert and
 * commit. The price is a gap in the index sequence when a creation fails after this point — rare,
 * and harmless (wallets scan far past a gap of a few).
 */
export async function allocateAddressIndex(sql: Queryable, keyId: number): Promise<number> {
  const [row] = await sql<{ index: number }[]>`
    update address_keys set next_index = next_index + 1 where id = ${keyId}
    returning (next_index - 1)::int as index`;
  if (!row) throw new Error(`address key ${keyId} is not registered`);
  return row.index;
}
