/**
 * The chain watcher (the `watch <chain>` role): follows one chain through its adapter and turns
 * what it reads into payment rows and settled invoices.
 *
 * - One active watcher per chain: a session-level Postgres advisory lock held on a reserved
 *   connection. The others stand by and try again every `standbyRetryMs`; when the active one
 *   dies its connection closes, the lock is free, and a standby takes over from the cursor.
 * - Every `pollMs`: check that the cursor block is still canonical (else a reorg: find the fork
 *   point among the stored recent blocks, orphan the payments above it, rewind), then process
 *   blocks cursor+1 … head in batches. Each batch is ONE transaction: its payments, its blocks,
 *   the cursor, confirmations, and the settlement of every invoice touched — so a watcher killed
 *   mid-scan leaves either the whole batch or nothing, and the next one resumes from the cursor
 *   (a block scanned twice updates the same payment rows: never counted twice).
 * - A node error (down, timeout, null block, malformed answer) is logged and counted and the tick
 *   is retried after `pollMs`; nothing is written for a tick that failed.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { AdvisoryLockHolder, eventTransaction, type Logger, type Sql, type Worker } from '@coinvoice/runtime';

import { settleInvoice } from '../settlement';
import {
  deleteBlocksAbove,
  loadCursor,
  orphanPaymentsAbove,
  recordedTotals,
  recentBlocks,
  refreshConfirmations,
  saveBlocks,
  saveCursor,
  upsertPayment,
} from '../store/payments';
import { ChainSourceError, type BlockRef, type ChainAdapter, type ObservedTransfer } from '@coinvoice/chains/chain-adapter';
import type { Chain, CryptoCode } from '@coinvoice/chains/coin';
import { Decimal } from '@coinvoice/domain/money';
import { followMempool } from './mempool';
import { deleteMovementsAbove, netMovements, recordMovement } from './house';
import type { WatcherMetrics } from './metrics';
import { WatchedSet } from './watched-set';

export interface ChainWatcherOptions {
  sql: Sql;
  adapter: ChainAdapter;
  /**
   * Whose invoices' addresses are watched: the pay networks sharing this chain's addresses — every
   * EVM network for an EVM chain (docs/networks.md#wrong-network), else the chain alone.
   */
  watchedNetworks: readonly Chain[];
  /**
   * This chain's confirmation count: what a wrong-network payment arriving here needs (an
   * invoice's own payments need its confirmationsRequired, fixed at creation).
   */
  confirmations: number;
  logger: Logger;
  metrics: WatcherMetrics;
  pollMs: number;
  /** Blocks per transaction while backfilling. */
  batchBlocks: number;
  /** Payments deeper than this are `final` and no longer followed through reorgs. */
  finalityDepth: number;
  /** How long after expiry (or payment) an address is still watched. */
  monitorAfterExpiryMs: number;
  standbyRetryMs?: number;
  /** Reconcile balances at the head minus this many blocks plus one (the confirmation count). */
  reconcileDepth: number;
  /**
   * Addresses whose balances are reconciled per confirmed height (round robin over the watched
   * set): a block's cost stays bounded however many invoices are open.
   */
  reconcilePerBlock: number;
  /** How often the watched set is read whole (else only new invoices are added). */
  watchedFullReloadMs: number;
  /**
   * The house's own addresses on this chain (the treasury's, lower case): what they send to an
   * invoice's address is the treasury at work — the gas for a token sweep — never a customer's
   * payment (docs/treasury.md#sweep-tasks).
   */
  houseSenders?: ReadonlySet<string>;
}

/** The incremental read steps back this far behind the newest invoice held (late commits). */
const WATCHED_OVERLAP_MS = 120_000;

/** Output index of a payment found by balance reconciliation (no transaction or log of its own). */
const RECONCILED_INDEX = -2;
/** How far back reconciliation looks for the block a missed transfer arrived in (about 9 days of Ethereum blocks). */
const MAX_ARRIVAL_SEARCH = 65_536;

export class ChainWatcher implements Worker {
  private running = false;
  private loop: Promise<void> | undefined;
  private readonly logger: Logger;
  /** One active watcher per chain (the runtime's advisory lock). */
  private readonly lock: AdvisoryLockHolder;
  private wake: AbortController | undefined;
  private failures = { count: 0, since: 0, loggedAt: 0 };
  /** The last height reconciled by this replica (a new active watcher starts from the head). */
  private reconciledHeight = -1;
  private readonly watched: WatchedSet;

