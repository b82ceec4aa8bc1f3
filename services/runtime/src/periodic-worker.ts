/**
 * A Worker that processes due rows in batches, every `intervalMs`: a full batch means more may be
 * due, so the next follows at once; a failed round is logged and retried at the next interval.
 * Subclasses say what one batch is (`processBatch`, one transaction); stopping waits for the batch
 * in hand to commit.
 */
import type { Sql } from './db';
import type { Logger } from './log';
import type { Worker } from './worker';

/** What a service's sweeper (a PeriodicBatchWorker over its tables) is built from. */
export interface SweeperSettings {
  sql: Sql;
  logger: Logger;
  intervalMs: number;
  batchSize: number;
  /** How often expired idempotency keys are deleted (default 60 s). */
  cleanupIntervalMs?: number;
}

export interface PeriodicBatchWorkerOptions {
  logger: Logger;
  /** Names the worker in its log lines. */
  component: string;
  intervalMs: number;
  batchSize: number;
  /** Logged with the error when a round fails. */
  failureMessage: string;
  /** Light work after each round's batches (e.g. deleting expired idempotency keys); its failure fails the round. */
  afterRound?: (logger: Logger) => Promise<void>;
}

export abstract class PeriodicBatchWorker implements Worker {
  private running = false;
  private loop: Promise<void> | undefined;
  private wakeUp: (() => void) | undefined;
  protected readonly logger: Logger;

  constructor(private readonly schedule: PeriodicBatchWorkerOptions) {
    this.logger = schedule.logger.child({ component: schedule.component });
  }

  /** Processes one batch now; returns how many rows it handled. */
  abstract processBatch(): Promise<number>;

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

  private async run(): Promise<void> {
    while (this.running) {
      try {
        let handled: number;
        do handled = await this.processBatch();
        while (this.running && handled >= this.schedule.batchSize);
        await this.schedule.afterRound?.(this.logger);
      } catch (err) {
        this.logger.warn({ err }, this.schedule.failureMessage);
      }
      await this.sleep(this.schedule.intervalMs);
    }
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

/** A retention job: every `intervalMs`, `prune(batchSize)` deletes up to that many expired rows and says how many. */
export class RetentionJob extends PeriodicBatchWorker {
  constructor(private readonly job: { logger: Logger; component: string; intervalMs: number; batchSize: number; prune: (limit: number) => Promise<number> }) {
    super({ ...job, failureMessage: `${job.component}: round failed; retried at the next interval` });
  }

  async processBatch(): Promise<number> {
    const deleted = await this.job.prune(this.job.batchSize);
    if (deleted > 0) this.logger.info({ deleted }, `${this.job.component}: pruned`);
    return deleted;
  }
}
