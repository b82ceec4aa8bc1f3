/**
 * The code-expiry sweeper (a Worker of every replica): every PAYOUT_SWEEP_INTERVAL_MS it cancels
 * AwaitingVerification payouts whose code has expired (reason code_expired), releasing each hold
 * and writing one payout.cancelled per payout in the same transaction, a batch per transaction.
 * Batches are taken with FOR UPDATE SKIP LOCKED, so sweepers of several replicas share the work,
 * each payout is cancelled exactly once, and a verification holding its payout's lock decides
 * first. So nothing stays stuck in AwaitingVerification. It also deletes Idempotency-Keys past
 * their 24 h retention, at most once a minute.
 */
import type { Logger, Sql, Worker } from '@coinvoice/runtime';
import type { PayoutMetrics } from './metrics';
import { deleteExpiredIdempotencyKeys } from './store/idempotency';
import { lockExpiredAwaiting, type PayoutRow } from './store/payouts';
import { applyTrigger } from './transitions';

export interface CodeExpirySweeperOptions {
  sql: Sql;
  logger: Logger;
  intervalMs: number;
  batchSize: number;
  metrics?: PayoutMetrics;
  /** How often expired idempotency keys are deleted (default 60 s). */
  cleanupIntervalMs?: number;
}

/** Balance rows are locked in one global order, so two sweepers sharing a balance never deadlock. */
function byBalance(a: PayoutRow, b: PayoutRow): number {
  const ka = `${a.project_id}/${a.environment}/${a.currency}`;
  const kb = `${b.project_id}/${b.environment}/${b.currency}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

export class CodeExpirySweeper implements Worker {
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  private lastCleanup = 0;
  private readonly logger: Logger;

  constructor(private readonly options: CodeExpirySweeperOptions) {
    this.logger = options.logger.child({ component: 'code-expiry-sweeper' });
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

  /** Cancels one batch now; returns how many payouts it cancelled. */
  async sweepOnce(): Promise<number> {
    const cancelled = await this.options.sql.begin(async (tx) => {
      const due = (await lockExpiredAwaiting(tx, this.options.batchSize)).sort(byBalance);
      for (const payout of due) await applyTrigger(tx, payout, 'expire_code');
      return due.length;
    });
    if (cancelled > 0) {
      this.options.metrics?.cancelled.inc({ reason: 'code_expired' }, cancelled);
      this.logger.info({ cancelled }, 'cancelled payouts whose verification code expired; holds released');
    }
    return cancelled;
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        // A full batch means more may be due: go on at once.
        let cancelled: number;
        do cancelled = await this.sweepOnce();
        while (this.running && cancelled >= this.options.batchSize);
        await this.cleanupIfDue();
      } catch (err) {
        this.logger.warn({ err }, 'code expiry sweep failed; retrying at the next interval');
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
