/**
 * The ledger's invariants as SQL (docs/accounting.md): what the invariant check reads. Each
 * query returns the rows that VIOLATE a rule; an empty answer means the rule holds.
 */
import type { Queryable } from '@coinvoice/runtime';

export interface BalanceMismatchRow {
  project_id: string;
  environment: string;
  currency: string;
  network: string;
  available: string;
  pending: string;
  entries_available: string;
  entries_pending: string;
}

/**
 * Balances that differ from the sum of their entries: available = Σcredit − Σhold + Σrelease,
 * pending = Σhold − Σrelease − Σdebit (the ledger's table comment). A full outer join: entries
 * without a balance row, or a balance row without entries, are violations too.
 */
export async function balanceMismatches(sql: Queryable): Promise<{ rows: BalanceMismatchRow[]; checked: number }> {
  const rows = await sql<(BalanceMismatchRow & { violates: boolean })[]>`
    with sums as (
      select project_id, environment, currency, network,
             sum(case when kind in ('credit_invoice', 'credit_late_payment', 'release') then amount when kind = 'hold' then -amount else 0 end) as available,
             sum(case when kind = 'hold' then amount when kind in ('release', 'debit') then -amount else 0 end) as pending
      from ledger_entries group by project_id, environment, currency, network
    )
    select coalesce(b.project_id, s.project_id) as project_id, coalesce(b.environment, s.environment) as environment,
           coalesce(b.currency, s.currency) as currency, coalesce(b.network, s.network) as network,
           coalesce(b.available, 0)::text as available, coalesce(b.pending, 0)::text as pending,
           coalesce(s.available, 0)::text as entries_available, coalesce(s.pending, 0)::text as entries_pending,
           (coalesce(b.available, 0) <> coalesce(s.available, 0) or coalesce(b.pending, 0) <> coalesce(s.pending, 0)) as violates
    from balances b full outer join sums s using (project_id, environment, currency, network)`;
  return { rows: rows.filter((r) => r.violates), checked: rows.length };
}

export interface LiveCreditEntry {
  invoice_id: string;
  payment_id: string | null;
  currency: string;
  network: string;
  amount: string;
  entries: number;
  created_at: Date;
}

/**
 * The ledger's live credits for some invoices: one row per invoice.paid credit (payment_id null)
 * and per late-payment credit, with how many entries hold it (the unique indexes keep that at 1).
 */
export async function liveCreditsOf(sql: Queryable, invoiceIds: readonly string[]): Promise<LiveCreditEntry[]> {
  if (invoiceIds.length === 0) return [];
  return sql<LiveCreditEntry[]>`
    select invoice_id, payment_id, currency, network, sum(amount)::text as amount, count(*)::int as entries, min(created_at) as created_at
    from ledger_entries
    where environment = 'live' and kind in ('credit_invoice', 'credit_late_payment') and invoice_id = any(${invoiceIds as string[]}::uuid[])
    group by invoice_id, payment_id, currency, network`;
}

/** The invoices with live credits written before `before`, a page at a time (keyset by invoice id). */
export async function liveCreditInvoices(sql: Queryable, before: Date, afterInvoiceId: string | null, limit: number): Promise<string[]> {
  const rows = await sql<{ invoice_id: string }[]>`
    select distinct invoice_id from ledger_entries
    where environment = 'live' and kind in ('credit_invoice', 'credit_late_payment') and created_at < ${before}
      and (${afterInvoiceId}::uuid is null or invoice_id > ${afterInvoiceId}::uuid)
    order by invoice_id limit ${limit}`;
  return rows.map((r) => r.invoice_id);
}
