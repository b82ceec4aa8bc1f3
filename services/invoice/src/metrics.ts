/** Business metrics of the invoice service, next to the runtime's RPC metrics on /metrics. */
import { Counter, Histogram, type Registry } from 'prom-client';

export interface InvoiceMetrics {
  created: Counter<'pay_currency' | 'environment'>;
  idempotentReplays: Counter;
  paid: Counter<'pay_currency'>;
  expired: Counter;
  /** Calls per group-committed batch (docs/performance.md#group-commit), by kind. */
  batchSize: Histogram<'kind'>;
  /** Batches whose transaction failed and whose calls were retried one by one, by kind. */
  batchesRetriedAlone: Counter<'kind'>;
}

export function createInvoiceMetrics(registry: Registry): InvoiceMetrics {
  return {
    created: new Counter({
      name: 'invoice_created_total',
      help: 'Invoices created, by pay currency and environment',
      labelNames: ['pay_currency', 'environment'] as const,
      registers: [registry],
    }),
    idempotentReplays: new Counter({
      name: 'invoice_idempotent_replays_total',
      help: 'CreateInvoice calls answered by replaying an earlier response for the same Idempotency-Key',
      registers: [registry],
    }),
    paid: new Counter({
      name: 'invoice_paid_total',
      help: 'Invoices paid (sandbox simulation), by pay currency',
      labelNames: ['pay_currency'] as const,
      registers: [registry],
    }),
    expired: new Counter({
      name: 'invoice_expired_total',
      help: 'Invoices expired by the sweeper',
      registers: [registry],
    }),
    batchSize: new Histogram({
      name: 'invoice_batch_size',
      help: 'Calls per group-committed batch (create, pay: one transaction; get: one statement)',
      labelNames: ['kind'] as const,
      buckets: [1, 2, 4, 8, 16, 32, 64],
      registers: [registry],
    }),
    batchesRetriedAlone: new Counter({
      name: 'invoice_batches_retried_alone_total',
      help: 'Group-committed batches whose transaction failed, each call then retried in a transaction of its own',
      labelNames: ['kind'] as const,
      registers: [registry],
    }),
  };
}
