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
 * Credits invoices' payments to their projects' balances (each in its environment, coin and
 * network), in ONE statement for all of them (a group of invoice.paid events,
 * docs/performance.md#events): the ledger entries, unless the invoice was credited before under
 * whatever event id (its unique index; also a second entry for one invoice in `credits`), and each
 * balance increased once by what went in, balances taken in key order. Returns the ids of the
 * invoices credited now.
 */
export async function creditInvoices(
  tx: TransactionSql,
  credits: ReadonlyArray<BalanceKey & { invoiceId: string; amount: string; eventId: string }>,
): Promise<Set<string>> {
  if (credits.length === 0) return new Set();
  const records = credits.map((c) => ({
    project_id: c.projectId,
    environment: c.environment,
    currency: c.currency,
    network: c.network,
    amount: c.amount,
    invoice_id: c.invoiceId,
    event_id: c.eventId,
  }));
  // One JSON parameter: amounts travel as decimal strings into numeric, never a float.
  const rows = await tx<{ invoice_id: string }[]>`
    with entry as (
      insert into ledger_entries (project_id, environment, currency, network, kind, amount, invoice_id, event_id, payment_id)
      select c.project_id, c.environment, c.currency, c.network, 'credit_invoice', c.amount, c.invoice_id, c.event_id, null
      from jsonb_to_recordset(${tx.json(records)}) as c(project_id uuid, environment text, currency text, network text, amount numeric, invoice_id uuid, event_id text)
      on conflict (invoice_id) where kind = 'credit_invoice' do nothing
      returning project_id, environment, currency, network, amount, invoice_id
    ), balance as (
      insert into balances (project_id, environment, currency, network, available, pending)
      select project_id, environment, currency, network, sum(amount), 0 from entry
      group by project_id, environment, currency, network
      order by project_id, environment, currency, network
      on conflict (project_id, environment, currency, network)
      do update set available = balances.available + excluded.available, updated_at = now()
      returning 1
    )
    select invoice_id from entry`;
  return new Set(rows.map((row) => row.invoice_id));
}

/** One invoice's credit (creditInvoices); false, and nothing changed, when it was credited before. */
export async function creditInvoice(tx: TransactionSql, credit: BalanceKey & { invoiceId: string; amount: string; eventId: string }): Promise<boolean> {
  return (await creditInvoices(tx, [credit])).has(credit.invoiceId);
}

/**
 * Credits one late payment (invoice.late_payment): unique per payment id, so the same payment
 * never credits twice whatever number of events (and ids) report it. The ledger entry, unless its
 * unique index already holds one, and — only when the entry went in — the balance's increase, in
 * one statement. False when already credited.
 */
export async function creditLatePayment(
  tx: TransactionSql,
  credit: BalanceKey & { invoiceId: string; paymentId: string; amount: string; eventId: string },
): Promise<boolean> {
  const [row] = await tx<{ credited: number }[]>`
    with entry as (
      insert into ledger_entries (project_id, environment, currency, network, kind, amount, invoice_id, event_id, payment_id)
      values (${credit.projectId}, ${credit.environment}, ${credit.currency}, ${credit.network}, 'credit_late_payment', ${credit.amount}::numeric,
              ${credit.invoiceId}, ${credit.eventId}, ${credit.paymentId})
      on conflict (payment_id) where kind = 'credit_late_payment' do nothing
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

/**
 * What `key` has available now, read without its row lock: a payout request refuses a short
 * balance before it emails a code, and `hold` decides again under the lock.
 */
export async function availableBalance(sql: Queryable, key: BalanceKey): Promise<string> {
  const [row] = await sql<{ available: string }[]>`
    select available from balances
    where project_id = ${key.projectId} and environment = ${key.environment} and currency = ${key.currency} and network = ${key.network}`;
  return formatPlain(new Decimal(row?.available ?? '0'));
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
