/**
 * The events the invoice service publishes (events.proto), built from an invoice row and written
 * to the outbox with `enqueueEvent` in the transaction of the change:
 *   invoice.created — CreateInvoice
 *   invoice.paid    — PayInvoice (Waiting → Paid)
 *   invoice.expired — the expiry sweeper (Waiting → Expired)
 * Payloads are the protobuf messages as JSON (`toJson`), flat, public spellings, amounts as
 * decimal strings, keyed by the invoice id.
 */
import { create, toJson } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import type { NewEvent } from '@coinvoice/runtime';
import {
  InvoiceCreatedSchema,
  InvoiceExpiredSchema,
  InvoicePaidSchema,
} from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { formatFixed, formatPlain, Decimal, fiatCurrency, isFiatCode } from '../domain';
import type { InvoiceRow } from '../store/invoices';

export const INVOICE_EVENT_TYPES = {
  created: 'invoice.created',
  paid: 'invoice.paid',
  expired: 'invoice.expired',
} as const;

function orderId(row: InvoiceRow): { orderId?: string } {
  return row.order_id === null ? {} : { orderId: row.order_id };
}

export function invoiceCreatedEvent(row: InvoiceRow): NewEvent {
  const minorUnits = isFiatCode(row.price_currency) ? fiatCurrency(row.price_currency).minorUnits : 2;
  const message = create(InvoiceCreatedSchema, {
    invoiceId: row.id,
    projectId: row.project_id,
    ...orderId(row),
    status: row.status,
    priceAmount: formatFixed(new Decimal(row.price_amount), minorUnits),
    priceCurrency: row.price_currency,
    amountExpected: formatPlain(new Decimal(row.amount_expected)),
    currency: row.pay_currency,
    address: row.address,
    environment: row.environment,
    createdAt: timestampFromDate(row.created_at),
    expiredAt: timestampFromDate(row.expired_at),
  });
  return { type: INVOICE_EVENT_TYPES.created, payload: toJson(InvoiceCreatedSchema, message), key: row.id };
}

/** `invoice.paid`: amount is the invoice's amountReceived, currency its payCurrency. */
export function invoicePaidEvent(row: InvoiceRow): NewEvent {
  if (row.status !== 'Paid' || row.paid_at === null || row.transaction_hash === null) {
    throw new Error(`invoice ${row.id} is not paid`);
  }
  const message = create(InvoicePaidSchema, {
    invoiceId: row.id,
    projectId: row.project_id,
    ...orderId(row),
    status: row.status,
    amount: formatPlain(new Decimal(row.amount_received)),
    currency: row.pay_currency,
    environment: row.environment,
    transactionHash: row.transaction_hash,
    paidAt: timestampFromDate(row.paid_at),
  });
  return { type: INVOICE_EVENT_TYPES.paid, payload: toJson(InvoicePaidSchema, message), key: row.id };
}

export function invoiceExpiredEvent(row: InvoiceRow): NewEvent {
  if (row.status !== 'Expired') throw new Error(`invoice ${row.id} is not expired`);
  const message = create(InvoiceExpiredSchema, {
    invoiceId: row.id,
    projectId: row.project_id,
    ...orderId(row),
    status: row.status,
    currency: row.pay_currency,
    environment: row.environment,
    expiredAt: timestampFromDate(row.expired_at),
  });
  return { type: INVOICE_EVENT_TYPES.expired, payload: toJson(InvoiceExpiredSchema, message), key: row.id };
}
