/**
 * The `invoices` table. Money columns are `numeric` and come back as decimal strings (postgres.js
 * never turns numeric into a float); timestamps are truncated to milliseconds on insert so the
 * list cursor round-trips exactly through a JS Date.
 */
import { selectKeysetPage, type Queryable, type TransactionSql } from '@coinvoice/runtime';
import { INVOICE_CURSORS, type InvoiceCursor } from '../domain/requests';
import type { InvoiceEvent, InvoiceStatusName } from '../domain/status';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import type { Chain } from '@coinvoice/chains/coin';
import { nextStatus, OPEN_INVOICE_STATUSES, sourceStatuses } from '../domain/status';

export interface InvoiceRow {
  id: string;
  project_id: string;
  environment: ProjectEnvironment;
  project_name: string;
  order_id: string | null;
  order_description: string | null;
  price_amount: string;
  price_currency: string;
  price_amount_in_usd: string;
  pay_currency: string;
  /** The network the invoice is paid on (migration 0140, docs/networks.md). */
  pay_network: Chain;
  rate: string;
  /** Where the rate came from: "coinbase", "kraken" (live quotes) or "static" (the table). */
  rate_sources: string[];
  /** The oldest quote the rate was made from (the static table's asOf, when it has one). */
  rate_quoted_at: Date | null;
  amount_expected: string;
  amount_received: string;
  status: InvoiceStatusName;
  address: string;
  key_id: number;
  address_index: number;
  success_url: string;
  cancel_url: string;
  is_donation: boolean;
  transaction_hash: string | null;
  created_at: Date;
  expired_at: Date;
  paid_at: Date | null;
  /** Decimal string, 0–5, fixed at creation. */
  payment_tolerance_percent: string;
  /** 0 for sandbox invoices. */
  confirmations_required: number;
}

export interface NewInvoiceRow {
  id: string;
  projectId: string;
  environment: ProjectEnvironment;
  projectName: string;
  orderId: string | null;
  orderDescription: string | null;
  /** Decimal strings. */
  priceAmount: string;
  priceCurrency: string;
  priceAmountInUsd: string;
  payCurrency: string;
  payNetwork: Chain;
  rate: string;
  rateSources: string[];
  rateQuotedAt: Date | null;
  amountExpected: string;
  address: string;
  keyId: number;
  addressIndex: number;
  successUrl: string;
  cancelUrl: string;
  isDonation: boolean;
  lifetimeMinutes: number;
  /** Live: the chain's confirmation count now; sandbox: 0 (never watched). */
  confirmationsRequired: number;
  /** Decimal string 0–5: the project's payment tolerance now. */
  paymentTolerancePercent: string;
}

/** Inserts a Waiting invoice; created_at is the database clock, expired_at = created_at + lifetime. */
export async function insertInvoice(tx: TransactionSql, row: NewInvoiceRow): Promise<InvoiceRow> {
  const [inserted] = await tx<InvoiceRow[]>`
    with clock as (select date_trunc('milliseconds', now()) as created_at)
    insert into invoices (
      id, project_id, environment, project_name, order_id, order_description,
      price_amount, price_currency, price_amount_in_usd, pay_currency, pay_network, rate, rate_sources, rate_quoted_at, amount_expected,
      address, key_id, address_index, success_url, cancel_url, is_donation, created_at, expired_at,
      confirmations_required, payment_tolerance_percent
    )
    select
      ${row.id}, ${row.projectId}, ${row.environment}, ${row.projectName}, ${row.orderId}, ${row.orderDescription},
      ${row.priceAmount}::numeric, ${row.priceCurrency}, ${row.priceAmountInUsd}::numeric, ${row.payCurrency}, ${row.payNetwork},
      ${row.rate}::numeric, ${row.rateSources}::text[], ${row.rateQuotedAt}::timestamptz, ${row.amountExpected}::numeric,
      ${row.address}, ${row.keyId}, ${row.addressIndex}, ${row.successUrl}, ${row.cancelUrl}, ${row.isDonation},
      clock.created_at, clock.created_at + make_interval(mins => ${row.lifetimeMinutes}::int),
      ${row.confirmationsRequired}, ${row.paymentTolerancePercent}::numeric
    from clock
    returning *`;
  if (!inserted) throw new Error('insert into invoices returned no row');
  return inserted;
}

