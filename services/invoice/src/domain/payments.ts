/**
 * Payments and the invoice status derived from them (docs/architecture.md#derived-status). Pure: no I/O, no clock of its
 * own (`now` is passed in). The watcher, the expiry sweeper and the read path all call
 * `deriveInvoiceState`, so there is exactly one rule for what an invoice's status is.
 *
 * A payment is one transfer of value to an invoice's address: one row per (chain, transaction
 * hash, output index) — the ERC-20 log index, the UTXO output index, or NATIVE_VALUE_INDEX for an
 * account chain's own transaction value.
 *
 *   seen       in the mempool, or mined with fewer confirmations than required
 *   confirmed  mined with at least the required confirmations
 *   final      confirmed and deeper than the watcher still checks for reorgs
 *   orphaned   its block left the canonical chain (it may come back in another block: a new row
 *              state, same key)
 *   replaced   the transaction was dropped or double-spent before it was mined (UTXO chains)
 */
import { Decimal } from '@coinvoice/domain/money';
import type { Chain, CryptoCode } from '@coinvoice/chains/coin';
import type { InvoiceStatusName } from './status';

export const PAYMENT_STATUSES = ['seen', 'confirmed', 'final', 'orphaned', 'replaced'] as const;
export type PaymentStatus = (typeof PAYMENT_STATUSES)[number];


export function isPaymentStatus(value: unknown): value is PaymentStatus {
  return typeof value === 'string' && (PAYMENT_STATUSES as readonly string[]).includes(value);
}

/** Whether a payment still counts towards amounts (it is, or may still be, on the chain). */
export function isLivePayment(status: PaymentStatus): boolean {
  return status !== 'orphaned' && status !== 'replaced';
}

/**
 * The one rule for "accounted" (docs/accounting.md): a payment counts as money — for the Paid
 * status, for `invoice.paid`'s amount, for every ledger credit — only once it is confirmed to the
 * invoice's confirmationsRequired and not orphaned or replaced. Its status says that: the store's
 * `refreshConfirmations` (the only place that sets 'confirmed'/'final' from confirmations) decides
 * it, this predicate reads it. Nothing else may decide whether money counts.
 */
export function isAccounted(status: PaymentStatus): boolean {
  return status === 'confirmed' || status === 'final';
}

/** What the status function needs of a payment. */
export interface PaymentFacts {
  asset: CryptoCode;
  /** The network it arrived on (the watcher's): another than the invoice's is a wrong-network payment. */
  network: Chain;
  amount: Decimal;
  status: PaymentStatus;
  /** The block's timestamp; null while unmined. */
  blockTime: Date | null;
  /**
   * Whether the ledger was already told of it (invoice.paid or a credited late payment): money
   * credited stays counted in amountReceived even if its block later leaves the chain (an
   * incident, never reversed automatically); money never credited that leaves the chain does not.
   */
  credited?: boolean;
}

/**
 * Whether a payment is money FOR the invoice: its asset on its network. Another asset, or the same
 * asset on another network (a wrong-network payment, docs/networks.md#wrong-network), is recorded
 * and reported but never counts toward the status and is never credited. The one rule, used by the
 * status function and by settlement.
 */
export function paysInvoice(invoice: { payCurrency: string; payNetwork: string }, payment: { asset: string; network: string }): boolean {
  return payment.asset === invoice.payCurrency && payment.network === invoice.payNetwork;
}

/** What the status function needs of an invoice. */
export interface InvoiceFacts {
  environment: 'live' | 'sandbox';
  payCurrency: CryptoCode;
  /** The network it is paid on (docs/networks.md). */
  payNetwork: Chain;
  amountExpected: Decimal;
  expiredAt: Date;
  /** The project's paymentTolerancePercent (0–5) at creation. */
  tolerancePercent: Decimal;
  /**
   * Set once the invoice became Paid (the confirmation threshold, or a sandbox simulation): after
   * Paid nothing is reversed automatically (a deeper reorg is an incident, not a status change).
   */
  paidAt: Date | null;
  /** The sandbox's simulated amount (sandbox invoices have no payment rows). */
  simulatedAmount?: Decimal;
}

