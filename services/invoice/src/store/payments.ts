/**
 * Payment rows, the watcher's cursor and recent blocks per chain (migration 0004). Amounts are
 * numeric and come back as decimal strings.
 */
import type { Queryable, Sql, TransactionSql } from '@coinvoice/runtime';
import type { Chain, CryptoCode } from '@coinvoice/chains/coin';
import type { PaymentStatus } from '../domain/payments';
import { OPEN_INVOICE_STATUSES } from '../domain/status';
import type { BlockRef, ChainName, ObservedTransfer } from '@coinvoice/chains/chain-adapter';
import type { InvoiceRow } from './invoices';

export interface PaymentRow {
  id: string;
  chain: ChainName;
  transaction_hash: string;
  output_index: number;
  invoice_id: string;
  address: string;
  asset: CryptoCode;
  amount: string;
  block_number: string | null;
  block_hash: string | null;
  block_time: Date | null;
  confirmations: number;
  status: PaymentStatus;
  detected_at: Date;
  reported_as: 'paid' | 'late' | 'uncredited' | null;
}

/**
 * Runs `read` in one snapshot (repeatable read, read only), so the invoices and payments it reads
 * agree: the watcher changes a payment and its invoice's amount received in one transaction, and
 * two statements outside one snapshot can fall either side of it — an orphaned payment beside the
 * amount that still counted it (docs/architecture.md#payments-as-rows).
 */
export function readInOneSnapshot<T>(sql: Sql, read: (tx: TransactionSql) => Promise<T>): Promise<T> {
  return sql.begin('isolation level repeatable read read only', read) as Promise<T>;
}

/** The payments of an invoice, oldest first. */
export async function paymentsOf(sql: Queryable, invoiceId: string): Promise<PaymentRow[]> {
  return sql<PaymentRow[]>`select * from payments where invoice_id = ${invoiceId} order by id`;
}

/**
 * The payments of one invoice as the API shows them. Only live invoices are watched, so a sandbox
 * invoice has none: asking would cost every sandbox lookup a second round trip for nothing.
 */
export async function paymentsOfInvoice(sql: Queryable, invoice: Pick<InvoiceRow, 'id' | 'environment'>): Promise<PaymentRow[]> {
  return invoice.environment === 'live' ? paymentsOf(sql, invoice.id) : [];
}

/** The payments of several invoices (list pages), grouped by invoice id. */
export async function paymentsOfInvoices(sql: Queryable, invoiceIds: readonly string[]): Promise<Map<string, PaymentRow[]>> {
  const grouped = new Map<string, PaymentRow[]>();
  if (invoiceIds.length === 0) return grouped;
  const rows = await sql<PaymentRow[]>`select * from payments where invoice_id = any(${invoiceIds as string[]}::uuid[]) order by id`;
  for (const row of rows) {
    const list = grouped.get(row.invoice_id) ?? [];
    list.push(row);
    grouped.set(row.invoice_id, list);
  }
  return grouped;
}

/**
 * Records a transfer to an invoice's address, or updates the row of the same (chain, tx, output)
 * when a re-scan or a re-mined block reports it again: a block scanned twice never double-counts.
 * Returns the row and whether anything changed.
 */
export async function upsertPayment(
  tx: TransactionSql,
  chain: ChainName,
  invoiceId: string,
  transfer: ObservedTransfer,
): Promise<PaymentRow> {
  const block = transfer.block;
  const [row] = await tx<PaymentRow[]>`
    insert into payments (chain, transaction_hash, output_index, invoice_id, address, asset, amount,
                          block_number, block_hash, block_time, confirmations, status)
    values (${chain}, ${transfer.transactionHash}, ${transfer.outputIndex}, ${invoiceId}, ${transfer.address},
            ${transfer.asset}, ${transfer.amount.toFixed()}::numeric,
            ${block?.height ?? null}, ${block?.hash ?? null}, ${block?.time ?? null}, 0, 'seen')
    on conflict (chain, transaction_hash, output_index) do update
      set block_number = excluded.block_number, block_hash = excluded.block_hash,
          block_time = excluded.block_time,
          -- A payment orphaned by a reorg and mined again counts again; its confirmations restart.
          status = case when payments.status in ('orphaned', 'replaced') or payments.block_hash is distinct from excluded.block_hash
                        then 'seen' else payments.status end,
          confirmations = case when payments.block_hash is distinct from excluded.block_hash then 0 else payments.confirmations end,
          updated_at = now()
    returning *`;
  if (!row) throw new Error('upsert into payments returned no row');
  return row;
}

