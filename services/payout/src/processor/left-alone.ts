/**
 * What a processor leaves alone for a while (docs/treasury.md#payouts-that-cannot-go-yet): a payout
 * or sweep the signer refused, a sweep that failed; also what it logged lately. A payout left alone
 * is kept out of the round's query, not only skipped in it.
 */
/** Every this many keys left alone, the expired ones are forgotten. */
const PRUNE_EVERY = 1_024;

export class LeftAlone {
  private readonly until = new Map<string, number>();

  leave(key: string, forMs: number, now = Date.now()): void {
    this.until.set(key, now + forMs);
    // Keys asked about no more (a payout sent since) are forgotten once they expire.
    if (this.until.size % PRUNE_EVERY === 0) this.keys('', now);
  }

  isLeft(key: string, now = Date.now()): boolean {
    return (this.until.get(key) ?? 0) > now;
  }

  /** The keys left alone now that start with `prefix`, without it; the expired ones are forgotten. */
  keys(prefix = '', now = Date.now()): string[] {
    const keys: string[] = [];
    for (const [key, until] of this.until) {
      if (until <= now) this.until.delete(key);
      else if (key.startsWith(prefix)) keys.push(key.slice(prefix.length));
    }
    return keys;
  }
}
