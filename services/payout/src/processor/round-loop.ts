/**
 * What every network's processor shares (docs/treasury.md#processor): one active per network (a
 * session-level advisory lock held on a reserved connection; the others stand by and retry every
 * poll; when the active one dies its connection closes and a standby takes over from what the
 * tables say), a round every poll interval, a failed round logged at the start of a streak and
 * then every 30 s, and the `payout_processor_active` gauge. The EVM and UTXO processors supply
 * the round.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { Code, ConnectError } from '@connectrpc/connect';
import { AdvisoryLockHolder, type Logger, type Sql, type Worker } from '@coinvoice/runtime';
import { processorClaimId } from '../domain/status';
import { claimablePayouts } from './claimable';
import { storedTreasury, type TreasuryAnswer } from './store';
import type { ProcessorMetrics } from './metrics';

export interface RoundLoopOptions {
  network: string;
  sql: Sql;
  logger: Logger;
  metrics: ProcessorMetrics;
  pollMs: number;
}

/** A failure streak: logged at its first failure, then once every `everyMs`. */
export class FailureStreak {
  private count = 0;
  private loggedAt = 0;

  constructor(private readonly everyMs = 30_000) {}

  /** Counts a failure; true when it should be logged now. */
  failed(): boolean {
    this.count++;
    const now = Date.now();
    if (this.count === 1 || now - this.loggedAt >= this.everyMs) {
      this.loggedAt = now;
      return true;
    }
    return false;
  }

  get failures(): number {
    return this.count;
  }

  /** Ends the streak; answers how many failures it had (0: there was none). */
  recovered(): number {
    const count = this.count;
    this.count = 0;
    this.loggedAt = 0;
    return count;
  }
}

/** The signer did not answer (down, or past the deadline): no item can be signed this round. */
export function signerUnreachable(err: unknown): boolean {
  return err instanceof ConnectError && (err.code === Code.Unavailable || err.code === Code.DeadlineExceeded);
}

/** The steps of a round whose items fail alone (payout_processor_item_errors_total's `step`). */
export type ItemStep = 'record' | 'replace' | 'sweep' | 'sign' | 'broadcast';

const ITEM_FAILURE_LOG_MS = 5 * 60_000;

export abstract class RoundLoop implements Worker {
  protected running = false;
  private loop: Promise<void> | undefined;
  private wake: AbortController | undefined;
  /** One active processor per network (the runtime's advisory lock). */
  private readonly lock: AdvisoryLockHolder;
  protected readonly logger: Logger;
  private readonly roundFailures = new FailureStreak();

  constructor(private readonly loopOptions: RoundLoopOptions) {
    this.logger = loopOptions.logger.child({ component: 'processor', network: loopOptions.network });
    this.lock = new AdvisoryLockHolder(loopOptions.sql, `coinvoice-payout-processor:${loopOptions.network}`);
    loopOptions.metrics.active.set({ network: loopOptions.network }, 0);
  }

  /** One round of the network's work, run while this replica holds the lock. */
  abstract round(): Promise<void>;

  /** Whether `err` says the node (or the signer) is unreachable: then every item would fail alike. */
  protected abstract isTransportFailure(err: unknown): boolean;

  /** The processor's PAYOUT_AUTO_MAX_<ASSET> by asset: which payouts it may send by itself (claimable.ts). */
  protected abstract autoMaxima(): Readonly<Record<string, string>>;

  /** When each failing item was last logged (ITEM_FAILURE_LOG_MS). */
  private readonly itemFailureLoggedAt = new Map<string, number>();

  /**
   * A failure contained to one item (a nonce group, a sweep group, a UTXO batch): counted, logged at
   * its first failure and then every ITEM_FAILURE_LOG_MS, and the round goes on with the others. An
   * unreachable node or signer still fails the round (rethrown).
   */
  protected itemFailed(step: ItemStep, key: string, err: unknown, context: Record<string, unknown>): void {
    if (this.isTransportFailure(err)) throw err;
    this.loopOptions.metrics.itemErrors.inc({ network: this.loopOptions.network, step });
    const now = Date.now();
    const loggedAt = this.itemFailureLoggedAt.get(key);
    if (loggedAt === undefined || now - loggedAt >= ITEM_FAILURE_LOG_MS) {
      this.itemFailureLoggedAt.set(key, now);
      this.logger.error({ ...context, step, err: describe(err) }, `processor ${step} step failed for one item; it is left for later and the round goes on (operator attention needed)`);
    }
  }

  private treasuryFallbackLoggedAt = 0;