/** Orphans the not-yet-final payments in blocks above `height`; returns the invoices touched. */
export async function orphanPaymentsAbove(tx: TransactionSql, chain: ChainName, height: number): Promise<PaymentRow[]> {
  return tx<PaymentRow[]>`
    update payments set status = 'orphaned', confirmations = 0, updated_at = now()
    where chain = ${chain} and block_number > ${height} and status in ('seen', 'confirmed', 'final')
    returning *`;
}

/**
 * Sets the confirmations of the chain's mined, still-changing payments from the head height and
 * the count each needs: its invoice's (fixed at creation) on the invoice's own network, the
 * chain's `confirmations` for a wrong-network payment (docs/networks.md#wrong-network). Returns the
 * rows whose status or confirmations changed.
 */
export async function refreshConfirmations(
  tx: TransactionSql,
  chain: ChainName,
  headHeight: number,
  finalityDepth: number,
  confirmations: number,
): Promise<PaymentRow[]> {
  return tx<PaymentRow[]>`
    with fresh as (
      select p.id, greatest(${headHeight}::bigint - p.block_number + 1, 0)::int as confirmations,
             case when i.pay_network = ${chain} then i.confirmations_required else ${confirmations}::int end as required
      from payments p join invoices i on i.id = p.invoice_id
      where p.chain = ${chain} and p.status in ('seen', 'confirmed') and p.block_number is not null
    )
    update payments p
    set confirmations = fresh.confirmations,
        status = case when fresh.confirmations >= greatest(fresh.required, ${finalityDepth}::int) then 'final'
                      when fresh.confirmations >= fresh.required then 'confirmed'
                      else 'seen' end,
        updated_at = now()
    from fresh
    where p.id = fresh.id and p.confirmations is distinct from fresh.confirmations
    returning p.*`;
}

/** Marks how the ledger heard of a payment; only once (a second attempt changes nothing). */
export async function markReported(tx: TransactionSql, paymentIds: readonly string[], as: 'paid' | 'late' | 'uncredited'): Promise<void> {
  if (paymentIds.length === 0) return;
  await tx`update payments set reported_as = ${as}, reported_at = now() where id = any(${paymentIds as string[]}::bigint[]) and reported_as is null`;
}

/** Per invoice: the sum of its live payments in `asset` mined up to `height` (reconciliation). */
export async function recordedTotals(
  sql: Queryable,
  chain: ChainName,
  asset: CryptoCode,
  invoiceIds: readonly string[],
  height: number,
): Promise<Map<string, string>> {
  const rows = await sql<{ invoice_id: string; total: string }[]>`
    select invoice_id, sum(amount)::text as total from payments
    where chain = ${chain} and asset = ${asset} and invoice_id = any(${invoiceIds as string[]}::uuid[])
      and status in ('seen', 'confirmed', 'final') and block_number <= ${height}
    group by invoice_id`;
  return new Map(rows.map((r) => [r.invoice_id, r.total]));
}

export interface WatchedInvoice {
  id: string;
  address: string;
  pay_currency: CryptoCode;
  pay_network: Chain;
  created_at: Date;
}

/**
 * The live invoices whose addresses the watcher watches: those paid on one of `networks` (an EVM
 * watcher passes every EVM network: the same address exists on each, docs/networks.md#wrong-network;
 * index invoices_live_watch_idx, migration 0140), open ones, and Expired ones within the
 * monitoring window after expiry (late payments). Paid invoices' addresses stay watched for the
 * same window after payment (overpayments in a later transaction). Oldest first, so the
 * watcher's in-memory set keeps one order across reloads.
 */
export async function watchedInvoices(sql: Queryable, networks: readonly Chain[], monitorAfterMs: number): Promise<WatchedInvoice[]> {
  return sql<WatchedInvoice[]>`
    select id, address, pay_currency, pay_network, created_at from invoices
    where environment = 'live' and pay_network = any(${networks as string[]})
      and (status = any(${[...OPEN_INVOICE_STATUSES]})
           or (status = 'Expired' and expired_at > now() - make_interval(secs => ${monitorAfterMs / 1000}))
           or (status = 'Paid' and paid_at > now() - make_interval(secs => ${monitorAfterMs / 1000})))
    order by created_at, id`;
}

