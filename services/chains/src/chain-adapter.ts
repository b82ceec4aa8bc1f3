/**
 * The chain adapter interface: everything the watcher needs to READ from one chain, and nothing
 * else. The watcher core (services/invoice/src/watcher/watcher.ts) owns the rest — the cursor
 * (height + hash), reorg detection by parent hash, confirmations, payment rows, the invoice
 * status, events, the advisory lock — so an adapter is a thin, stateless translation of a node's API into these types.
 *
 * How an adapter plugs in:
 *   1. Implement `ChainAdapter` for the chain (e.g. `EsploraAdapter` for bitcoin/litecoin, a Tron
 *      HTTP adapter), in `<family>/<name>-adapter.ts`. Amounts leave as exact decimals in the
 *      asset's units (use `fromBaseUnits`), addresses exactly as the invoice service issued them
 *      (the `WatchedAddresses` lookup is by that spelling; normalise case for hex chains).
 *   2. Add its settings (URL, confirmations, poll interval) and its source to the family module's
 *      `watcherSettings` and `sources` (family.ts).
 *   3. `node services/invoice/dist/main.js watch <chain>` then runs it: one active watcher per chain
 *      (Postgres advisory lock), the others stand by.
 *
 * Contract of every method: it returns facts of the chain as the node answers them, or throws
 * (`ChainSourceError` for a node that is down, slow or says something malformed). It never
 * "guesses": a block it cannot read fully is an error, never an empty list, because the watcher
 * advances its cursor past whatever scanBlock returns.
 *
 * UTXO chains: an output is `outputIndex` = vout; a mempool transaction is reported by
 * `pendingTransfers` with `block: null` (status `seen`); a transaction that disappears from the
 * mempool without being mined, or whose inputs another mined transaction spent, is reported by
 * `transactionState` as `replaced`. Account chains (ethereum, tron) may leave both optional
 * methods out: their payments are recorded when mined.
 */
import type { Chain, CryptoCode } from './coin';
import type { Decimal } from '@coinvoice/domain/money';

export type ChainName = Chain;

/** Output index of the value an account-chain transaction itself carries (ETH `value`, TRX amount). */
export const NATIVE_VALUE_INDEX = -1;

/** A block of the canonical chain as the node reports it. */
export interface BlockRef {
  height: number;
  /** Lower-case hex (0x-prefixed on EVM chains), exactly as the node spells it otherwise. */
  hash: string;
  parentHash: string;
  time: Date;
}

/** One transfer of value to one watched address, as the chain reports it. */
export interface ObservedTransfer {
  transactionHash: string;
  /**
   * Unique within the transaction: the ERC-20 log index, the UTXO output index (vout), or
   * NATIVE_VALUE_INDEX (-1) for an account chain's own transaction value.
   */
  outputIndex: number;
  /** The receiving address, spelled as the invoice service issued it. */
  address: string;
  asset: CryptoCode;
  /** Exact amount in the asset's units (e.g. 0.5 ETH, 12.34 USDT), > 0. */
  amount: Decimal;
  /** The block that mined it; null for a mempool transaction (UTXO chains). */
  block: BlockRef | null;
  /**
   * Who sent it, lower case, where the chain says so in one address (EVM: the transaction's
   * `from`, or the Transfer log's `from`); absent on UTXO chains.
   */
  sender?: string;
}

/**
 * The addresses the watcher currently watches, with a fast membership test. An adapter matches
 * what a block holds against it in memory: a block's cost must not grow with the watched set.
 */
export interface WatchedAddresses {
  /** How many addresses are watched. */
  readonly size: number;
  /** Every watched address (as issued): for work proportional to the set (a first mempool read). */
  readonly all: readonly string[];
  /** The issued spelling of `address` if it is watched (case-insensitive for hex chains), else undefined. */
  lookup(address: string): string | undefined;
}

/** The state of a transaction the watcher saw unmined (UTXO replacement detection). */
export type TransactionState = 'pending' | 'mined' | 'replaced';

export interface ChainAdapter {
  readonly chain: ChainName;
  /** The assets this adapter reports (ETH, USDT, USDC on ethereum; BTC on bitcoin…). */
  readonly assets: readonly CryptoCode[];

  /** The canonical chain's tip. */
  head(): Promise<BlockRef>;

  /** The canonical block at `height`, or null when the chain is not that long (yet). */
  blockAt(height: number): Promise<BlockRef | null>;

  /**
   * Every transfer to a watched address in exactly this block — fetched BY HASH (EIP-234 on EVM
   * chains), so a reorg between "which block is at height h" and "what is in it" cannot mix two
   * blocks. Throws when the block is no longer known or the answer is incomplete.
   */
  scanBlock(block: BlockRef, addresses: WatchedAddresses): Promise<ObservedTransfer[]>;

  /**
   * Balances of `addresses` in `asset` as of `block` (reconciliation: a balance above the sum of
   * recorded payments means the block scan missed a transfer, e.g. an internal ETH transfer from a
   * contract wallet). Keys: the addresses as given.
   */
  balancesAt(asset: CryptoCode, addresses: readonly string[], block: BlockRef): Promise<Map<string, Decimal>>;

  /**
   * What left watched addresses in exactly this block (account chains: a sweep's value and fee,
   * a token transfer from them), each as an ObservedTransfer whose `address` is the watched one
   * it left. Reconciliation adds it back (docs/watcher.md#what-left-an-address). Absent where
   * the block scan sees every payment (UTXO chains).
   */
  outflowsOf?(block: BlockRef, addresses: WatchedAddresses): Promise<ObservedTransfer[]>;

  /** Unmined transfers to watched addresses (UTXO mempools); absent on account chains. */
  pendingTransfers?(addresses: WatchedAddresses): Promise<ObservedTransfer[]>;

  /** Whether a transaction seen unmined is still pending, mined, or replaced; absent on account chains. */
  transactionState?(transactionHash: string): Promise<TransactionState>;
}

/** What a source did wrong: the watcher logs it, counts it, waits and retries; it never marks anything. */
export class ChainSourceError extends Error {
  constructor(
    readonly kind: 'unavailable' | 'timeout' | 'rpc_error' | 'malformed' | 'missing_block',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'ChainSourceError';
  }
}
