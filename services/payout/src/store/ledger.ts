/**
 * The ledger: append-only `ledger_entries` and their running sums in `balances`, always written
 * together in the caller's transaction, under the balance row's lock:
 *
 *   credit_invoice  outside   → available   invoice.paid (once per invoice: unique index)
 *   hold            available → pending     a payout request (refused when available is short)
 *   release         pending   → available   cancel / attempts exhausted / code expired / reject
 *   debit           pending   → outside     an operator completed the payout
 *
 * Concurrent requests against one balance queue on its row lock (`select … for update`) and each
 * sees what the previous one left, so no interleaving can overdraw; the table's CHECK
 * (available >= 0, pending >= 0) would fail the transaction even if a caller skipped the check.
 * A payout holds once and settles (release or debit) once: unique indexes, not just the status.
 */
import type { Queryable, TransactionSql } from '@coinvoice/runtime';
import { Decimal, formatPlain } from '@coinvoice/domain/money';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';

/** A balance: per project, environment and (currency, network) (docs/accounting.md#balances-per-network). */
export interface BalanceKey {
  projectId: string;
  environment: ProjectEnvironment;
  currency: string;
  /** The network the money is on ("ethereum", "bsc", …): USDT on bsc is another balance than on ethereum. */
  network: string;
}

export interface BalanceRow {
  project_id: string;
  environment: ProjectEnvironment;
  currency: string;
  network: string;
  available: string;
  pending: string;
  updated_at: Date;
}

export type LedgerKind = 'credit_invoice' | 'hold' | 'release' | 'debit';

/**
 * Credits an invoice's payment to its project's balance in its environment and coin. Returns false
 * (and changes nothing) when this invoice was credited before, under whatever event id.
 */
export async function creditInvoice(
  tx: TransactionSql,
  credit: BalanceKey & { invoiceId: string; amount: string; eventId: string },
): Promise<boolean> {
  return insertCredit(tx, { ...credit, kind: 'credit_invoice', paymentId: null });
}

/**
 * Credits one late payment (invoice.late_payment): unique per payment id, so the same payment
 * never credits twice whatever number of events (and ids) report it. False when already credited.
 */
export async function creditLatePayment(
  tx: TransactionSql,
  credit: BalanceKey & { invoiceId: string; paymentId: string; amount: string; eventId: string },
): Promise<boolean> {
  return insertCredit(tx, { ...credit, kind: 'credit_late_payment' });
}

/**
 * One credit: the ledger entry, unless its unique index (per invoice, or per payment for late
 * payments) already holds one, and — only when the entry went in — the balance's increase, in one
 * statement (one round trip). True when credited.
 */
async function insertCredit(
  tx: TransactionSql,
  credit: BalanceKey & { kind: 'credit_invoice' | 'credit_late_payment'; invoiceId: string; paymentId: string | null; amount: string; eventId: string },
): Promise<boolean> {
  // The conflict target names the partial unique index of the kind (SQL, not a parameter).
  const onceOnly =
    credit.kind === 'credit_invoice'
      ? tx`on conflict (invoice_id) where kind = 'credit_invoice' do nothing`
      : tx`on conflict (payment_id) where kind = 'credit_late_payment' do nothing`;
  const [row] = await tx<{ credited: number }[]>`
    with entry as (
      insert into ledger_entries (project_id, environment, currency, network, kind, amount, invoice_id, event_id, payment_id)
      values (${credit.projectId}, ${credit.environment}, ${credit.currency}, ${credit.network}, ${credit.kind}, ${credit.amount}::numeric,
              ${credit.invoiceId}, ${credit.eventId}, ${credit.paymentId})
      ${onceOnly}
      returning amount
    ), balance as (
      insert into balances (project_id, environment, currency, network, available, pending)
      select ${credit.projectId}, ${credit.environment}, ${credit.currency}, ${credit.network}, entry.amount, 0 from entry
      on conflict (project_id, environment, currency, network)
      do update set available = balances.available + excluded.available, updated_at = now()
      returning 1
    )
    select (select count(*) from entry)::int as credited`;
  return (row?.credited ?? 0) > 0;
}

/** Locks a balance row for a change; undefined when the project was never credited in that coin on that network. */
export async function lockBalance(tx: TransactionSql, key: BalanceKey): Promise<BalanceRow | undefined> {
  const [row] = await tx<BalanceRow[]>`
    select * from balances
    where project_id = ${key.projectId} and environment = ${key.environment} and currency = ${key.currency} and network = ${key.network}
    for update`;
  return row;
}

export type HoldOutcome = { ok: true; balance: BalanceRow } | { ok: false; available: string };

/**
 * Holds `amount` for a payout: available → pending, when available covers it. The balance row is
 * locked first, so concurrent holds are decided one after the other.
 */
export async function hold(tx: TransactionSql, key: BalanceKey, payoutId: string, amount: string): Promise<HoldOutcome> {
  const balance = await lockBalance(tx, key);
  const available = new Decimal(balance?.available ?? '0');
  if (!balance || available.lessThan(amount)) return { ok: false, available: formatPlain(available) };
  await insertEntry(tx, key, 'hold', amount, payoutId);
  const [updated] = await tx<BalanceRow[]>`
    update balances set available = available - ${amount}::numeric, pending = pending + ${amount}::numeric, updated_at = now()
    where project_id = ${key.projectId} and environment = ${key.environment} and currency = ${key.currency} and network = ${key.network}
    returning *`;
  if (!updated) throw new Error('the locked balance row disappeared');
  return { ok: true, balance: updated };
}

/** Gives a payout's hold back: pending → available. */
export async function release(tx: TransactionSql, key: BalanceKey, payoutId: string, amount: string): Promise<void> {
  await settle(tx, key, 'release', payoutId, amount);
}

/** Pays a payout's hold out: pending → outside (total decreases). */
export async function debit(tx: TransactionSql, key: BalanceKey, payoutId: string, amount: string): Promise<void> {
  await settle(tx, key, 'debit', payoutId, amount);
}

async function settle(tx: TransactionSql, key: BalanceKey, kind: 'release' | 'debit', payoutId: string, amount: string): Promise<void> {
  await lockBalance(tx, key);
  await insertEntry(tx, key, kind, amount, payoutId);
  const backToAvailable = kind === 'release' ? amount : '0';
  const rows = await tx`
    update balances
    set pending = pending - ${amount}::numeric, available = available + ${backToAvailable}::numeric, updated_at = now()
    where project_id = ${key.projectId} and environment = ${key.environment} and currency = ${key.currency} and network = ${key.network}
    returning 1`;
  if (rows.length !== 1) throw new Error(`no balance row to ${kind} payout ${payoutId} from`);
}

async function insertEntry(tx: TransactionSql, key: BalanceKey, kind: LedgerKind, amount: string, payoutId: string): Promise<void> {
  await tx`
    insert into ledger_entries (project_id, environment, currency, network, kind, amount, payout_id)
    values (${key.projectId}, ${key.environment}, ${key.currency}, ${key.network}, ${kind}, ${amount}::numeric, ${payoutId})`;
}

/** A project's balances in one environment, one per (currency, network), by currency then network. */
export async function listBalances(sql: Queryable, projectId: string, environment: ProjectEnvironment): Promise<BalanceRow[]> {
  return sql<BalanceRow[]>`
    select * from balances where project_id = ${projectId} and environment = ${environment} order by currency, network`;
}