/**
 * Live invoices created at or after `since` (the watcher's incremental refresh): every address
 * starts being watched at its invoice's creation, so these are all the set can have gained.
 */
export async function watchedInvoicesCreatedSince(sql: Queryable, networks: readonly Chain[], since: Date): Promise<WatchedInvoice[]> {
  return sql<WatchedInvoice[]>`
    select id, address, pay_currency, pay_network, created_at from invoices
    where environment = 'live' and created_at >= ${since} and pay_network = any(${networks as string[]})
    order by created_at, id`;
}

export async function lockInvoiceById(tx: TransactionSql, invoiceId: string): Promise<{ invoice: InvoiceRow; now: Date } | undefined> {
  const [row] = await tx<(InvoiceRow & { db_now: Date })[]>`select *, now() as db_now from invoices where id = ${invoiceId} for update`;
  if (!row) return undefined;
  const { db_now: now, ...invoice } = row;
  return { invoice, now };
}

// --- cursor and recent blocks ---

export async function loadCursor(sql: Queryable, chain: ChainName): Promise<{ height: number; hash: string } | undefined> {
  const [row] = await sql<{ height: string; hash: string }[]>`select height, hash from chain_cursors where chain = ${chain}`;
  return row && { height: Number(row.height), hash: row.hash };
}

export async function saveCursor(tx: TransactionSql, chain: ChainName, block: Pick<BlockRef, 'height' | 'hash' | 'time'>): Promise<void> {
  await tx`
    insert into chain_cursors (chain, height, hash, block_time) values (${chain}, ${block.height}, ${block.hash}, ${block.time})
    on conflict (chain) do update set height = excluded.height, hash = excluded.hash, block_time = excluded.block_time, updated_at = now()`;
}

/** Each chain's cursor block time: how far in time its watcher has seen the chain. */
export async function cursorTimes(sql: Queryable): Promise<Map<string, Date>> {
  const rows = await sql<{ chain: string; block_time: Date }[]>`select chain, block_time from chain_cursors`;
  return new Map(rows.map((r) => [r.chain, r.block_time]));
}

export async function saveBlocks(tx: TransactionSql, chain: ChainName, blocks: readonly BlockRef[], keep: number): Promise<void> {
  if (blocks.length === 0) return;
  const rows = blocks.map((b) => ({ chain, height: b.height, hash: b.hash, parent_hash: b.parentHash }));
  await tx`
    insert into chain_blocks ${tx(rows, 'chain', 'height', 'hash', 'parent_hash')}
    on conflict (chain, height) do update set hash = excluded.hash, parent_hash = excluded.parent_hash`;
  const top = blocks[blocks.length - 1]!.height;
  await tx`delete from chain_blocks where chain = ${chain} and height <= ${top - keep}`;
}

/** The stored canonical blocks from `fromHeight` down, highest first (fork-point search). */
export async function recentBlocks(sql: Queryable, chain: ChainName, fromHeight: number): Promise<{ height: number; hash: string }[]> {
  const rows = await sql<{ height: string; hash: string }[]>`
    select height, hash from chain_blocks where chain = ${chain} and height <= ${fromHeight} order by height desc`;
  return rows.map((r) => ({ height: Number(r.height), hash: r.hash }));
}

export async function deleteBlocksAbove(tx: TransactionSql, chain: ChainName, height: number): Promise<void> {
  await tx`delete from chain_blocks where chain = ${chain} and height > ${height}`;
}

/** Payments of a chain by status (the watcher's `watcher_payments` gauge, read at scrape time). */
export async function paymentCountsByStatus(sql: Queryable, chain: ChainName): Promise<Map<string, number>> {
  const rows = await sql<{ status: string; n: string }[]>`select status, count(*) as n from payments where chain = ${chain} group by status`;
  return new Map(rows.map((r) => [r.status, Number(r.n)]));
}

