/**
 * The events the invoice service publishes (events.proto), built from an invoice row and written
 * to the outbox with `enqueueEvent` in the transaction of the change:
 *   invoice.paid    — PayInvoice (Waiting → Paid)
 *   invoice.expired — the expiry sweeper (open → Expired)
 *   invoice.confirming, invoice.partially_paid, invoice.late_payment, invoice.reopened — the
 *     chain watcher's settlement of live invoices (settlement.ts)
 * Payloads are the protobuf messages as JSON (`toJson`), flat, public spellings, amounts as
 * decimal strings, keyed by the invoice id. Creating an invoice publishes nothing: no service acts
 * on a creation (docs/performance.md#events).
 */
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { NewEvent } from '@coinvoice/runtime';
import {
  InvoiceConfirmingSchema,
  InvoiceExpiredSchema,
  InvoiceLatePaymentSchema,
  InvoicePaidSchema,
  InvoicePartiallyPaidSchema,
  InvoiceReopenedSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { formatPlain, Decimal } from '@coinvoice/domain/money';
import type { InvoiceRow } from '../store/invoices';

export const INVOICE_EVENT_TYPES = {
  paid: 'invoice.paid',
  expired: 'invoice.expired',
  confirming: 'invoice.confirming',
  partiallyPaid: 'invoice.partially_paid',
  latePayment: 'invoice.late_payment',
  reopened: 'invoice.reopened',
} as const;

function amountReceived(row: InvoiceRow): string {
  return formatPlain(row.amount_received);
}

export function invoiceConfirmingEvent(row: InvoiceRow, confirmations: number): NewEvent {
  const message = create(InvoiceConfirmingSchema, {
    ...invoiceFields(row),
    ...payNetworkField(row),
    ...receivedFields(row),
    confirmations,
    confirmationsRequired: row.confirmations_required,
  });
  return { type: INVOICE_EVENT_TYPES.confirming, payload: toJson(InvoiceConfirmingSchema, message), key: row.id };
}

export function invoicePartiallyPaidEvent(row: InvoiceRow, amountRemaining: Decimal): NewEvent {
  const message = create(InvoicePartiallyPaidSchema, {
    ...invoiceFields(row),
    ...payNetworkField(row),
    ...receivedFields(row),
    amountRemaining: formatPlain(amountRemaining),
  });
  return { type: INVOICE_EVENT_TYPES.partiallyPaid, payload: toJson(InvoicePartiallyPaidSchema, message), key: row.id };
}

export function invoiceLatePaymentEvent(
  row: InvoiceRow,
  /** `network`: where it arrived; another than the invoice's pay_network is a wrong-network payment (credited false). */
  payment: { id: string; transactionHash: string; asset: string; network: string; amount: Decimal; credited: boolean },
): NewEvent {
  const message = create(InvoiceLatePaymentSchema, {
    ...invoiceFields(row),
    ...payNetworkField(row),
    amount: formatPlain(payment.amount),
    currency: payment.asset,
    transactionHash: payment.transactionHash,
    credited: payment.credited,
    paymentId: payment.id,
    network: payment.network,
  });
  return { type: INVOICE_EVENT_TYPES.latePayment, payload: toJson(InvoiceLatePaymentSchema, message), key: row.id };
}

export function invoiceReopenedEvent(row: InvoiceRow, previousStatus: string): NewEvent {
  const message = create(InvoiceReopenedSchema, {
    ...invoiceFields(row),
    ...payNetworkField(row),
    ...receivedFields(row),
    previousStatus,
  });
  return { type: INVOICE_EVENT_TYPES.reopened, payload: toJson(InvoiceReopenedSchema, message), key: row.id };
}

function orderId(row: InvoiceRow): { orderId?: string } {
  return row.order_id === null ? {} : { orderId: row.order_id };
}

/** What every invoice event says of its invoice, in the flat public style of invoice.paid. */
function invoiceFields(row: InvoiceRow) {
  return { invoiceId: row.id, projectId: row.project_id, ...orderId(row), status: row.status, environment: row.environment };
}

/** The invoice's pay_network (docs/networks.md), on every invoice event: the settlement's and the invoice API's. */
function payNetworkField(row: InvoiceRow) {
  return { payNetwork: row.pay_network };
}

/** amount and currency as invoice.paid has them: what the invoice has received, in its coin. */
function receivedFields(row: InvoiceRow) {
  return { amount: amountReceived(row), currency: row.pay_currency };
}

/**
 * `invoice.paid`: amount is the money the ledger credits for it — the accounted payments a live
 * invoice turned Paid with (docs/accounting.md), or a sandbox invoice's simulated amount —,
 * currency its payCurrency.
 */
export function invoicePaidEvent(row: InvoiceRow, accounted: Decimal): NewEvent {
  if (row.status !== 'Paid' || row.paid_at === null || row.transaction_hash === null) {
    throw new Error(`invoice ${row.id} is not paid`);
  }
  if (!accounted.gt(0)) throw new Error(`invoice ${row.id} turned Paid with no accounted money`);
  const message = create(InvoicePaidSchema, {
    ...invoiceFields(row),
    ...payNetworkField(row),
    amount: formatPlain(accounted),
    currency: row.pay_currency,
    transactionHash: row.transaction_hash,
    paidAt: timestampFromDate(row.paid_at),
  });
  return { type: INVOICE_EVENT_TYPES.paid, payload: toJson(InvoicePaidSchema, message), key: row.id };
}

export function invoiceExpiredEvent(row: InvoiceRow): NewEvent {
  if (row.status !== 'Expired') throw new Error(`invoice ${row.id} is not expired`);
  const message = create(InvoiceExpiredSchema, {
    ...invoiceFields(row),
    ...payNetworkField(row),
    currency: row.pay_currency,
    expiredAt: timestampFromDate(row.expired_at),
  });
  return { type: INVOICE_EVENT_TYPES.expired, payload: toJson(InvoiceExpiredSchema, message), key: row.id };
}
