/**
 * Settlement: re-derives one invoice's status from its payments (the pure `deriveInvoiceState`)
 * and writes the outcome with its events, in the caller's transaction. The watcher calls it for
 * every invoice a block touched, the expiry sweeper for invoices past expiredAt, so both follow
 * the same rule. The invoice row is locked first: the watcher, the sweeper and a sandbox pay never
 * interleave on one invoice.
 *
 * Events (outbox, same transaction):
 *   → Confirming                      invoice.confirming
 *   → PartiallyPaid (or more of it)   invoice.partially_paid
 *   → Paid                            invoice.paid, once (paid_at is set once); its amount is the
 *                                     ACCOUNTED money (isAccounted, docs/accounting.md) — what the
 *                                     ledger credits — and the payments it covers are marked 'paid'.
 *                                     A payment still unconfirmed then is not in it.
 *   → Expired                         invoice.expired
 *   fewer funds than before Paid      invoice.reopened (a reorg or replacement removed payments)
 *   an accounted payment invoice.paid did not cover (after expiry, after Paid — also one that was
 *   still unconfirmed when the invoice turned Paid —, another asset, another network)
 *                                     invoice.late_payment, once per payment ('late' credited,
 *                                     'uncredited' for another asset or network: `network` says
 *                                     where it arrived, docs/networks.md#wrong-network), the
 *                                     moment it is accounted (with ITS network's confirmations);
 *                                     one that leaves the chain before is never credited
 */
import { enqueueEvent, type EventTransaction } from '@coinvoice/runtime';
import { deriveInvoiceState, isAccounted, isLivePayment, paysInvoice, type PaymentFacts } from './domain/payments';
import type { InvoiceStatusName } from './domain/status';
import { isCryptoCode, isPayNetwork } from '@coinvoice/chains/currencies';
import { Decimal } from '@coinvoice/domain/money';
import {
  invoiceConfirmingEvent,
  invoiceExpiredEvent,
  invoiceLatePaymentEvent,
  invoicePaidEvent,
  invoicePartiallyPaidEvent,
  invoiceReopenedEvent,
} from './events/invoice-events';
import type { InvoiceRow } from './store/invoices';
import { ledgerPaymentId, lockInvoiceById, markReported, paymentsOf, type PaymentRow } from './store/payments';

export interface SettlementOutcome {
  invoice: InvoiceRow;
  previousStatus: InvoiceStatusName;
  events: string[];
}

export function paymentFacts(row: PaymentRow): PaymentFacts {
  if (!isCryptoCode(row.asset)) throw new Error(`payment ${row.id} has unknown asset ${row.asset}`);
  if (!isPayNetwork(row.chain)) throw new Error(`payment ${row.id} has unknown network ${row.chain}`);
  return {
    asset: row.asset,
    network: row.chain,
    amount: new Decimal(row.amount),
    status: row.status,
    blockTime: row.block_time,
    credited: row.reported_as === 'paid' || row.reported_as === 'late',
  };
}

export function invoiceFacts(row: InvoiceRow) {
  if (!isCryptoCode(row.pay_currency)) throw new Error(`invoice ${row.id} has unknown pay currency`);
  return {
    environment: row.environment,
    payCurrency: row.pay_currency,
    payNetwork: row.pay_network,
    amountExpected: new Decimal(row.amount_expected),
    expiredAt: row.expired_at,
    tolerancePercent: new Decimal(row.payment_tolerance_percent),
    paidAt: row.paid_at,
    // Sandbox invoices have no payment rows: their amount is the simulated one.
    ...(row.environment === 'sandbox' ? { simulatedAmount: new Decimal(row.amount_received) } : {}),
  };
}

const RANK: Readonly<Record<InvoiceStatusName, number>> = { Waiting: 0, PartiallyPaid: 1, Confirming: 2, Paid: 3, Expired: 0 };

