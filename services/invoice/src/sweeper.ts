/**
 * The expiry sweeper (a Worker of every replica): every INVOICE_SWEEP_INTERVAL_MS it turns Waiting
 * invoices past expired_at into Expired, a batch per transaction, writing one `invoice.expired`
 * per invoice to the outbox in that same transaction. Batches are taken with FOR UPDATE SKIP
 * LOCKED, so sweepers of several replicas share the work and each invoice is expired exactly once.
 * It also deletes Idempotency-Keys past their 24 h retention, at most once a minute.
 */
import { enqueueEvent, PeriodicBatchWorker, type SweeperSettings } from '@coinvoice/runtime';
import { invoiceExpiredEvent } from './events/invoice-events';
import type { InvoiceMetrics } from './metrics';
import { invoiceIdempotencyKeys } from './store/idempotency';
import { expireDueInvoices } from './store/invoices';

export interface ExpirySweeperOptions extends SweeperSettings {
  metrics?: InvoiceMetrics;
}

export class ExpirySweeper extends PeriodicBatchWorker {
  constructor(private readonly options: ExpirySweeperOptions) {
    super({
      ...options,
      component: 'expiry-sweeper',
      failureMessage: 'expiry sweep failed; retrying at the next interval',
      afterRound: invoiceIdempotencyKeys.expiredKeyCleanup(options.sql, options.cleanupIntervalMs),
    });
  }

  /** Expires one batch now; returns how many invoices it expired. */
  async processBatch(): Promise<number> {
    const expired = await this.options.sql.begin(async (tx) => {
      const rows = await expireDueInvoices(tx, this.options.batchSize);
      for (const row of rows) await enqueueEvent(tx, invoiceExpiredEvent(row));
      return rows.length;
    });
    if (expired > 0) {
      this.options.metrics?.expired.inc(expired);
      this.logger.info({ expired }, 'expired invoices past their expiredAt');
    }
    return expired;
  }
}
