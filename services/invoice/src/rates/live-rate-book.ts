/**
 * The live rate cache (docs/architecture.md#rates): each provider is asked in the background every
 * `refreshMs`, on a loop of its own (a hanging provider never delays the other), and the latest
 * answers are combined into one price per currency. Invoice creation only reads what is cached:
 * no request ever waits for a provider.
 */
import type { Logger, Worker } from '@coinvoice/runtime';
import { combineQuotes, type CombinedPrice, type ProviderSnapshot, type QuotedCode, type RateSourceName } from '../domain/live-rates';
import type { Decimal } from '@coinvoice/domain/money';
import type { RateFeed } from './feeds';

export interface LiveRateBookOptions {
  feeds: readonly RateFeed[];
  refreshMs: number;
  maxAgeMs: number;
  logger: Logger;
  /** Injected for tests; defaults to the wall clock. */
  now?: () => Date;
}

/** What GET /api/rates shows per provider. */
export interface ProviderStatus {
  source: RateSourceName;
  /** When its last good answer was asked for (undefined: never). */
  fetchedAt: Date | undefined;
  /** Its USD prices from that answer. */
  prices: ReadonlyMap<QuotedCode, Decimal>;
  /** Why the last attempt failed, if it did. */
  lastError: string | undefined;
}

export class LiveRateBook implements Worker {
  private readonly snapshots = new Map<RateSourceName, ProviderSnapshot>();
  private readonly lastErrors = new Map<RateSourceName, string>();
  /** Last accepted price per currency and when: the reference for outliers while it is fresh. */
  private readonly accepted = new Map<QuotedCode, { usd: Decimal; at: Date }>();
  private combined = new Map<QuotedCode, CombinedPrice>();
  private running = false;
  private readonly loops: Promise<void>[] = [];
  private readonly wakers = new Set<() => void>();
  private stopping = new AbortController();
  private firstRound: Promise<void> = Promise.resolve();
  private readonly logger: Logger;
  private readonly now: () => Date;

  constructor(private readonly options: LiveRateBookOptions) {
    this.logger = options.logger.child({ component: 'rates' });
    this.now = options.now ?? (() => new Date());
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.stopping = new AbortController();
    const firstAnswers: Promise<void>[] = [];
    for (const feed of this.options.feeds) {
      let answered!: () => void;
      firstAnswers.push(new Promise<void>((resolve) => (answered = resolve)));
      this.loops.push(this.refreshLoop(feed, answered));
    }
    this.firstRound = Promise.all(firstAnswers).then(() => undefined);
  }

  /**
   * Resolves once every provider has been asked once (answered, failed or timed out: at most
   * RATES_TIMEOUT_MS). The service awaits it before it serves, so a new replica never refuses
   * live invoices with 503 only because its first quotes are still on the way.
   */
  firstQuotes(): Promise<void> {
    return this.firstRound;
  }

  async stop(): Promise<void> {
    this.running = false;
    this.stopping.abort();
    for (const wake of this.wakers) wake();
    await Promise.all(this.loops.splice(0));
  }

  /**
   * The price of `code` in USD from quotes younger than the max age, or undefined. A cached
   * combination whose oldest quote aged out is recombined from what is still fresh (pure, no I/O).
   */
  price(code: QuotedCode): CombinedPrice | undefined {
    const now = this.now();
    const cached = this.combined.get(code);
    if (cached && now.getTime() - cached.quotedAt.getTime() <= this.options.maxAgeMs) return cached;
    return this.combine(now, false).get(code);
  }

  providers(): ProviderStatus[] {
    return this.options.feeds.map(({ source }) => ({
      source,
      fetchedAt: this.snapshots.get(source)?.fetchedAt,
      prices: this.snapshots.get(source)?.prices ?? new Map(),
      lastError: this.lastErrors.get(source),
    }));
  }

  /** Asks one provider now (the loop's step; tests may call it to refresh deterministically). */
  async refresh(feed: RateFeed): Promise<void> {
    // A quote is as old as the question: its age counts from when it was asked, so a slow answer
    // (or one handled late on a busy process) is never taken for fresher than it is.
    const askedAt = this.now();
    try {
      const answer = await feed.fetchPrices(this.stopping.signal);
      if (answer.problems.length > 0) {
        this.logger.warn({ source: feed.source, problems: answer.problems }, 'rate provider answer has unusable entries; they are ignored');
      }
      if (answer.prices.size === 0) throw new Error(`no usable price in the answer (${answer.problems.slice(0, 3).join('; ')})`);
      this.snapshots.set(feed.source, { source: feed.source, fetchedAt: askedAt, prices: answer.prices });
      this.lastErrors.delete(feed.source);
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.lastErrors.set(feed.source, reason);
      this.logger.warn({ source: feed.source, err: reason }, 'rate provider failed; its last quotes age out after RATES_MAX_AGE_MS');
    }
    this.combine(this.now(), true);
  }

  private combine(now: Date, background: boolean): Map<QuotedCode, CombinedPrice> {
    const previous = new Map<QuotedCode, Decimal>();
    for (const [code, { usd, at }] of this.accepted) {
      if (now.getTime() - at.getTime() <= this.options.maxAgeMs) previous.set(code, usd);
    }
    const { prices, dropped } = combineQuotes([...this.snapshots.values()], { now, maxAgeMs: this.options.maxAgeMs, previous });
    if (background) {
      for (const d of dropped) {
        this.logger.warn(
          { code: d.code, source: d.source, usd: d.usd.toString(), reference: d.reference.toString() },
          `rate outlier dropped: ${d.source} quotes ${d.code} at ${d.usd.toString()} USD, too far from ${d.reference.toString()}`,
        );
      }
      for (const [code, price] of prices) this.accepted.set(code, { usd: price.usd, at: now });
    }
    this.combined = prices;
    return prices;
  }

  private async refreshLoop(feed: RateFeed, answered: () => void): Promise<void> {
    while (this.running) {
      await this.refresh(feed);
      answered();
      if (!this.running) break;
      await new Promise<void>((resolve) => {
        const wake = () => {
          clearTimeout(timer);
          this.wakers.delete(wake);
          resolve();
        };
        const timer = setTimeout(wake, this.options.refreshMs);
        this.wakers.add(wake);
      });
    }
  }
}
