/** Event payloads the notifier tests publish, as the invoice service's outbox writes them. */
import { randomUUID } from 'node:crypto';
import { create, toJson, type JsonValue } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';

/** A sandbox `invoice.paid` of the project (a new invoice unless named). */
export function invoicePaid(projectId: string, overrides: Partial<{ invoiceId: string; orderId: string; amount: string }> = {}): JsonValue {
  return toJson(
    InvoicePaidSchema,
    create(InvoicePaidSchema, {
      invoiceId: overrides.invoiceId ?? randomUUID(),
      projectId,
      ...(overrides.orderId === undefined ? {} : { orderId: overrides.orderId }),
      status: 'Paid',
      amount: overrides.amount ?? '0.00123400',
      currency: 'BTC',
      environment: 'sandbox',
      transactionHash: 'ab'.repeat(32),
      paidAt: timestampFromDate(new Date()),
      payNetwork: 'bitcoin',
    }),
  );
}
