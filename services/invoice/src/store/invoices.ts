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

/**
 * Inserts Waiting invoices in one statement (a group-committed batch, docs/performance.md#group-commit);
 * created_at is the database clock (the transaction's, the same for the whole batch),
 * expired_at = created_at + each one's lifetime. Returns the rows in the order given.
 */
export async function insertInvoices(tx: Queryable, rows: readonly NewInvoiceRow[]): Promise<InvoiceRow[]> {
  if (rows.length === 0) return [];
  const records = rows.map((row) => ({
    id: row.id,
    project_id: row.projectId,
    environment: row.environment,
    project_name: row.projectName,
    order_id: row.orderId,
    order_description: row.orderDescription,
    price_amount: row.priceAmount,
    price_currency: row.priceCurrency,
    price_amount_in_usd: row.priceAmountInUsd,
    pay_currency: row.payCurrency,
    pay_network: row.payNetwork,
    rate: row.rate,
    rate_sources: row.rateSources,
    rate_quoted_at: row.rateQuotedAt?.toISOString() ?? null,
    amount_expected: row.amountExpected,
    address: row.address,
    key_id: row.keyId,
    address_index: row.addressIndex,
    success_url: row.successUrl,
    cancel_url: row.cancelUrl,
    is_donation: row.isDonation,
    lifetime_minutes: row.lifetimeMinutes,
    confirmations_required: row.confirmationsRequired,
    payment_tolerance_percent: row.paymentTolerancePercent,
  }));
  // One JSON parameter: money travels as decimal strings into numeric columns, never a float.
  const inserted = await tx<InvoiceRow[]>`
    with clock as (select date_trunc('milliseconds', now()) as created_at)
    insert into invoices (
      id, project_id, environment, project_name, order_id, order_description,
      price_amount, price_currency, price_amount_in_usd, pay_currency, pay_network, rate, rate_sources, rate_quoted_at, amount_expected,
      address, key_id, address_index, success_url, cancel_url, is_donation, created_at, expired_at,
      confirmations_required, payment_tolerance_percent
    )
    select
      r.id, r.project_id, r.environment, r.project_name, r.order_id, r.order_description,
      r.price_amount, r.price_currency, r.price_amount_in_usd, r.pay_currency, r.pay_network, r.rate, r.rate_sources, r.rate_quoted_at, r.amount_expected,
      r.address, r.key_id, r.address_index, r.success_url, r.cancel_url, r.is_donation,
      clock.created_at, clock.created_at + make_interval(mins => r.lifetime_minutes),
      r.confirmations_required, r.payment_tolerance_percent
    from clock, jsonb_to_recordset(${tx.json(records)}) as r(
      id uuid, project_id uuid, environment text, project_name text, order_id text, order_description text,
      price_amount numeric, price_currency text, price_amount_in_usd numeric, pay_currency text, pay_network text,
      rate numeric, rate_sources text[], rate_quoted_at timestamptz, amount_expected numeric,
      address text, key_id integer, address_index integer, success_url text, cancel_url text, is_donation boolean,
      lifetime_minutes integer, confirmations_required integer, payment_tolerance_percent numeric
    )
    returning *`;
  const byId = new Map(inserted.map((row) => [row.id, row]));
  return rows.map((row) => {
    const stored = byId.get(row.id);
    if (!stored) throw new Error(`insert into invoices returned no row for ${row.id}`);
    return stored;
  });
}