  constructor(private readonly options: ChainWatcherOptions) {
    this.logger = options.logger.child({ component: 'watcher', chain: options.adapter.chain });
    this.lock = new AdvisoryLockHolder(options.sql, `coinvoice-watcher:${options.adapter.chain}`);
    this.watched = new WatchedSet({
      sql: options.sql,
      networks: options.watchedNetworks,
      monitorAfterMs: options.monitorAfterExpiryMs,
      fullReloadMs: options.watchedFullReloadMs,
      overlapMs: WATCHED_OVERLAP_MS,
    });
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
      if (!(await this.holdLock())) {
        await this.pause(this.options.standbyRetryMs ?? 2_000);
        continue;
      }
      try {
        await this.tick();
        if (this.failures.count > 0) {
          this.logger.info({ failedRounds: this.failures.count, sinceMs: Date.now() - this.failures.since }, 'watcher recovered: the node answers again');
          this.failures = { count: 0, since: 0, loggedAt: 0 };
        }
      } catch (err) {
        const kind = errorKind(err);
        this.options.metrics.sourceErrors.inc({ chain: this.options.adapter.chain, kind });
        const now = Date.now();
        if (this.failures.count === 0) this.failures.since = now;
        this.failures.count++;
        // The first failure of a streak, then one line every 30 s: an outage is visible, not a flood.
        if (this.failures.count === 1 || now - this.failures.loggedAt >= 30_000) {
          this.failures.loggedAt = now;
          this.logger.warn({ err, kind, failedRounds: this.failures.count }, 'watcher tick failed; nothing was written for it, retrying after the poll interval');
        }
      }
      await this.pause(this.options.pollMs);
    }
  }

  /** Takes or re-checks the chain's advisory lock; false while another replica holds it. */
  private async holdLock(): Promise<boolean> {
    const chain = this.options.adapter.chain;
    try {
      const state = await this.lock.hold();
      if (state === 'busy') return false;
      if (state === 'taken') {
        this.options.metrics.active.set({ chain }, 1);
        this.logger.info('active watcher for the chain (advisory lock taken)');
      }
      return true;
    } catch (err) {
      this.logger.warn({ err }, 'watcher lock connection failed; standing by');
      await this.releaseLock();
      return false;
    }
  }

  private async releaseLock(): Promise<void> {
    this.options.metrics.active.set({ chain: this.options.adapter.chain }, 0);
    await this.lock.release();
  }

  /** One round: reorg check, then every block up to the head, then confirmations. */
  async tick(): Promise<void> {
    const { adapter, metrics } = this.options;
    const chain = adapter.chain;
    const head = await adapter.head();
    let cursor = await loadCursor(this.options.sql, chain);
    if (!cursor) {
      // First start: from the current head (payments before it were never ours to watch).
      const start = (await adapter.blockAt(Math.max(head.height - 1, 0))) ?? head;
      await this.options.sql.begin((tx) => saveCursor(tx, chain, start));
      cursor = { height: start.height, hash: start.hash };
    }
    if (head.height < cursor.height) {
      // The chain is shorter than where we are: our blocks above its head left it.
      cursor = await this.rewind(cursor.height, head);
    } else {
      const atCursor = await this.canonicalAt(cursor.height, head);
      if (atCursor.hash !== cursor.hash) cursor = await this.rewind(cursor.height, head);
    }
    metrics.headLag.set({ chain }, Math.max(head.height - cursor.height, 0));

    let { height, hash } = cursor;
    while (this.running && height < head.height) {
      const addresses = this.watched;
      const blocks: BlockRef[] = [];
      const transfers: ObservedTransfer[] = [];
      const house: ObservedTransfer[] = [];
      // The batch's blocks are fetched and scanned concurrently (the transport batches the calls);
      // only the prefix that links up hash by hash from the cursor is taken.
      const last = Math.min(head.height, height + this.options.batchBlocks);
      const fetched = await Promise.all(Array.from({ length: last - height }, (_, i) => this.canonicalAt(height + 1 + i, head)));
      let parentHash = hash;
      for (const block of fetched) {
        if (block.parentHash !== parentHash) break; // a reorg under us: rewound below when nothing extends the cursor
        blocks.push(block);
        parentHash = block.hash;
      }
      // The set is brought up to date AFTER the blocks were read: an invoice whose payment is in
      // one of them was committed before the payment existed, so before the block was read.
      await this.watched.refresh();
      for (const found of await Promise.all(blocks.map((block) => adapter.scanBlock(block, addresses)))) {
        for (const transfer of found) (this.fromHouse(transfer) ? house : transfers).push(transfer);
      }
      const outflows = adapter.outflowsOf ? (await Promise.all(blocks.map((block) => adapter.outflowsOf!(block, addresses)))).flat() : [];
      if (blocks.length === 0) {
        // The next block does not extend our cursor: a reorg; rewind and carry on.
        const rewound = await this.rewind(height, head);
        ({ height, hash } = rewound);
        continue;
      }
      const top = blocks[blocks.length - 1]!;
      const settled = await eventTransaction(this.options.sql, async (tx) => {
        const touched = new Set<string>();
        for (const transfer of transfers) {
          const invoiceId = addresses.invoiceOf(transfer.address);
          if (!invoiceId) continue; // an address we never issued (or no longer watch)
          await upsertPayment(tx, chain, invoiceId, transfer);
          touched.add(invoiceId);
        }
        // Kept so reconciliation subtracts it: the house's money is never a merchant's.
        for (const transfer of house) await recordMovement(tx, 'house_transfers', chain, transfer);
        // Kept so reconciliation adds it back: a sweep must not hide a later payment.
        for (const outflow of outflows) await recordMovement(tx, 'address_outflows', chain, outflow);
        await saveBlocks(tx, chain, blocks, this.options.finalityDepth + 16);
        await saveCursor(tx, chain, top);
        for (const row of await refreshConfirmations(tx, chain, head.height, this.options.finalityDepth, this.options.confirmations)) touched.add(row.invoice_id);
        const outcomes = [];
        for (const invoiceId of touched) outcomes.push(await settleInvoice(tx, invoiceId));
        return outcomes;
      });
      metrics.blocks.inc({ chain }, blocks.length);
      this.countSettlements(settled);
      height = top.height;
      hash = top.hash;
      metrics.headLag.set({ chain }, Math.max(head.height - height, 0));
    }

    // UTXO chains: unmined payments (0 confirmations) and replaced ones.
    if (this.running && adapter.pendingTransfers) {
      await this.watched.refresh();
      this.countSettlements(await followMempool({ sql: this.options.sql, adapter, addresses: this.watched, logger: this.logger }));
    }

    const missed = await this.reconcile(head);

    // Confirmations grow with the head even when no block of ours changed.
    const settled = await eventTransaction(this.options.sql, async (tx) => {
      const touched = new Set<string>();
      for (const { invoiceId, transfer } of missed) {
        await upsertPayment(tx, chain, invoiceId, transfer);
        touched.add(invoiceId);
      }
      for (const row of await refreshConfirmations(tx, chain, head.height, this.options.finalityDepth, this.options.confirmations)) touched.add(row.invoice_id);
      const outcomes = [];
      for (const invoiceId of touched) outcomes.push(await settleInvoice(tx, invoiceId));
      return outcomes;
    });
    this.countSettlements(settled);
  }

  /**
   * Reconciliation at each newly confirmed height: a slice of the watched addresses (round robin,
   * `reconcilePerBlock` of them) has its on-chain balance of its invoice's asset compared with the
   * payments recorded up to that height plus what the house sent it up to that height (the sweep
   * gas the block scan saw from a treasury, house.ts: never a payment) minus what left it (a
   * sweep, also house.ts). A balance above them is
   * money the block scan missed (an internal ETH transfer from a contract wallet, a node that
   * returned incomplete logs): recorded as a payment in the reconciled block, so it confirms,
   * counts and reorgs like any other. (A balance below them is not a payment.) The reconciled
   * block is at most a poll's worth of blocks after the transfer, which only matters for a transfer in the very last blocks before expiredAt. With
   * more watched addresses than the slice, each is checked every size/slice heights.
   */
  private async reconcile(head: BlockRef): Promise<Array<{ invoiceId: string; transfer: ObservedTransfer }>> {
    const { adapter, metrics } = this.options;
    const height = head.height - this.options.reconcileDepth + 1;
    if (height <= this.reconciledHeight || height < 0) return [];
    const block = await this.canonicalAt(height, head);
    await this.watched.refresh();
    const watched = this.watched.nextSlice(this.options.reconcilePerBlock);
    const missed: Array<{ invoiceId: string; transfer: ObservedTransfer }> = [];
    for (const asset of adapter.assets) {
      const mine = watched.filter((w) => w.asset === asset);
      if (mine.length === 0) continue;
      const balances = await adapter.balancesAt(asset, mine.map((w) => w.address), block);
      const expected = await this.expectedBalances(asset, mine, height);
      for (const invoice of mine) {
        const onChain = balances.get(invoice.address);
        if (!onChain) continue;
        const gap = onChain.minus(expected.get(invoice.invoiceId)!);
        if (gap.lte(0)) continue;
        metrics.reconciliationMismatches.inc({ chain: adapter.chain, asset });
        const arrived = await this.arrivedAt(invoice, asset, gap, block, head);
        this.logger.warn(
          { invoiceId: invoice.invoiceId, asset, height, arrivedAt: arrived.height, missing: gap.toFixed() },
          'reconciliation: the address holds more than its recorded payments; recording the difference in the block it arrived in',
        );
        missed.push({
          invoiceId: invoice.invoiceId,
          transfer: { transactionHash: `reconciled:${arrived.hash}:${invoice.address}`, outputIndex: RECONCILED_INDEX, address: invoice.address, asset, amount: gap, block: arrived },
        });
      }
    }
    this.reconciledHeight = height;
    return missed;
  }

  /**
   * The earliest block in which `gap` was already on the address (docs/watcher.md#reconciled-payments):
   * its balance read at earlier heights, going back by doubling steps, then halving between the last
   * height without it and the first with it. A missed transfer is then dated by the block that
   * carried it, not by when reconciliation looked: after a watcher outage, or with more addresses
   * than a height's slice, that was past expiredAt, and an invoice paid in time was expired (an
   * outside review). Goes back at most MAX_ARRIVAL_SEARCH blocks, and stops where the node keeps
   * no state (the latest height known to hold it is used).
   */
  private async arrivedAt(invoice: { invoiceId: string; address: string }, asset: CryptoCode, gap: Decimal, found: BlockRef, head: BlockRef): Promise<BlockRef> {
    const { adapter, sql } = this.options;
    const holds = async (height: number): Promise<boolean> => {
      const block = await this.canonicalAt(height, head);
      const onChain = (await adapter.balancesAt(asset, [invoice.address], block)).get(invoice.address);
      if (!onChain) return false;
      return onChain.minus((await this.expectedBalances(asset, [invoice], height)).get(invoice.invoiceId)!).gte(gap);
    };
    const tryHolds = (height: number) => holds(height).catch(() => undefined);
    let held = found.height;
    let without: number | undefined;
    for (let step = 1; step <= MAX_ARRIVAL_SEARCH && without === undefined; step *= 2) {
      const height = found.height - step;
      const answer = height < 0 ? false : await tryHolds(height);
      if (answer === undefined) break;
      if (answer) held = height;
      else without = Math.max(height, -1);
    }
    if (without !== undefined) {
      while (held - without > 1) {
        const middle = Math.floor((held + without) / 2);
        const answer = await tryHolds(middle);
        if (answer === undefined) break;
        if (answer) held = middle;
        else without = middle;
      }
    }
    return held === found.height ? found : this.canonicalAt(held, head);
  }

  /**
   * Per invoice: the balance its address should hold of `asset` at `height` by what the scan saw —
   * its recorded payments, plus what the house sent it (sweep gas), minus what left it (sweeps,
   * docs/watcher.md#what-left-an-address). Above it is a payment the scan missed.
   */
  private async expectedBalances(asset: CryptoCode, invoices: ReadonlyArray<{ invoiceId: string; address: string }>, height: number): Promise<Map<string, Decimal>> {
    const { adapter, sql } = this.options;
    const addresses = invoices.map((w) => w.address);
    const recorded = await recordedTotals(sql, adapter.chain, asset, invoices.map((w) => w.invoiceId), height);
    const moved = await netMovements(sql, adapter.chain, asset, addresses, height);
    return new Map(invoices.map((w) => [w.invoiceId, new Decimal(recorded.get(w.invoiceId) ?? 0).plus(moved.get(w.address.toLowerCase()) ?? 0)]));
  }

  /** A transfer the treasury sent (a sweep's gas): not a payment; logged once, at debug. */
  private fromHouse(transfer: ObservedTransfer): boolean {
    const house = transfer.sender !== undefined && (this.options.houseSenders?.has(transfer.sender) ?? false);
    if (house) this.logger.debug({ transactionHash: transfer.transactionHash, address: transfer.address, asset: transfer.asset }, 'a transfer from the treasury (sweep gas): not a payment');
    return house;
  }

  private countSettlements(outcomes: readonly (Awaited<ReturnType<typeof settleInvoice>>)[]): void {
    for (const outcome of outcomes) {
      if (!outcome) continue;
      for (const event of outcome.events) this.options.metrics.events.inc({ chain: this.options.adapter.chain, event });
      if (outcome.events.length > 0) {
        this.logger.info({ invoiceId: outcome.invoice.id, from: outcome.previousStatus, to: outcome.invoice.status, events: outcome.events }, 'invoice settled');
      }
    }
  }

  /**
   * The cursor's block left the canonical chain: walk the stored recent blocks down to the first
   * one the node still has, orphan every payment above it, re-settle their invoices, and continue
   * from there.
   */
  /**
   * The canonical block at a height the head says exists. A node that answers `null` for it is
   * wrong (or lagging behind its own head): an error, never "no block", so bad answers can never
   * look like a reorg.
   */
  private async canonicalAt(height: number, head: BlockRef): Promise<BlockRef> {
    if (height === head.height) return head;
    const block = await this.options.adapter.blockAt(height);
    if (!block) throw new ChainSourceError('missing_block', `the node answered no block at ${height} below its head ${head.height}`);
    return block;
  }

  private async rewind(fromHeight: number, head: BlockRef): Promise<{ height: number; hash: string }> {
    const { adapter, metrics } = this.options;
    const chain = adapter.chain;
    let fork: BlockRef | undefined;
    for (const stored of await recentBlocks(this.options.sql, chain, fromHeight)) {
      if (stored.height > head.height) continue; // above the (shorter) chain: not canonical
      const canonical = await this.canonicalAt(stored.height, head);
      if (canonical.hash === stored.hash) {
        fork = canonical;
        break;
      }
    }
    if (!fork) {
      // Deeper than we keep blocks for: an incident. Re-scan from below the kept window.
      const lowest = Math.max(Math.min(fromHeight, head.height) - this.options.finalityDepth - 16, 0);
      fork = await this.canonicalAt(lowest, head);
      this.logger.error({ fromHeight, rewoundTo: lowest }, 'INCIDENT: reorg deeper than the stored blocks; rescanning');
    }
    const depth = fromHeight - fork.height;
    const forkBlock = fork;
    const outcomes = await eventTransaction(this.options.sql, async (tx) => {
      const orphaned = await orphanPaymentsAbove(tx, chain, forkBlock.height);
      await deleteMovementsAbove(tx, chain, forkBlock.height);
      await deleteBlocksAbove(tx, chain, forkBlock.height);
      await saveCursor(tx, chain, forkBlock);
      metrics.paymentsOrphaned.inc({ chain }, orphaned.length);
      // Money already credited to a merchant's balance left the chain: reversing it is an
      // operator's decision (docs/architecture.md#reorg-safety). Logged and counted once, when it happens.
      for (const p of orphaned.filter((row) => row.reported_as === 'paid' || row.reported_as === 'late')) {
        metrics.creditedPaymentsOrphaned.inc({ chain });
        this.logger.error(
          { invoiceId: p.invoice_id, transactionHash: p.transaction_hash, outputIndex: p.output_index, asset: p.asset, amount: p.amount, creditedAs: p.reported_as },
          'INCIDENT: a payment already credited to a balance left the chain (a reorg deeper than the confirmation threshold); nothing reversed automatically',
        );
      }
      const result = [];
      for (const invoiceId of new Set(orphaned.map((p) => p.invoice_id))) result.push(await settleInvoice(tx, invoiceId));
      return result;
    });
    metrics.reorgs.inc({ chain });
    this.logger.warn({ forkHeight: fork.height, depth }, 'reorg: rewound to the fork point and orphaned the payments above it');
    this.countSettlements(outcomes);
    return { height: fork.height, hash: fork.hash };
  }
}

function errorKind(err: unknown): string {
  if (err && typeof err === 'object' && 'kind' in err && typeof err.kind === 'string') return err.kind;
  return 'other';
}