export interface DerivedInvoiceState {
  status: InvoiceStatusName;
  /**
   * Sum of the invoice's own-asset payments not orphaned or replaced (late ones included); after
   * Paid also those credited before their block left the chain.
   */
  amountReceived: Decimal;
  /** What is still missing for the price (never negative): the checkout page's "remaining". */
  amountRemaining: Decimal;
  /** The least the confirmed on-time total must reach: expected minus tolerance. */
  threshold: Decimal;
}

/**
 * A payment is on time when its block's timestamp is ≤ expiredAt, even if it was detected later
 * (a watcher outage never expires a paid invoice); an unmined payment is on time while the
 * invoice has not expired.
 */
export function isOnTime(payment: Pick<PaymentFacts, 'blockTime'>, expiredAt: Date, now: Date): boolean {
  const at = payment.blockTime ?? now;
  return at.getTime() <= expiredAt.getTime();
}

/** The project's paymentTolerancePercent as CreateInvoice receives it: "0" to "5", at most 2 decimals. */
export function parseTolerancePercent(raw: string | undefined): { ok: true; value: Decimal } | { ok: false; reason: string } {
  if (raw === undefined || raw === '') return { ok: true, value: new Decimal(0) };
  if (!/^\d{1,2}(\.\d{1,2})?$/.test(raw) || new Decimal(raw).gt(5)) return { ok: false, reason: 'must be a number from 0 to 5 with at most 2 decimals' };
  return { ok: true, value: new Decimal(raw) };
}

/** expected × (1 − tolerance%). */
export function paymentThreshold(amountExpected: Decimal, tolerancePercent: Decimal): Decimal {
  return amountExpected.times(new Decimal(100).minus(tolerancePercent)).dividedBy(100);
}

/**
 * The one status rule (docs/architecture.md#derived-status):
 *   Paid          — already paid, or the confirmed on-time total ≥ threshold
 *   Confirming    — the on-time total still on the chain ≥ threshold, not all confirmed yet
 *                   (also after expiredAt when those payments were mined on time)
 *   Expired       — expiredAt passed before the on-time total covered the price
 *   PartiallyPaid — something on time, below the threshold, not expired
 *   Waiting       — nothing on time (yet)
 * Payments of another asset or on another network never count (paysInvoice); orphaned and
 * replaced ones never count.
 */
export function deriveInvoiceState(invoice: InvoiceFacts, payments: readonly PaymentFacts[], now: Date): DerivedInvoiceState {
  const threshold = paymentThreshold(invoice.amountExpected, invoice.tolerancePercent);
  const own = payments.filter((p) => paysInvoice(invoice, p) && isLivePayment(p.status));
  const sum = (list: readonly PaymentFacts[]) => list.reduce((total, p) => total.plus(p.amount), new Decimal(0));
  const received = invoice.paidAt === null ? own : payments.filter((p) => paysInvoice(invoice, p) && (isLivePayment(p.status) || p.credited === true));
  const amountReceived = invoice.simulatedAmount ?? sum(received);
  const remaining = Decimal.max(invoice.amountExpected.minus(amountReceived), 0);
  const state = (status: InvoiceStatusName): DerivedInvoiceState => ({
    status,
    amountReceived,
    amountRemaining: status === 'Paid' ? new Decimal(0) : remaining,
    threshold,
  });

  if (invoice.paidAt !== null) return state('Paid');
  const onTime = own.filter((p) => isOnTime(p, invoice.expiredAt, now));
  const confirmedOnTime = sum(onTime.filter((p) => isAccounted(p.status)));
  const seenOnTime = sum(onTime);
  if (seenOnTime.gt(0) && confirmedOnTime.gte(threshold)) return state('Paid');
  const mined = onTime.filter((p) => p.blockTime !== null);
  const expired = now.getTime() > invoice.expiredAt.getTime();
  if (expired) return state(seenOnTime.gt(0) && sum(mined).gte(threshold) ? 'Confirming' : 'Expired');
  if (seenOnTime.gt(0) && seenOnTime.gte(threshold)) return state('Confirming');
  if (seenOnTime.gt(0)) return state('PartiallyPaid');
  return state('Waiting');
}
