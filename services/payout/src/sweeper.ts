/**
 * The code-expiry sweeper (a Worker of every replica): every PAYOUT_SWEEP_INTERVAL_MS it cancels
 * AwaitingVerification payouts whose code has expired (reason code_expired), releasing each hold
 * and writing one payout.cancelled per payout in the same transaction, a batch per transaction.
 * Batches are taken with FOR UPDATE SKIP LOCKED, so sweepers of several replicas share the work,
 * each payout is cancelled exactly once, and a verification holding its payout's lock decides
 * first. So nothing stays stuck in AwaitingVerification. It also deletes Idempotency-Keys past
 * their 24 h retention, at most once a minute.
 */
import { eventTransaction, PeriodicBatchWorker, type SweeperSettings } from '@coinvoice/runtime';
import type { PayoutMetrics } from './metrics';
import { payoutIdempotencyKeys } from './store/idempotency';
import { lockExpiredAwaiting, type PayoutRow } from './store/payouts';
import { applyTrigger } from './transitions';

export interface CodeExpirySweeperOptions extends SweeperSettings {
  metrics?: PayoutMetrics;
}

/** Balance rows are locked in one global order, so two sweepers sharing a balance never deadlock. */
function byBalance(a: PayoutRow, b: PayoutRow): number {
  const ka = `${a.project_id}/${a.environment}/${a.currency}`;
  const kb = `${b.project_id}/${b.environment}/${b.currency}`;
  return ka < kb ? -1 : ka > kb ? 1 : 0;
}

export class CodeExpirySweeper extends PeriodicBatchWorker {
  constructor(private readonly options: CodeExpirySweeperOptions) {
    super({
      ...options,
      component: 'code-expiry-sweeper',
      failureMessage: 'code expiry sweep failed; retrying at the next interval',
      afterRound: payoutIdempotencyKeys.expiredKeyCleanup(options.sql, options.cleanupIntervalMs),
    });
  }

  /** Cancels one batch now; returns how many payouts it cancelled. */
  async processBatch(): Promise<number> {
    const cancelled = await eventTransaction(this.options.sql, async (tx) => {
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
}
