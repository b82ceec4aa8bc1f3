/**
 * Operators' reads of the processor-owned treasury tables (migration 0200: sweep_tasks,
 * chain_transactions, treasury_networks) and the pause switch. The processor writes these rows;
 * this service only lists them and flips `paused`.
 */
import type { Queryable, TransactionSql } from '@coinvoice/runtime';
import type { PayoutRow } from './payouts';

export interface SweepTaskRow {
  id: string;
  payment_id: string;
  invoice_id: string;
  project_id: string;
  network: string;
  asset: string;
  deposit_address: string;
  /** Base units. */
  amount: string;
  status: 'pending' | 'sent' | 'confirmed' | 'skipped_dust';
  skip_reason: string | null;
  transaction_hash: string | null;
  created_at: Date;
  updated_at: Date;
}

export interface SweepTaskQuery {
  invoiceId: string | undefined;
  status: SweepTaskRow['status'] | undefined;
  network: string | undefined;
  /** The id of the last task shown (newest first: the page starts below it). */
  beforeId: bigint | undefined;
  pageSize: number;
}

/**
 * Sweep tasks newest first by id (an identity: increasing with insertion, so the keyset is the id
 * alone), with the sweep transaction's hash; one page and whether another follows.
 */
export async function listSweepTasks(sql: Queryable, query: SweepTaskQuery): Promise<{ rows: SweepTaskRow[]; more: boolean }> {
  const rows = await sql<SweepTaskRow[]>`
    select t.id::text as id, t.payment_id, t.invoice_id, t.project_id, t.network, t.asset, t.deposit_address,
           t.amount::text as amount, t.status, t.skip_reason, c.transaction_hash, t.created_at, t.updated_at
    from sweep_tasks t left join chain_transactions c on c.id = t.transaction_id
    where true
      ${query.invoiceId === undefined ? sql`` : sql`and t.invoice_id = ${query.invoiceId}`}
      ${query.status === undefined ? sql`` : sql`and t.status = ${query.status}`}
      ${query.network === undefined ? sql`` : sql`and t.network = ${query.network}`}
      ${query.beforeId === undefined ? sql`` : sql`and t.id < ${query.beforeId.toString()}::bigint`}
    order by t.id desc
    limit ${query.pageSize + 1}`;
  return { rows: rows.slice(0, query.pageSize), more: rows.length > query.pageSize };
}

export interface TreasuryNetworkRow {
  network: string;
  address: string;
  paused: boolean;
  paused_by: string | null;
  updated_at: Date;
}

export async function treasuryNetworks(sql: Queryable): Promise<TreasuryNetworkRow[]> {
  return sql<TreasuryNetworkRow[]>`select * from treasury_networks order by network`;
}

/** Pending sweep tasks per (network, asset): how many and how much (base units). */
export async function pendingSweeps(sql: Queryable): Promise<{ network: string; asset: string; count: number; amount: string }[]> {
  return sql`
    select network, asset, count(*)::int as count, sum(amount)::text as amount
    from sweep_tasks where status = 'pending' group by network, asset order by network, asset`;
}

/** A network's live payouts whose transaction is out and not final: Pending with a hash (docs/treasury.md), oldest first. */
export async function payoutsInFlight(sql: Queryable, network: string, currencies: readonly string[]): Promise<PayoutRow[]> {
  return sql<PayoutRow[]>`
    select * from payouts
    where status = 'Pending' and transaction_hash is not null and environment = 'live' and network = ${network} and currency = any(${currencies as string[]})
    order by created_at, id limit 500`;
}

/**
 * The approval queue of one (currency, network): live verified Pending payouts nobody claimed or
 * approved, whose amount exceeds the automatic maximum, oldest first. Another network's payouts are
 * not this treasury's (docs/treasury.md#processor).
 */
export async function awaitingApproval(sql: Queryable, network: string, currency: string, autoMax: string): Promise<PayoutRow[]> {
  return sql<PayoutRow[]>`
    select * from payouts
    where status = 'Pending' and claimed_at is null and approved_at is null and environment = 'live'
      and network = ${network} and currency = ${currency} and amount > ${autoMax}::numeric
    order by created_at, id limit 500`;
}

/**
 * Live Pending payouts of a network the signer refused to sign (docs/treasury.md#signer-refusals),
 * oldest refusal first: unsent until an operator rejects them or the signer's limits allow them.
 */
export async function refusedBySigner(sql: Queryable, network: string): Promise<PayoutRow[]> {
  return sql<PayoutRow[]>`
    select * from payouts
    where signer_refusal is not null and status = 'Pending' and network = ${network} and environment = 'live'
    order by signer_refused_at, id limit 500`;
}

/** Records the signer's refusal of a payout (after the refused transaction rolled back). */
export async function recordSignerRefusal(sql: Queryable, payoutId: string, refusal: string): Promise<void> {
  await sql`
    update payouts set signer_refusal = ${refusal.slice(0, 500)}, signer_refused_at = now()
    where id = ${payoutId} and status = 'Pending'`;
}

/** Flips a network's pause switch; undefined when no processor ever recorded the network. */
export async function setPaused(tx: TransactionSql | Queryable, network: string, paused: boolean, operatorId: string): Promise<TreasuryNetworkRow | undefined> {
  const [row] = await tx<TreasuryNetworkRow[]>`
    update treasury_networks set paused = ${paused}, paused_by = ${paused ? operatorId : null}, updated_at = now()
    where network = ${network}
    returning *`;
  return row;
}
