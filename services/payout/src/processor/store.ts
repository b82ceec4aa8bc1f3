/**
 * The processor's tables (migration 0200_treasury.sql): `evm_accounts` (nonces assigned here,
 * under the row's lock), `chain_transactions` (every signed transaction, stored before its
 * broadcast), `sweep_tasks` and `treasury_networks`. Addresses are stored in lower case.
 */
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';

export type ChainTransactionPurpose = 'payout' | 'sweep' | 'gas_top_up';
export type ChainTransactionStatus = 'signed' | 'broadcast' | 'mined' | 'confirmed' | 'failed' | 'replaced';

export interface ChainTransactionRow {
  id: string;
  network: string;
  purpose: ChainTransactionPurpose;
  payout_id: string | null;
  from_address: string;
  to_address: string;
  asset: string;
  amount: string;
  nonce: string;
  gas_limit: string;
  max_fee_per_gas: string;
  max_priority_fee_per_gas: string;
  transaction_hash: string;
  raw_transaction: string;
  status: ChainTransactionStatus;
  replaces: string | null;
  block_number: string | null;
  gas_used: string | null;
  effective_gas_price: string | null;
  failure_reason: string | null;
  created_at: Date;
  broadcast_at: Date | null;
  mined_at: Date | null;
}

export interface NewChainTransaction {
  network: string;
  purpose: ChainTransactionPurpose;
  payoutId: string | null;
  from: string;
  to: string;
  asset: string;
  amount: bigint;
  nonce: bigint;
  gasLimit: bigint;
  maxFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  transactionHash: string;
  rawTransaction: string;
  replaces: string | null;
}

export interface SweepTaskRow {
  id: string;
  payment_id: string;
  network: string;
  asset: string;
  deposit_address: string;
  address_index: number;
  amount: string;
  status: 'pending' | 'sent' | 'confirmed' | 'skipped_dust';
  gas_top_up_transaction_id: string | null;
  transaction_id: string | null;
}

/** The treasury as the signer answered it: the address, and the account xpub of a UTXO network. */
export interface TreasuryAnswer {
  address: string;
  accountXpub?: string;
}

/** Records the treasury the signer answered (the Treasury page, metrics, and a start without the signer). */
export async function saveTreasury(sql: Sql, network: string, answer: TreasuryAnswer): Promise<void> {
  await sql`
    insert into treasury_networks (network, address, account_xpub) values (${network}, ${answer.address}, ${answer.accountXpub ?? null})
    on conflict (network) do update set address = excluded.address, account_xpub = excluded.account_xpub, updated_at = now()`;
}

/** The treasury the signer answered last, if it ever did. */
export async function storedTreasury(sql: Queryable, network: string): Promise<TreasuryAnswer | undefined> {
  const [row] = await sql<{ address: string; account_xpub: string | null }[]>`select address, account_xpub from treasury_networks where network = ${network}`;
  return row && { address: row.address, ...(row.account_xpub === null ? {} : { accountXpub: row.account_xpub }) };
}

export async function isPaused(sql: Queryable, network: string): Promise<boolean> {
  const [row] = await sql<{ paused: boolean }[]>`select paused from treasury_networks where network = ${network}`;
  return row?.paused ?? false;
}

/**
 * Creates the nonce row of an address the first time it signs, starting at the node's count of
 * its mined transactions (any earlier history). From then on nonces are counted here; the
 * processor only moves next_nonce up when the chain is ahead (docs/treasury.md#nonce-drift).
 */
export async function ensureAccount(sql: Queryable, network: string, address: string, minedNonce: bigint): Promise<void> {
  await sql`
    insert into evm_accounts (network, address, next_nonce) values (${network}, ${address.toLowerCase()}, ${minedNonce.toString()})
    on conflict (network, address) do nothing`;
}

export async function hasAccount(sql: Queryable, network: string, address: string): Promise<boolean> {
  const rows = await sql`select 1 from evm_accounts where network = ${network} and address = ${address.toLowerCase()}`;
  return rows.length === 1;
}

/** Locks the address's nonce row and takes its next nonce (the row's lock orders concurrent takers). */
export async function takeNonce(tx: TransactionSql, network: string, address: string): Promise<bigint> {
  const [row] = await tx<{ nonce: string }[]>`
    update evm_accounts set next_nonce = next_nonce + 1
    where network = ${network} and address = ${address.toLowerCase()}
    returning next_nonce - 1 as nonce`;
  if (!row) throw new Error(`no nonce row for ${address} on ${network}`);
  return BigInt(row.nonce);
}

export async function insertChainTransaction(tx: TransactionSql, t: NewChainTransaction): Promise<ChainTransactionRow> {
  const [row] = await tx<ChainTransactionRow[]>`
    insert into chain_transactions (
      network, purpose, payout_id, from_address, to_address, asset, amount, nonce, gas_limit,
      max_fee_per_gas, max_priority_fee_per_gas, transaction_hash, raw_transaction, status, replaces
    ) values (
      ${t.network}, ${t.purpose}, ${t.payoutId}, ${t.from.toLowerCase()}, ${t.to.toLowerCase()}, ${t.asset}, ${t.amount.toString()}::numeric,
      ${t.nonce.toString()}, ${t.gasLimit.toString()}::numeric, ${t.maxFeePerGas.toString()}::numeric, ${t.maxPriorityFeePerGas.toString()}::numeric,
      ${t.transactionHash.toLowerCase()}, ${t.rawTransaction}, 'signed', ${t.replaces}
    )
    returning *`;
  if (!row) throw new Error('insert into chain_transactions returned no row');
  return row;
}