/** Re-derives and writes one invoice; undefined when it does not exist. */
export async function settleInvoice(tx: EventTransaction, invoiceId: string): Promise<SettlementOutcome | undefined> {
  const locked = await lockInvoiceById(tx, invoiceId);
  if (!locked) return undefined;
  const { invoice: before, now } = locked;
  const payments = await paymentsOf(tx, invoiceId);
  const facts = invoiceFacts(before);
  const derived = deriveInvoiceState(facts, payments.map(paymentFacts), now);
  // Money for this invoice: its asset on its network (a wrong-network payment is reported, never counted).
  const pays = (p: PaymentRow) => paysInvoice(facts, { asset: p.asset, network: p.chain });
  const events: string[] = [];
  // After Paid, credited money stays counted even if its block leaves the chain (deriveInvoiceState).
  const amount = before.environment === 'sandbox' ? before.amount_received : derived.amountReceived.toFixed();

  let invoice = before;
  const statusChanged = derived.status !== before.status;
  const amountChanged = !new Decimal(before.amount_received).eq(amount);
  if (statusChanged || amountChanged) {
    const becamePaid = derived.status === 'Paid' && before.paid_at === null;
    // The transaction that completed the payment: the newest accounted one.
    const completing = [...payments].reverse().find((p) => pays(p) && isAccounted(p.status));
    const [updated] = await tx<InvoiceRow[]>`
      update invoices
      set status = ${derived.status}, amount_received = ${amount}::numeric,
          paid_at = case when ${becamePaid} then date_trunc('milliseconds', now()) else paid_at end,
          transaction_hash = case when ${becamePaid} then ${completing?.transaction_hash ?? null} else transaction_hash end
      where id = ${invoiceId}
      returning *`;
    invoice = updated!;
  }

  if (statusChanged) {
    switch (derived.status) {
      case 'Paid': {
        // invoice.paid's amount is the accounted money: the ledger credits exactly that. A payment
        // still unconfirmed is credited when it is accounted (below, as a late payment) or never.
        const covered = payments.filter((p) => pays(p) && isAccounted(p.status) && p.reported_as === null);
        await markReported(tx, covered.map((p) => p.id), 'paid');
        for (const p of covered) p.reported_as = 'paid';
        const accounted = covered.reduce((total, p) => total.plus(p.amount), new Decimal(0));
        await enqueueEvent(tx, invoicePaidEvent(invoice, accounted));
        events.push('invoice.paid');
        break;
      }
      case 'Confirming': {
        const counting = payments.filter((p) => pays(p) && isLivePayment(p.status));
        const confirmations = counting.length === 0 ? 0 : Math.min(...counting.map((p) => p.confirmations));
        if (RANK[before.status] > RANK.Confirming) break;
        await enqueueEvent(tx, invoiceConfirmingEvent(invoice, confirmations));
        events.push('invoice.confirming');
        break;
      }
      case 'PartiallyPaid':
        if (RANK[before.status] > RANK.PartiallyPaid) {
          await enqueueEvent(tx, invoiceReopenedEvent(invoice, before.status));
          events.push('invoice.reopened');
        } else {
          await enqueueEvent(tx, invoicePartiallyPaidEvent(invoice, derived.amountRemaining));
          events.push('invoice.partially_paid');
        }
        break;
      case 'Waiting':
        await enqueueEvent(tx, invoiceReopenedEvent(invoice, before.status));
        events.push('invoice.reopened');
        break;
      case 'Expired':
        if (before.status === 'Confirming') {
          // Its on-time payments left the chain after expiredAt: reopened, and now expired.
          await enqueueEvent(tx, invoiceReopenedEvent(invoice, before.status));
          events.push('invoice.reopened');
        }
        await enqueueEvent(tx, invoiceExpiredEvent(invoice));
        events.push('invoice.expired');
        break;
    }
  } else if (amountChanged && derived.status === 'PartiallyPaid') {
    const fewer = new Decimal(amount).lt(before.amount_received);
    await enqueueEvent(tx, fewer ? invoiceReopenedEvent(invoice, before.status) : invoicePartiallyPaidEvent(invoice, derived.amountRemaining));
    events.push(fewer ? 'invoice.reopened' : 'invoice.partially_paid');
  }

  // Accounted money the invoice.paid amount does not cover: reported (and credited) once each.
  if (invoice.status === 'Paid' || invoice.status === 'Expired') {
    for (const p of payments) {
      if (p.reported_as !== null || !isAccounted(p.status)) continue;
      const credited = pays(p);
      await markReported(tx, [p.id], credited ? 'late' : 'uncredited');
      await enqueueEvent(
        tx,
        invoiceLatePaymentEvent(invoice, {
          id: ledgerPaymentId(p),
          transactionHash: p.transaction_hash,
          asset: p.asset,
          network: p.chain,
          amount: new Decimal(p.amount),
          credited,
        }),
      );
      events.push('invoice.late_payment');
    }
  } else {
    // Another asset, or another network, on an open invoice: reported once confirmed, never credited.
    for (const p of payments) {
      if (p.reported_as !== null || pays(p) || !isAccounted(p.status)) continue;
      await markReported(tx, [p.id], 'uncredited');
      await enqueueEvent(
        tx,
        invoiceLatePaymentEvent(invoice, {
          id: ledgerPaymentId(p),
          transactionHash: p.transaction_hash,
          asset: p.asset,
          network: p.chain,
          amount: new Decimal(p.amount),
          credited: false,
        }),
      );
      events.push('invoice.late_payment');
    }
  }

  return { invoice, previousStatus: before.status, events };
}
