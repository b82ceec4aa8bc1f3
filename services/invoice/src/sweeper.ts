/**
 * The expiry sweeper (a Worker of every replica): every INVOICE_SWEEP_INTERVAL_MS it turns Waiting
 * invoices past expired_at into Expired, a batch per transaction, writing one `invoice.expired`
 * per invoice to the outbox in that same transaction. Batches are taken with FOR UPDATE SKIP
 * LOCKED, so sweepers of several replicas share the work and each invoice is expired exactly once.
 * It also deletes Idempotency-Keys past their 24 h retention, at most once a minute.
 */
import { enqueueEvent, type Logger, type Sql, type Worker } from '@coinvoice/runtime';
import { invoiceExpiredEvent } from './events/invoice-events';
import type { InvoiceMetrics } from './metrics';
import { deleteExpiredIdempotencyKeys } from './store/idempotency';
import { expireDueInvoices } from './store/invoices';

export interface ExpirySweeperOptions {
  sql: Sql;
  logger: Logger;
  intervalMs: number;
  batchSize: number;
  metrics?: InvoiceMetrics;
  /** How often expired idempotency keys are deleted (default 60 s). */
  cleanupIntervalMs?: number;
}

export class ExpirySweeper implements Worker {
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private lastCleanup = 0;
  private readonly logger: Logger;

  constructor(private readonly options: ExpirySweeperOptions) {
    this.logger = options.logger.child({ component: 'expiry-sweeper' });
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops after the batch in hand has committed. */
  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wakeUp?.();
    await this.loop;
    this.loop = undefined;
  }

  /** Expires one batch now; returns how many invoices it expired. */
  async sweepOnce(): Promise<number> {
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

  private async run(): Promise<void> {
    while (this.running) {
      try {
        // A full batch means more may be due: go on at once.
        let expired: number;
        do expired = await this.sweepOnce();
        while (this.running && expired >= this.options.batchSize);
        await this.cleanupIfDue();
      } catch (err) {
        this.logger.warn({ err }, 'expiry sweep failed; retrying at the next interval');
      }
      await this.sleep(this.options.intervalMs);
    }
  }

  private async cleanupIfDue(): Promise<void> {
    if (Date.now() - this.lastCleanup < (this.options.cleanupIntervalMs ?? 60_000)) return;
    this.lastCleanup = Date.now();
    const deleted = await deleteExpiredIdempotencyKeys(this.options.sql);
    if (deleted > 0) this.logger.info({ deleted }, 'deleted idempotency keys past their retention');
  }

  private sleep(ms: number): Promise<void> {
    if (!this.running) return Promise.resolve();
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.wakeUp = undefined;
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.wakeUp = done;
    });
  }
}
