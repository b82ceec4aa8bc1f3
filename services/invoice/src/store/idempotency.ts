/**
 * `idempotency_keys`: CreateInvoice's Idempotency-Key, per project, 24 h; the row names the
 * invoice it created in `invoice_id`. How keys are claimed, replayed and expired: the runtime's
 * IdempotencyKeys.
 */
import { IdempotencyKeys } from '@coinvoice/runtime';

export const invoiceIdempotencyKeys = new IdempotencyKeys('invoice', 'invoices');
