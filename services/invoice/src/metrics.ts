/** Business metrics of the invoice service, next to the runtime's RPC metrics on /metrics. */
import { Counter, type Registry } from 'prom-client';

export interface InvoiceMetrics {
  created: Counter<'pay_currency' | 'environment'>;
  idempotentReplays: Counter;
  paid: Counter<'pay_currency'>;
  expired: Counter;
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
  };
}