  /**
   * The signer's treasury answer; while the signer cannot be reached, the answer it gave before
   * (treasury_networks), so that a processor started then still follows its transactions in
   * flight to their end: nothing new can be signed anyway (docs/treasury.md#processor).
   * `fromSigner` false: the caller asks again next round.
   */
  protected async treasuryAnswer(ask: () => Promise<TreasuryAnswer>): Promise<TreasuryAnswer & { fromSigner: boolean }> {
    try {
      return { ...(await ask()), fromSigner: true };
    } catch (err) {
      if (!signerUnreachable(err)) throw err;
      const stored = await storedTreasury(this.loopOptions.sql, this.loopOptions.network);
      if (!stored) throw err;
      const now = Date.now();
      if (now - this.treasuryFallbackLoggedAt >= ITEM_FAILURE_LOG_MS) {
        this.treasuryFallbackLoggedAt = now;
        this.logger.warn({ treasury: stored.address, err: describe(err) }, 'the signer cannot be reached: transactions in flight are followed with the treasury it answered before; nothing is signed until it answers');
      }
      return { ...stored, fromSigner: false };
    }
  }

  /** How it names itself in payouts.claimed_by: operators may not finish such a payout (domain/status.ts). */
  get processorId(): string {
    return processorClaimId(this.loopOptions.network);
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    if (!this.running) return;
    this.running = false;
    this.wake?.abort();
    await this.loop;
    await this.releaseLock();
  }

  private async pause(ms: number): Promise<void> {
    if (!this.running) return;
    this.wake = new AbortController();
    await sleep(ms, undefined, { signal: this.wake.signal }).catch(() => undefined);
  }

  private async run(): Promise<void> {
    while (this.running) {
      if (await this.holdLock()) {
        try {
          await this.round();
          this.loopOptions.metrics.lastRoundSucceeded.set({ network: this.loopOptions.network }, Date.now() / 1_000);
          await this.updateClaimableGauge();
          const failedRounds = this.roundFailures.recovered();
          if (failedRounds > 0) this.logger.info({ failedRounds }, 'processor recovered');
        } catch (err) {
          this.loopOptions.metrics.roundErrors.inc({ network: this.loopOptions.network });
          if (this.roundFailures.failed()) {
            this.logger.warn({ err: describe(err), failedRounds: this.roundFailures.failures }, 'processor round failed; retried after the poll interval');
          }
        }
      }
      await this.pause(this.loopOptions.pollMs);
    }
  }

  /**
   * payouts_claimable_oldest_seconds: what a round left claimable, oldest first — a payout the
   * treasury cannot cover waits there, logged but otherwise silent (CoinvoicePayoutsWaitingForTreasury).
   * Not worth failing a round for: a failed read leaves the gauge as it was.
   */
  private async updateClaimableGauge(): Promise<void> {
    const { sql, network, metrics } = this.loopOptions;
    try {
      const [row] = await sql<{ oldest: number }[]>`
        select coalesce(extract(epoch from now() - min(greatest(p.verified_at, coalesce(p.approved_at, p.verified_at)))), 0)::float8 as oldest
        from payouts p where ${claimablePayouts(sql, network, this.autoMaxima())}`;
      metrics.claimableOldestSeconds.set({ network }, row?.oldest ?? 0);
    } catch (err) {
      this.logger.debug({ err: describe(err) }, 'could not read the claimable payouts for their gauge');
    }
  }

  /** Takes or re-checks the network's advisory lock; false while another replica holds it. */
  private async holdLock(): Promise<boolean> {
    const { network, metrics } = this.loopOptions;
    try {
      const state = await this.lock.hold();
      if (state === 'busy') return false;
      if (state === 'taken') {
        metrics.active.set({ network }, 1);
        // Counted from here: a replica whose first rounds fail is as alerted as one that stopped succeeding.
        metrics.lastRoundSucceeded.set({ network }, Date.now() / 1_000);
        this.logger.info('active processor for the network (advisory lock taken)');
      }
      return true;
    } catch (err) {
      this.logger.warn({ err: describe(err) }, 'processor lock connection failed; standing by');
      await this.releaseLock();
      return false;
    }
  }

  private async releaseLock(): Promise<void> {
    this.loopOptions.metrics.active.set({ network: this.loopOptions.network }, 0);
    await this.lock.release();
  }
}

/** An error for a log line: its message and name, never a request or response body. */
export function describe(err: unknown): { name: string; message: string } {
  return err instanceof Error ? { name: err.name, message: err.message } : { name: 'Error', message: String(err) };
}

/** The signer refused a request: thrown out of the transaction that asked, to roll it back. */
export class SignerRefused extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'SignerRefused';
  }
}

/**
 * The transaction's result, or undefined when it rolled back because the signer refused; then
 * `onRefused` is told the refusal (after the rollback: it may write rows the transaction locked).
 */
export async function refusable<T>(transaction: Promise<T>, onRefused?: (refusal: string) => Promise<void>): Promise<T | undefined> {
  try {
    return await transaction;
  } catch (err) {
    if (!(err instanceof SignerRefused)) throw err;
    await onRefused?.(err.message);
    return undefined;
  }
}
