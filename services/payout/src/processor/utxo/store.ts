/**
 * The UTXO processor's tables (migration 0600_utxo_treasury.sql): coins, batches, their payouts and
 * versions, and the change-index counter. Amounts are bigint base units (satoshi, litoshi); the
 * driver answers bigint columns as strings.
 */
import type { Queryable, TransactionSql } from '@coinvoice/runtime';

export interface CoinRow {
  id: string;
  network: string;
  txid: string;
  vout: number;
  amount: string;
  address: string;
  branch: 0 | 1;
  address_index: number;
  batch_id: string | null;
  spent: boolean;
}

export interface BatchRow {
  id: string;
  network: string;
  status: 'open' | 'confirmed' | 'abandoned';
  change_index: number | null;
  change_address: string | null;
  confirmed_txid: string | null;
}

export interface BatchPayoutRow {
  batch_id: string;
  payout_id: string;
  output_index: number;
  address: string;
  amount: string;
}

export type VersionStatus = 'built' | 'signed' | 'broadcast' | 'mined' | 'confirmed' | 'replaced' | 'failed';

export interface VersionRow {
  id: string;
  batch_id: string;
  network: string;
  psbt: string;
  fee: string;
  fee_rate: string;
  change_amount: string | null;
  change_output_index: number | null;
  txid: string | null;
  raw_transaction: string | null;
  vsize: number | null;
  status: VersionStatus;
  replaces: string | null;
  block_height: number | null;
  block_hash: string | null;
  created_at: Date;
  broadcast_at: Date | null;
}

export interface NewDepositCoin {
  network: string;
  paymentId: string;
  txid: string;
  vout: number;
  amount: bigint;
  address: string;
  addressIndex: number;
}

/** A deposit output becomes a coin once (its payment id); answers 1 when new. */
export async function insertDepositCoin(sql: Queryable, coin: NewDepositCoin): Promise<number> {
  const inserted = await sql`
    insert into utxo_coins (network, txid, vout, amount, address, branch, address_index, payment_id)
    values (${coin.network}, ${coin.txid}, ${coin.vout}, ${coin.amount.toString()}, ${coin.address}, 0, ${coin.addressIndex}, ${coin.paymentId})
    on conflict do nothing`;
  return inserted.count;
}

/** Coins no stored transaction spends: the only ones a new batch may select. */
export function availableCoins(sql: Queryable, network: string): Promise<CoinRow[]> {
  return sql<CoinRow[]>`
    select * from utxo_coins where network = ${network} and batch_id is null and not spent
    order by amount, id`;
}

/** The sum of the available coins: the treasury's spendable balance. */
export async function availableBalance(sql: Queryable, network: string): Promise<bigint> {
  const [row] = await sql<{ total: string }[]>`
    select coalesce(sum(amount), 0)::text as total from utxo_coins where network = ${network} and batch_id is null and not spent`;
  return BigInt(row?.total ?? '0');
}

/** Locks `ids` if every one is still available; undefined when any was taken meanwhile. */
export async function lockAvailableCoins(tx: TransactionSql, network: string, ids: readonly string[]): Promise<CoinRow[] | undefined> {
  const rows = await tx<CoinRow[]>`
    select * from utxo_coins where network = ${network} and id in ${tx(ids as string[])} and batch_id is null and not spent
    for update skip locked`;
  return rows.length === ids.length ? rows : undefined;
}

/**
 * An index on the change branch (account/1/i, i ≥ 1): one a dissolved batch gave back (never paid),
 * else a fresh one under the counter row's lock.
 */
export async function takeChangeIndex(tx: TransactionSql, network: string): Promise<number> {
  const [free] = await tx<{ index: number }[]>`
    delete from utxo_free_change_indexes
    where (network, change_index) = (select network, change_index from utxo_free_change_indexes where network = ${network} order by change_index limit 1 for update skip locked)
    returning change_index as index`;
  if (free) return free.index;
  const [row] = await tx<{ index: number }[]>`
    insert into utxo_change_indexes (network, next_index) values (${network}, 2)
    on conflict (network) do update set next_index = utxo_change_indexes.next_index + 1
    returning next_index - 1 as index`;
  return row!.index;
}