/** One invoice of a project; another project's invoice is as absent as a missing one. */
export async function findInvoice(sql: Queryable, projectId: string, invoiceId: string): Promise<InvoiceRow | undefined> {
  const [row] = await sql<InvoiceRow[]>`select * from invoices where id = ${invoiceId} and project_id = ${projectId}`;
  return row;
}

/** One invoice by id alone: for the public checkout and the internal owner lookup only. */
export async function findInvoiceById(sql: Queryable, invoiceId: string): Promise<InvoiceRow | undefined> {
  const [row] = await sql<InvoiceRow[]>`select * from invoices where id = ${invoiceId}`;
  return row;
}

/**
 * Locks a project's invoice for a state change (concurrent payers queue here and each sees the
 * previous one's outcome), with the database clock for the expiry check.
 */
export async function lockInvoice(
  tx: TransactionSql,
  projectId: string,
  invoiceId: string,
): Promise<{ invoice: InvoiceRow; now: Date } | undefined> {
  const [row] = await tx<(InvoiceRow & { db_now: Date })[]>`
    select *, now() as db_now from invoices where id = ${invoiceId} and project_id = ${projectId} for update`;
  if (!row) return undefined;
  const { db_now: now, ...invoice } = row;
  return { invoice, now };
}

/**
 * Marks a locked invoice Paid. The guard repeats the transition table and the expiry rule in SQL,
 * so even a caller that skipped the lock could not pay twice or pay an expired invoice.
 */
export async function markPaid(
  tx: TransactionSql,
  invoiceId: string,
  payment: { amountReceived: string; transactionHash: string },
): Promise<InvoiceRow | undefined> {
  const [row] = await tx<InvoiceRow[]>`
    update invoices
    set status = ${target('pay')}, amount_received = ${payment.amountReceived}::numeric,
        transaction_hash = ${payment.transactionHash}, paid_at = date_trunc('milliseconds', now())
    where id = ${invoiceId} and status = any(${sourceStatuses('pay')}) and expired_at > now()
    returning *`;
  return row;
}

/**
 * Locks up to `limit` open invoices (Waiting, PartiallyPaid, Confirming) whose expired_at has
 * passed, oldest first, skipping rows another transaction holds. The caller settles each
 * (settlement.ts).
 */
export async function lockDueOpenInvoices(
  tx: TransactionSql,
  limit: number,
  /** Live invoices only when their pay_network has been watched past their expiredAt (ISO times by network: each chain cursor's block time). */
  watchedUntil: Readonly<Record<string, string>>,
): Promise<InvoiceRow[]> {
  return tx<InvoiceRow[]>`
    select * from invoices
    where status = any(${[...OPEN_INVOICE_STATUSES]}) and expired_at <= now()
      and (environment = 'sandbox' or expired_at < (${JSON.stringify(watchedUntil)}::text::jsonb ->> pay_network)::timestamptz)
    order by expired_at
    limit ${limit}
    for update skip locked`;
}

export interface ListQuery {
  projectId: string;
  status: InvoiceStatusName | undefined;
  /** Only invoices with exactly this order id. */
  orderId?: string | undefined;
  after: InvoiceCursor | undefined;
  pageSize: number;
}

/** A project's invoices, newest first by (created_at, id), one page and the next page's cursor. */
export function listInvoices(sql: Queryable, query: ListQuery): Promise<{ rows: InvoiceRow[]; nextCursor: string }> {
  const byStatus = query.status === undefined ? sql`` : sql`and status = ${query.status}`;
  const byOrder = query.orderId === undefined ? sql`` : sql`and order_id = ${query.orderId}`;
  return selectKeysetPage<InvoiceRow>(
    sql,
    { table: 'invoices', filters: sql`and project_id = ${query.projectId} ${byStatus} ${byOrder}`, order: 'newest_first', after: query.after, pageSize: query.pageSize },
    INVOICE_CURSORS,
  );
}

function target(event: InvoiceEvent): InvoiceStatusName {
  const sources = sourceStatuses(event);
  const to = sources[0] === undefined ? undefined : nextStatus(sources[0], event);
  if (!to || sources.some((from) => nextStatus(from, event) !== to)) {
    throw new Error(`the transition table has no single target status for ${event}`);
  }
  return to;
}
