/**
 * The ledger invariant check (docs/accounting.md), run hourly by every replica's worker and on an
 * operator's demand (CheckLedgerInvariants):
 *
 *   balance_mismatch        a balance differs from the sum of its entries
 *   credit_missing          the invoice service reported a credit (invoice.paid, a credited late
 *                           payment) longer than `graceMs` ago and the ledger holds none
 *   credit_amount_mismatch  the ledger credited another amount, currency or network than was
 *                           reported (balances are per (currency, network): docs/accounting.md)
 *   credit_duplicated       more than one entry for one credit
 *   credit_unbacked         a live credit the invoice service never reported (a forged event)
 *
 * Each violation is logged and counted in ledger_invariant_violations_total{kind}, which an alert
 * reads (deploy/k8s/monitoring). Nothing is repaired automatically: that is an operator's call
 * (CreditMissing credits what is missing: docs/accounting.md#crediting-what-is-missing).
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { PeriodicBatchWorker, type Logger, type Sql } from '@coinvoice/runtime';
import type { LedgerCredit } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { Decimal } from '@coinvoice/domain/money';
import { DEFAULT_NETWORK, isCryptoCode } from '@coinvoice/chains/currencies';
import { balanceMismatches, liveCreditInvoices, liveCreditsOf } from '../store/invariants';

export type LedgerViolationKind = 'balance_mismatch' | 'credit_missing' | 'credit_amount_mismatch' | 'credit_duplicated' | 'credit_unbacked';

export interface LedgerViolation {
  kind: LedgerViolationKind;
  detail: string;
}

export interface LedgerCheckResult {
  violations: LedgerViolation[];
  /** The reported credits behind the credit_missing violations, as reported (what CreditMissing credits). */
  missing: LedgerCredit[];
  balancesChecked: number;
  creditsChecked: number;
}

/** A page of what the invoice service reported to the ledger (its ListLedgerCredits RPC). */
export type ReportedCreditsPage = (afterInvoiceId: string) => Promise<{ credits: LedgerCredit[]; nextAfterInvoiceId: string }>;

export interface LedgerCheckDeps {
  sql: Sql;
  reportedCredits: ReportedCreditsPage;
  /** A credit reported this recently may still be on its way through NATS. */
  graceMs: number;
  logger: Logger;
  onViolation?: (kind: LedgerViolationKind) => void;
  pageSize?: number;
}

const keyOf = (invoiceId: string, paymentId: string | null) => `${invoiceId}/${paymentId ?? ''}`;

/** The network a reported credit is on: an invoice service from before networks reports none (the default network). */
function reportedNetwork(credit: LedgerCredit): string {
  if (credit.network !== '') return credit.network;
  return isCryptoCode(credit.currency) ? DEFAULT_NETWORK[credit.currency] : '';
}

export async function checkLedgerInvariants(deps: LedgerCheckDeps): Promise<LedgerCheckResult> {
  const startedAt = new Date();
  const violations: LedgerViolation[] = [];
  const missing: LedgerCredit[] = [];
  const violate = (kind: LedgerViolationKind, detail: string) => violations.push({ kind, detail });

  const balances = await balanceMismatches(deps.sql);
  for (const b of balances.rows) {
    violate(
      'balance_mismatch',
      `project ${b.project_id} ${b.environment} ${b.currency} on ${b.network}: balance available ${b.available} pending ${b.pending}, entries say available ${b.entries_available} pending ${b.entries_pending}`,
    );
  }

  // Every reported credit: exactly one entry, same amount; and no entry of those invoices beyond them.
  const reportedInvoices = new Set<string>();
  let creditsChecked = 0;
  let after = '';
  do {
    const page = await deps.reportedCredits(after);
    const invoiceIds = [...new Set(page.credits.map((c) => c.invoiceId))];
    for (const id of invoiceIds) reportedInvoices.add(id);
    const entries = new Map((await liveCreditsOf(deps.sql, invoiceIds)).map((e) => [keyOf(e.invoice_id, e.payment_id), e]));
    for (const credit of page.credits) {
      creditsChecked++;
      const key = keyOf(credit.invoiceId, credit.paymentId === '' ? null : credit.paymentId);
      const entry = entries.get(key);
      entries.delete(key);
      const what = `invoice ${credit.invoiceId}${credit.paymentId ? ` payment ${credit.paymentId}` : ' (invoice.paid)'}`;
      const reportedAt = credit.reportedAt ? timestampDate(credit.reportedAt) : startedAt;
      if (!entry) {
        if (startedAt.getTime() - reportedAt.getTime() > deps.graceMs) {
          violate('credit_missing', `${what}: ${credit.amount} ${credit.currency} reported at ${reportedAt.toISOString()}, not in the ledger`);
          missing.push(credit);
        }
        continue;
      }
      if (entry.entries > 1) violate('credit_duplicated', `${what}: ${entry.entries} ledger entries`);
      const network = reportedNetwork(credit);
      if (entry.currency !== credit.currency || entry.network !== network || !new Decimal(entry.amount).eq(credit.amount)) {
        violate('credit_amount_mismatch', `${what}: reported ${credit.amount} ${credit.currency} on ${network}, credited ${entry.amount} ${entry.currency} on ${entry.network}`);
      }
    }
    for (const entry of entries.values()) {
      if (entry.created_at < startedAt) violate('credit_unbacked', `invoice ${entry.invoice_id}${entry.payment_id ? ` payment ${entry.payment_id}` : ''}: ${entry.amount} ${entry.currency} on ${entry.network} credited, never reported`);
    }
    after = page.nextAfterInvoiceId;
  } while (after !== '');

  // Live credits of invoices the invoice service reported nothing for.
  let afterEntry: string | null = null;
  for (;;) {
    const invoiceIds = await liveCreditInvoices(deps.sql, startedAt, afterEntry, deps.pageSize ?? 1000);
    if (invoiceIds.length === 0) break;
    const unreported = invoiceIds.filter((id) => !reportedInvoices.has(id));
    for (const entry of await liveCreditsOf(deps.sql, unreported)) {
      violate('credit_unbacked', `invoice ${entry.invoice_id}${entry.payment_id ? ` payment ${entry.payment_id}` : ''}: ${entry.amount} ${entry.currency} on ${entry.network} credited, never reported`);
    }
    afterEntry = invoiceIds[invoiceIds.length - 1]!;
  }

  for (const v of violations) {
    deps.logger.error({ kind: v.kind, detail: v.detail }, 'LEDGER INVARIANT VIOLATED: nothing is repaired automatically; an operator must look');
    deps.onViolation?.(v.kind);
  }
  if (violations.length === 0) deps.logger.info({ balancesChecked: balances.checked, creditsChecked }, 'ledger invariants hold');
  return { violations, missing, balancesChecked: balances.checked, creditsChecked };
}

/** The hourly run: every replica checks (read-only), so one replica's death never stops it. */
export class LedgerInvariantWorker extends PeriodicBatchWorker {
  constructor(private readonly deps: LedgerCheckDeps & { intervalMs: number }) {
    super({ logger: deps.logger, component: 'ledger-invariants', intervalMs: deps.intervalMs, batchSize: 1, failureMessage: 'ledger invariant check failed; retrying at the next interval' });
  }

  async processBatch(): Promise<number> {
    await checkLedgerInvariants(this.deps);
    return 0;
  }
}
