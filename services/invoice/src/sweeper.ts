/**
 * The expiry sweeper (a Worker of every replica): every INVOICE_SWEEP_INTERVAL_MS it settles open
 * invoices past expired_at with the one status rule (settlement.ts → deriveInvoiceState), a batch
 * per transaction; those the rule says are Expired become Expired with one `invoice.expired` in
 * the same transaction. Batches are taken with FOR UPDATE SKIP LOCKED, so sweepers of several
 * replicas share the work and each invoice is expired exactly once.
 *
 * A live invoice is only settled once its pay_network's watcher has processed blocks past its expiredAt
 * (the cursor's block time): a payment mined before expiry but not yet seen — the watcher is
 * down or behind — must still pay it, not expire it.
 * It also deletes Idempotency-Keys past their 24 h retention, at most once a minute.
 */
import { eventTransaction, PeriodicBatchWorker, type SweeperSettings } from '@coinvoice/runtime';
import type { InvoiceMetrics } from './metrics';
import { settleInvoice } from './settlement';
import { invoiceIdempotencyKeys } from './store/idempotency';
import { lockDueOpenInvoices } from './store/invoices';
import { cursorTimes } from './store/payments';

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

  /** Settles one batch of due invoices now; returns how many it expired. */
  async processBatch(): Promise<number> {
    const expired = await eventTransaction(this.options.sql, async (tx) => {
      // By network: an invoice waits for the cursor of ITS pay_network (docs/networks.md).
      const watchedUntil: Record<string, string> = {};
      for (const [chain, until] of await cursorTimes(tx)) watchedUntil[chain] = until.toISOString();
      let count = 0;
      for (const row of await lockDueOpenInvoices(tx, this.options.batchSize, watchedUntil)) {
        const outcome = await settleInvoice(tx, row.id);
        if (outcome?.invoice.status === 'Expired' && outcome.previousStatus !== 'Expired') count++;
      }
      return count;
    });
    if (expired > 0) {
      this.options.metrics?.expired.inc(expired);
      this.logger.info({ expired }, 'expired invoices past their expiredAt');
    }
    return expired;
  }
}