/**
 * Records the change address of batches built before `utxo_batches.change_address` existed
 * (migration 0810), derived from the account key: the house-address check reads the column.
 */
export async function recordChangeAddresses(sql: Queryable, network: string, changeAddress: (index: number) => string): Promise<void> {
  const rows = await sql<{ id: string; change_index: number }[]>`
    select id, change_index from utxo_batches where network = ${network} and change_index is not null and change_address is null`;
  for (const row of rows) {
    await sql`update utxo_batches set change_address = ${changeAddress(row.change_index)} where id = ${row.id} and change_address is null`;
  }
}

/** Gives back the change index of a batch dissolved before anything was signed (no transaction paid it). */
export async function freeChangeIndex(tx: TransactionSql, network: string, index: number): Promise<void> {
  await tx`insert into utxo_free_change_indexes (network, change_index) values (${network}, ${index}) on conflict do nothing`;
}

export function openBatches(sql: Queryable, network: string): Promise<BatchRow[]> {
  return sql<BatchRow[]>`select * from utxo_batches where network = ${network} and status = 'open' order by id`;
}

export function batchPayouts(sql: Queryable, batchId: string): Promise<BatchPayoutRow[]> {
  return sql<BatchPayoutRow[]>`select * from utxo_batch_payouts where batch_id = ${batchId} order by output_index`;
}

export function batchCoins(sql: Queryable, batchId: string): Promise<CoinRow[]> {
  return sql<CoinRow[]>`select * from utxo_coins where batch_id = ${batchId} order by id`;
}

/** Every version of a batch, oldest first. */
export function batchVersions(sql: Queryable, batchId: string): Promise<VersionRow[]> {
  return sql<VersionRow[]>`select * from utxo_transactions where batch_id = ${batchId} order by id`;
}

/** Versions recorded confirmed in a block at or above `fromHeight`: the deep-reorg scan's (docs/treasury.md#deep-reorgs). */
export function confirmedVersionsFrom(sql: Queryable, network: string, fromHeight: number): Promise<VersionRow[]> {
  return sql<VersionRow[]>`
    select * from utxo_transactions where network = ${network} and status = 'confirmed' and block_height >= ${fromHeight} order by block_height, id`;
}

/** Versions built and not yet signed (a process killed while the signer was asked), oldest first. */
export function builtVersions(sql: Queryable, network: string): Promise<VersionRow[]> {
  return sql<VersionRow[]>`select * from utxo_transactions where network = ${network} and status = 'built' order by id`;
}

export function signedVersions(sql: Queryable, network: string): Promise<VersionRow[]> {
  return sql<VersionRow[]>`select * from utxo_transactions where network = ${network} and status = 'signed' order by id`;
}

/**
 * The newest version of each open batch, broadcast (or, when the node keeps refusing its bytes,
 * built) longer ago than `olderThanMs`, while no version of the batch is mined and none waits for
 * its signature: the ones to replace (BIP125).
 */
export function stuckVersions(sql: Queryable, network: string, olderThanMs: number): Promise<VersionRow[]> {
  return sql<VersionRow[]>`
    select v.* from utxo_transactions v
    where v.network = ${network} and v.status in ('signed', 'broadcast')
      and coalesce(v.broadcast_at, v.created_at) < now() - ${olderThanMs}::int * interval '1 millisecond'
      and not exists (select 1 from utxo_transactions n where n.batch_id = v.batch_id and n.id > v.id)
      and not exists (select 1 from utxo_transactions m where m.batch_id = v.batch_id and m.status in ('mined', 'confirmed', 'built'))
    order by v.id`;
}

export async function markVersionBroadcast(sql: Queryable, id: string): Promise<boolean> {
  const rows = await sql`update utxo_transactions set status = 'broadcast', broadcast_at = now(), updated_at = now() where id = ${id} and status = 'signed' returning 1`;
  return rows.length === 1;
}