/** Rows whose outcome is still open (signed, broadcast, mined), oldest first per (from, nonce). */
export function openTransactions(sql: Queryable, network: string): Promise<ChainTransactionRow[]> {
  return sql<ChainTransactionRow[]>`
    select * from chain_transactions
    where network = ${network} and status in ('signed', 'broadcast', 'mined')
    order by from_address, nonce, id`;
}

/** The addresses with a transfer in flight: the ones a nonce gap below them would hold up. */
export async function sendersInFlight(sql: Queryable, network: string): Promise<string[]> {
  const rows = await sql<{ from_address: string }[]>`
    select distinct from_address from chain_transactions where network = ${network} and status in ('signed', 'broadcast', 'mined')`;
  return rows.map((r) => r.from_address);
}

/** The addresses that sent a transfer recorded `confirmed` within the last `withinMs`. */
export async function recentSenders(sql: Queryable, network: string, withinMs: number): Promise<string[]> {
  const rows = await sql<{ from_address: string }[]>`
    select distinct from_address from chain_transactions
    where network = ${network} and status = 'confirmed' and updated_at > now() - make_interval(secs => ${withinMs / 1000})`;
  return rows.map((r) => r.from_address);
}

/** An address's transfers recorded `confirmed` at or above `nonce`, lowest nonce first. */
export function confirmedFromNonce(sql: Queryable, network: string, address: string, nonce: bigint): Promise<ChainTransactionRow[]> {
  return sql<ChainTransactionRow[]>`
    select * from chain_transactions
    where network = ${network} and from_address = ${address.toLowerCase()} and nonce >= ${nonce.toString()} and status = 'confirmed'
    order by nonce, id`;
}

/** Stored `signed` rows, oldest first: not yet accepted by a node (or not known to be). */
export function signedTransactions(sql: Queryable, network: string): Promise<ChainTransactionRow[]> {
  return sql<ChainTransactionRow[]>`select * from chain_transactions where network = ${network} and status = 'signed' order by id`;
}

export async function markBroadcast(sql: Queryable, id: string): Promise<void> {
  await sql`update chain_transactions set status = 'broadcast', broadcast_at = now(), updated_at = now() where id = ${id} and status = 'signed'`;
}

/**
 * The newest version of each nonce still waiting to be mined, broadcast (or, when the node keeps
 * refusing it, signed) longer ago than `olderThanMs`, while no version of that nonce is mined: the
 * ones to replace with a higher fee.
 */
export function stuckTransactions(sql: Queryable, network: string, olderThanMs: number): Promise<ChainTransactionRow[]> {
  return sql<ChainTransactionRow[]>`
    select c.* from chain_transactions c
    where c.network = ${network} and c.status in ('signed', 'broadcast')
      and coalesce(c.broadcast_at, c.created_at) < now() - ${olderThanMs}::int * interval '1 millisecond'
      and not exists (select 1 from chain_transactions n where n.replaces = c.id)
      and not exists (
        select 1 from chain_transactions m
        where m.network = c.network and m.from_address = c.from_address and m.nonce = c.nonce
          and m.status in ('mined', 'confirmed', 'failed'))
    order by c.id`;
}

/** What is leaving the treasury and not yet mined: amounts of `asset` and ETH for gas at most. */
export async function treasuryOutflowInFlight(sql: Queryable, network: string, treasury: string): Promise<{ amount: Record<string, bigint>; gas: bigint }> {
  // One version per nonce counts (the newest): replacements of one transfer are one outflow.
  const rows = await sql<{ asset: string; amount: string; gas: string }[]>`
    select asset, sum(amount)::text as amount, sum(gas_limit * max_fee_per_gas)::text as gas
    from chain_transactions c
    where network = ${network} and from_address = ${treasury.toLowerCase()} and status in ('signed', 'broadcast')
      and not exists (select 1 from chain_transactions n where n.replaces = c.id)
    group by asset`;
  const amount: Record<string, bigint> = {};
  let gas = 0n;
  for (const row of rows) {
    amount[row.asset] = BigInt(row.amount);
    gas += BigInt(row.gas.split('.')[0] ?? '0');
  }
  return { amount, gas };
}

export interface SweepGroup {
  deposit_address: string;
  asset: string;
  address_index: number;
  pending: number;
  sent: number;
  /** The newest gas top-up of the group's pending tasks, if any. */
  top_up_id: string | null;
}

/** Open sweep tasks grouped by (deposit address, asset). */
export function openSweepGroups(sql: Queryable, network: string): Promise<SweepGroup[]> {
  return sql<SweepGroup[]>`
    select deposit_address, asset, min(address_index)::int as address_index,
      count(*) filter (where status = 'pending')::int as pending,
      count(*) filter (where status = 'sent')::int as sent,
      max(gas_top_up_transaction_id) filter (where status = 'pending')::text as top_up_id
    from sweep_tasks
    where network = ${network} and status in ('pending', 'sent')
    group by deposit_address, asset
    order by min(created_at)`;
}

/** Locks a group's pending tasks (skipping any another transaction holds). */
export function lockPendingTasks(tx: TransactionSql, network: string, depositAddress: string, asset: string): Promise<SweepTaskRow[]> {
  return tx<SweepTaskRow[]>`
    select * from sweep_tasks
    where network = ${network} and lower(deposit_address) = ${depositAddress.toLowerCase()} and asset = ${asset} and status = 'pending'
    order by id
    for update skip locked`;
}

export async function findTransaction(sql: Queryable, id: string): Promise<ChainTransactionRow | undefined> {
  const [row] = await sql<ChainTransactionRow[]>`select * from chain_transactions where id = ${id}`;
  return row;
}