/** Invoices by id (a group of reads in one statement); the caller checks each one's project. */
export async function findInvoicesById(sql: Queryable, invoiceIds: readonly string[]): Promise<Map<string, InvoiceRow>> {
  if (invoiceIds.length === 0) return new Map();
  const rows = await sql<InvoiceRow[]>`select * from invoices where id = any(${[...new Set(invoiceIds)]}::uuid[])`;
  return new Map(rows.map((row) => [row.id, row]));
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
 * Locks invoices for a state change, in id order (two batches locking overlapping invoices queue
 * rather than deadlock; concurrent payers each see the previous one's outcome), with the database
 * clock for the expiry check. Keyed by id; the caller checks each one's project.
 */
export async function lockInvoices(tx: TransactionSql, invoiceIds: readonly string[]): Promise<{ invoices: Map<string, InvoiceRow>; now: Date }> {
  const rows = invoiceIds.length === 0 ? [] : await tx<(InvoiceRow & { db_now: Date })[]>`
    select *, now() as db_now from invoices where id = any(${[...new Set(invoiceIds)]}::uuid[]) order by id for update`;
  const invoices = new Map<string, InvoiceRow>();
  for (const { db_now: _now, ...invoice } of rows) invoices.set(invoice.id, invoice);
  // No row locked: nothing to judge by the clock, so the process's will do.
  return { invoices, now: rows[0]?.db_now ?? new Date() };
}

/**
 * Marks locked invoices Paid, in one statement. The guard repeats the transition table and the
 * expiry rule in SQL, so even a caller that skipped the lock could not pay twice or pay an expired
 * invoice: a row the guard refuses is absent from the answer (keyed by id).
 */
export async function markPaidMany(
  tx: TransactionSql,
  payments: ReadonlyArray<{ invoiceId: string; amountReceived: string; transactionHash: string }>,
): Promise<Map<string, InvoiceRow>> {
  if (payments.length === 0) return new Map();
  const records = payments.map((p) => ({ id: p.invoiceId, amount_received: p.amountReceived, transaction_hash: p.transactionHash }));
  // The rows are found by primary key only (docs/performance.md#plans): `invoices.id = any(…)` is
  // the one condition an index can serve. The guard is wrapped in `is true` so that no index can
  // serve it: as plain conditions the planner, believing few open invoices expire after now(),
  // read every open invoice through their expiry index for each batch.
  const rows = await tx<InvoiceRow[]>`
    update invoices
    set status = ${target('pay')}, amount_received = p.amount_received,
        transaction_hash = p.transaction_hash, paid_at = date_trunc('milliseconds', now())
    from jsonb_to_recordset(${tx.json(records)}) as p(id uuid, amount_received numeric, transaction_hash text)
    where invoices.id = any(${records.map((r) => r.id)}::uuid[]) and invoices.id = p.id
      and (invoices.status = any(${sourceStatuses('pay')}) and invoices.expired_at > now()) is true
    returning invoices.*`;
  return new Map(rows.map((row) => [row.id, row]));
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

/**
 * A project's invoices, newest first by (created_at, id), one page and the next page's cursor.
 * The status filter matches the status a read shows at `now` (`shownStatus`), not the stored one.
 */
export function listInvoices(sql: Queryable, query: ListQuery, now: Date): Promise<{ rows: InvoiceRow[]; nextCursor: string }> {
  const byStatus = query.status === undefined ? sql`` : sql`and ${shownStatusIs(sql, query.status, now)}`;
  const byOrder = query.orderId === undefined ? sql`` : sql`and order_id = ${query.orderId}`;
  return selectKeysetPage<InvoiceRow>(
    sql,
    { table: 'invoices', filters: sql`and project_id = ${query.projectId} ${byStatus} ${byOrder}`, order: 'newest_first', after: query.after, pageSize: query.pageSize },
    INVOICE_CURSORS,
  );
}

/**
 * The SQL twin of `shownStatus` (domain/status.ts), from the same transition table: a sandbox
 * invoice past expiredAt in a status `expire` leaves shows the status `expire` leads to.
 */
function shownStatusIs(sql: Queryable, status: InvoiceStatusName, now: Date) {
  const expiring = sourceStatuses('expire');
  const shownExpired = sql`(environment = 'sandbox' and expired_at <= ${now} and status = any(${expiring}))`;
  if (status === target('expire')) return sql`(status = ${status} or ${shownExpired})`;
  if (expiring.includes(status)) return sql`(status = ${status} and not ${shownExpired})`;
  return sql`status = ${status}`;
}

function target(event: InvoiceEvent): InvoiceStatusName {
  const sources = sourceStatuses(event);
  const to = sources[0] === undefined ? undefined : nextStatus(sources[0], event);
  if (!to || sources.some((from) => nextStatus(from, event) !== to)) {
    throw new Error(`the transition table has no single target status for ${event}`);
  }
  return to;
}

/**
 * Whether any invoice (any project, environment or network) was given one of `addresses` — the
 * forms one address may take (docs/treasury.md#house-addresses). One probe of the address index.
 */
export async function isIssuedAddress(sql: Queryable, addresses: readonly string[]): Promise<boolean> {
  const rows = await sql`select 1 from invoices where address = any(${addresses as string[]}::text[]) limit 1`;
  return rows.length > 0;
}
