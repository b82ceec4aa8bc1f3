/**
 * The watched addresses, kept in memory and refreshed incrementally, so that what a block costs
 * the watcher depends on the block, not on how many invoices are open (docs/watcher.md).
 *
 * An address becomes watched only when its live invoice is created, and leaves only by time (its
 * monitoring window after expiry or payment ends). So between full reloads it is enough to add the
 * invoices created since the newest one already held: a query over a few recent rows, not over
 * every open invoice. The watermark steps back by `overlapMs` because an invoice's `created_at` is
 * its transaction's start: a transaction that began earlier but committed later is still found.
 * A full reload every `fullReloadMs` drops the addresses whose window ended (until then one is
 * watched a little longer: harmless, an address is never reused).
 */
import type { Sql } from '@coinvoice/runtime';
import type { Chain, CryptoCode } from '@coinvoice/chains/coin';
import { watchedInvoices, watchedInvoicesCreatedSince, type WatchedInvoice } from '../store/payments';
import type { WatchedAddresses } from '@coinvoice/chains/chain-adapter';

export interface WatchedSetOptions {
  sql: Sql;
  /**
   * The pay networks whose invoices' addresses are watched: the watcher's own network, or every
   * EVM network for an EVM watcher (one address exists on all of them: a payment on another network
   * than the invoice's is recorded as a wrong-network payment, docs/networks.md#wrong-network).
   * Every asset of those invoices is watched: what the block brings decides what is recorded.
   */
  networks: readonly Chain[];
  /** How long after expiry (or payment) an address is still watched. */
  monitorAfterMs: number;
  /** How often the whole set is read again (drops addresses whose window ended). */
  fullReloadMs: number;
  /** How far behind the newest held invoice the incremental read starts. */
  overlapMs: number;
  now?: () => number;
}

/** One watched address: as issued, its invoice, the asset and network it is paid in. */
export interface WatchedEntry {
  address: string;
  invoiceId: string;
  asset: CryptoCode;
  payNetwork: Chain;
}

export class WatchedSet implements WatchedAddresses {
  /** By lower-cased address (hex chains compare case-insensitively): one small entry per address. */
  private readonly byLower = new Map<string, WatchedEntry>();
  private newestCreatedAt: Date | undefined;
  private loadedAt = Number.NEGATIVE_INFINITY;
  private list: string[] | undefined;
  /** Where the next reconciliation slice starts (round robin over the set). */
  private reconcileFrom = 0;

  constructor(private readonly options: WatchedSetOptions) {}

  /** Brings the set up to date: a full read when due (or never done), else only new invoices. */
  async refresh(): Promise<void> {
    const now = (this.options.now ?? Date.now)();
    if (this.newestCreatedAt === undefined || now - this.loadedAt >= this.options.fullReloadMs) {
      const rows = await watchedInvoices(this.options.sql, this.options.networks, this.options.monitorAfterMs);
      this.byLower.clear();
      this.list = undefined;
      for (const row of rows) this.add(row);
      this.loadedAt = now;
      return;
    }
    const since = new Date(this.newestCreatedAt.getTime() - this.options.overlapMs);
    for (const row of await watchedInvoicesCreatedSince(this.options.sql, this.options.networks, since)) this.add(row);
  }

  private add(row: WatchedInvoice): void {
    if (this.newestCreatedAt === undefined || row.created_at > this.newestCreatedAt) this.newestCreatedAt = row.created_at;
    const key = row.address.toLowerCase();
    if (this.byLower.has(key)) return;
    this.byLower.set(key, { address: row.address, invoiceId: row.id, asset: row.pay_currency, payNetwork: row.pay_network });
    this.list = undefined;
  }

  get size(): number {
    return this.byLower.size;
  }

  get all(): readonly string[] {
    this.list ??= Array.from(this.byLower.values(), (entry) => entry.address);
    return this.list;
  }

  lookup(address: string): string | undefined {
    return this.byLower.get(address.toLowerCase())?.address;
  }

  /** The invoice a watched address belongs to. */
  invoiceOf(address: string): string | undefined {
    return this.byLower.get(address.toLowerCase())?.invoiceId;
  }

  /**
   * The next `count` watched invoices in round-robin order: reconciliation checks a bounded slice
   * per confirmed height, so every address is checked once every size/count heights.
   */
  nextSlice(count: number): WatchedEntry[] {
    const all = this.all;
    const entry = (address: string) => this.byLower.get(address.toLowerCase())!;
    if (all.length <= count) return all.map(entry);
    if (this.reconcileFrom >= all.length) this.reconcileFrom = 0;
    const slice = all.slice(this.reconcileFrom, this.reconcileFrom + count);
    if (slice.length < count) slice.push(...all.slice(0, count - slice.length));
    this.reconcileFrom = (this.reconcileFrom + count) % all.length;
    return slice.map(entry);
  }
}