/** A payment's id as the ledger knows it (invoice.late_payment's paymentId): chain:transaction:output. */
export function ledgerPaymentId(p: Pick<PaymentRow, 'chain' | 'transaction_hash' | 'output_index'>): string {
  return `${p.chain}:${p.transaction_hash}:${p.output_index}`;
}

export interface LedgerCreditRow extends Partial<Pick<PaymentRow, 'chain' | 'transaction_hash' | 'output_index'>> {
  invoice_id: string;
  project_id: string;
  /** 'paid': the invoice.paid credit (the sum of the payments it covered); 'late': one payment. */
  kind: 'paid' | 'late';
  currency: string;
  /** The invoice's pay_network: credited money is always on it (a wrong-network payment is never credited). */
  network: Chain;
  amount: string;
  reported_at: Date;
}

/**
 * What this service told the ledger to credit, for the invoices after `afterInvoiceId` (a page of
 * `limit` invoices, by id): per invoice, the invoice.paid amount (its 'paid' payments) and each
 * credited late payment. Live only: a sandbox invoice has no payment rows. A wrong-network or
 * other-asset payment is 'uncredited' and never listed (docs/networks.md#wrong-network).
 */
export async function listLedgerCredits(sql: Queryable, afterInvoiceId: string | null, limit: number): Promise<LedgerCreditRow[]> {
  return sql<LedgerCreditRow[]>`
    with page as (
      select distinct p.invoice_id from payments p join invoices i on i.id = p.invoice_id
      -- Live only, said here too: the ledger's repair credits what this reports to live balances
      -- (docs/accounting.md#crediting-what-is-missing), and must never depend on sandbox invoices
      -- having no payment rows.
      where p.reported_as in ('paid', 'late') and i.environment = 'live' and (${afterInvoiceId}::uuid is null or p.invoice_id > ${afterInvoiceId}::uuid)
      order by p.invoice_id limit ${limit}
    )
    select p.invoice_id, i.project_id, 'paid' as kind, null as chain, null as transaction_hash, null::int as output_index,
           p.asset as currency, i.pay_network as network, sum(p.amount)::text as amount, max(p.reported_at) as reported_at
    from payments p join page using (invoice_id) join invoices i on i.id = p.invoice_id
    where p.reported_as = 'paid'
    group by p.invoice_id, i.project_id, p.asset, i.pay_network
    union all
    select p.invoice_id, i.project_id, 'late', p.chain, p.transaction_hash, p.output_index, p.asset, i.pay_network, p.amount::text, p.reported_at
    from payments p join page using (invoice_id) join invoices i on i.id = p.invoice_id
    where p.reported_as = 'late'
    order by invoice_id`;
}

export interface AccountedDepositRow {
  id: string;
  chain: ChainName;
  transaction_hash: string;
  output_index: number;
  invoice_id: string;
  project_id: string;
  address: string;
  address_index: number;
  asset: string;
  amount: string;
  reported_at: Date;
}

/**
 * Accounted deposits of a chain after a (reported_at, id) keyset cursor: payments reported to the
 * ledger (credited or not), which happens the moment they are accounted (settlement.ts), so
 * `reported_as is not null` is that rule's record, not a second rule. The treasury sweeps them
 * (docs/treasury.md#sweep-tasks) — a wrong-network payment too, on the chain it arrived on
 * (`payments.chain`, whatever the invoice's pay_network): the same key recovers it
 * (docs/networks.md#wrong-network).
 */
export async function listAccountedDeposits(
  sql: Queryable,
  chain: ChainName,
  after: { reportedAt: Date; id: string } | null,
  limit: number,
): Promise<AccountedDepositRow[]> {
  return sql<AccountedDepositRow[]>`
    select p.id::text as id, p.chain, p.transaction_hash, p.output_index, p.invoice_id, i.project_id, p.address,
           i.address_index, p.asset, p.amount::text as amount, p.reported_at
    from payments p join invoices i on i.id = p.invoice_id
    where p.chain = ${chain} and p.reported_as is not null and i.environment = 'live'
      and (${after?.reportedAt ?? null}::timestamptz is null
           or (p.reported_at, p.id) > (${after?.reportedAt ?? null}::timestamptz, ${after?.id ?? null}::bigint))
    order by p.reported_at, p.id
    limit ${limit}`;
}
