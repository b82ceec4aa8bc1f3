/**
 * The `bitcoin` and `litecoin` chain adapters over the Esplora REST API (electrs / mempool.space
 * self-hosted; docs/architecture.md#watcher-roles). Blocks are read BY HASH (`/block/:hash`, `/block/:hash/txs/:start`)
 * so a reorg between "which block is at height h" and "what is in it" cannot mix two blocks; the
 * mempool is followed by its txids (`/mempool/txids`, new transactions fetched once) plus one read
 * per address when it starts being watched (`/scripthash/:hash/txs/mempool`); a transaction seen
 * unmined that vanished is `replaced` only when one of its inputs is spent by another transaction
 * (`/tx/:prev/outspend/:vout`). Every answer is checked before use: a malformed one is a
 * ChainSourceError, never an empty result.
 */
import { sha256 } from '@noble/hashes/sha2.js';
import { bech32 } from '@scure/base';
import type { CryptoCode } from '../coin';
import { Decimal, fromBaseUnits } from '@coinvoice/domain/money';
import { ChainSourceError, type BlockRef, type ChainAdapter, type ObservedTransfer, type TransactionState, type WatchedAddresses } from '../chain-adapter';

export interface EsploraAdapterOptions {
  chain: 'bitcoin' | 'litecoin';
  baseUrl: string;
  timeoutMs: number;
}

const SATOSHI_DECIMALS = 8;
/** Esplora pages a block's transactions by 25. */
const TXS_PER_PAGE = 25;
/** New mempool transactions fetched at once. */
const MEMPOOL_FETCH_CONCURRENCY = 16;
const HASH = /^[0-9a-f]{64}$/;

interface EsploraOutput {
  scriptpubkey_address?: string;
  value: number;
}
interface EsploraInput {
  txid: string;
  vout: number;
  is_coinbase: boolean;
}
interface EsploraTx {
  txid: string;
  vin: EsploraInput[];
  vout: EsploraOutput[];
  status: { confirmed: boolean; block_height?: number; block_hash?: string; block_time?: number };
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function malformed(what: string): ChainSourceError {
  return new ChainSourceError('malformed', `esplora: ${what}`);
}

/** Parses one Esplora transaction, refusing anything that is not its documented shape. */
function parseTx(value: unknown): EsploraTx {
  if (!isRecord(value) || typeof value.txid !== 'string' || !HASH.test(value.txid)) throw malformed('a transaction without a valid txid');
  const { vin, vout, status } = value;
  if (!Array.isArray(vin) || !Array.isArray(vout) || !isRecord(status) || typeof status.confirmed !== 'boolean') {
    throw malformed(`transaction ${value.txid} lacks vin, vout or status`);
  }
  const inputs = vin.map((input): EsploraInput => {
    if (!isRecord(input)) throw malformed(`transaction ${value.txid} has a malformed input`);
    const coinbase = input.is_coinbase === true;
    if (!coinbase && (typeof input.txid !== 'string' || !HASH.test(input.txid) || !Number.isSafeInteger(input.vout))) {
      throw malformed(`transaction ${value.txid} has a malformed input`);
    }
    return { txid: String(input.txid ?? ''), vout: Number(input.vout ?? 0), is_coinbase: coinbase };
  });
  const outputs = vout.map((output): EsploraOutput => {
    if (!isRecord(output) || !Number.isSafeInteger(output.value) || (output.value as number) < 0) {
      throw malformed(`transaction ${value.txid} has an output without an integer value`);
    }
    const address = typeof output.scriptpubkey_address === 'string' ? output.scriptpubkey_address : undefined;
    return { value: output.value as number, ...(address ? { scriptpubkey_address: address } : {}) };
  });
  return {
    txid: value.txid,
    vin: inputs,
    vout: outputs,
    status: {
      confirmed: status.confirmed,
      ...(typeof status.block_height === 'number' ? { block_height: status.block_height } : {}),
      ...(typeof status.block_hash === 'string' ? { block_hash: status.block_hash } : {}),
    },
  };
}

/**
 * Electrum-style script hash of a segwit v0 address (what `/scripthash/:hash` takes): sha256 of
 * the output script, byte-reversed, hex.
 */
export function scriptHashOf(address: string): string {
  const decoded = bech32.decode(address as `${string}1${string}`);
  const [version, ...words] = decoded.words;
  if (version !== 0) throw new Error(`not a segwit v0 address: ${address}`);
  const program = bech32.fromWords(words);
  const script = new Uint8Array([0x00, program.length, ...program]);
  return Buffer.from(sha256(script)).reverse().toString('hex');
}

export class EsploraAdapter implements ChainAdapter {
  readonly chain: 'bitcoin' | 'litecoin';
  readonly assets: readonly CryptoCode[];
  private readonly base: string;

  constructor(private readonly options: EsploraAdapterOptions) {
    this.chain = options.chain;
    this.assets = [options.chain === 'bitcoin' ? 'BTC' : 'LTC'];
    this.base = options.baseUrl.replace(/\/+$/, '');
  }

  private get asset(): CryptoCode {
    return this.assets[0]!;
  }

  /** GET `path`; 404 → undefined; anything else unexpected → ChainSourceError. */
  private async get(path: string, as: 'json' | 'text'): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, { signal: AbortSignal.timeout(this.options.timeoutMs) });
    } catch (err) {
      const timeout = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      throw new ChainSourceError(timeout ? 'timeout' : 'unavailable', `esplora ${path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (response.status === 404) {
      await response.body?.cancel();
      return undefined;
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw new ChainSourceError('unavailable', `esplora ${path}: HTTP ${response.status}`);
    }
    const text = await response.text();
    if (as === 'text') return text.trim();
    try {
      return JSON.parse(text) as unknown;
    } catch {
      throw malformed(`${path} is not JSON`);
    }
  }

  private async required(path: string, as: 'json' | 'text'): Promise<unknown> {
    const value = await this.get(path, as);
    if (value === undefined) throw new ChainSourceError('missing_block', `esplora ${path}: not found`);
    return value;
  }

  private async blockByHash(hash: string): Promise<BlockRef> {
    const block = await this.required(`/block/${hash}`, 'json');
    if (!isRecord(block) || block.id !== hash || !Number.isSafeInteger(block.height) || !Number.isSafeInteger(block.timestamp)) {
      throw malformed(`/block/${hash} is not the block asked for`);
    }
    const parentHash = typeof block.previousblockhash === 'string' ? block.previousblockhash : '0'.repeat(64);
    return { height: block.height as number, hash, parentHash, time: new Date((block.timestamp as number) * 1000) };
  }

  async head(): Promise<BlockRef> {
    const hash = await this.required('/blocks/tip/hash', 'text');
    if (typeof hash !== 'string' || !HASH.test(hash)) throw malformed('/blocks/tip/hash is not a block hash');
    return this.blockByHash(hash);
  }

  async blockAt(height: number): Promise<BlockRef | null> {
    const hash = await this.get(`/block-height/${height}`, 'text');
    if (hash === undefined) return null;
    if (typeof hash !== 'string' || !HASH.test(hash)) throw malformed(`/block-height/${height} is not a block hash`);
    const block = await this.blockByHash(hash);
    if (block.height !== height) throw malformed(`/block-height/${height} named a block at height ${block.height}`);
    return block;
  }

  /** Every output of `tx` to a watched address, as transfers in `block`. */
  private transfersOf(tx: EsploraTx, addresses: WatchedAddresses, block: BlockRef | null): ObservedTransfer[] {
    const transfers: ObservedTransfer[] = [];
    tx.vout.forEach((output, index) => {
      const address = output.scriptpubkey_address && addresses.lookup(output.scriptpubkey_address);
      if (!address || output.value <= 0) return;
      transfers.push({
        transactionHash: tx.txid,
        outputIndex: index,
        address,
        asset: this.asset,
        amount: fromBaseUnits(BigInt(output.value), SATOSHI_DECIMALS),
        block,
      });
    });
    return transfers;
  }

  async scanBlock(block: BlockRef, addresses: WatchedAddresses): Promise<ObservedTransfer[]> {
    const header = await this.required(`/block/${block.hash}`, 'json');
    if (!isRecord(header) || header.id !== block.hash || !Number.isSafeInteger(header.tx_count)) {
      throw malformed(`/block/${block.hash} has no tx_count`);
    }
    const txCount = header.tx_count as number;
    const transfers: ObservedTransfer[] = [];
    let seen = 0;
    for (let start = 0; start < txCount; start += TXS_PER_PAGE) {
      const page = await this.required(`/block/${block.hash}/txs/${start}`, 'json');
      if (!Array.isArray(page) || page.length === 0) throw malformed(`/block/${block.hash}/txs/${start} is not a page of transactions`);
      for (const raw of page) {
        const tx = parseTx(raw);
        if (tx.status.block_hash !== undefined && tx.status.block_hash !== block.hash) {
          throw malformed(`transaction ${tx.txid} listed in block ${block.hash} says it is in ${tx.status.block_hash}`);
        }
        const paying = this.transfersOf(tx, addresses, block);
        // Remembered so that a reorg that double-spends it can still be told apart from a drop.
        if (paying.length > 0) this.rememberInputs(tx);
        transfers.push(...paying);
        seen += 1;
      }
    }
    // A block read partly would let the cursor pass payments by: refuse it.
    if (seen !== txCount) throw malformed(`block ${block.hash} lists ${seen} of its ${txCount} transactions`);
    return transfers;
  }

  /**
   * What each address had RECEIVED in confirmed outputs up to and including `block` (what the
   * watcher compares with its recorded payments): the address's confirmed history
   * (`/scripthash/:hash/txs/chain`, newest first, 25 per page) summed over transactions mined at
   * or below the block's height. A tip-only figure (`chain_stats`) would count payments above it.
   */
  async balancesAt(_asset: CryptoCode, addresses: readonly string[], block: BlockRef): Promise<Map<string, Decimal>> {
    const balances = new Map<string, Decimal>();
    for (const address of addresses) {
      const scriptHash = scriptHashOf(address);
      let received = 0n;
      let lastSeen: string | undefined;
      for (;;) {
        const page = await this.required(`/scripthash/${scriptHash}/txs/chain${lastSeen ? `/${lastSeen}` : ''}`, 'json');
        if (!Array.isArray(page)) throw malformed(`confirmed history of ${address} is not a list`);
        for (const raw of page) {
          const tx = parseTx(raw);
          if (!tx.status.confirmed || tx.status.block_height === undefined) throw malformed(`unconfirmed ${tx.txid} in the confirmed history of ${address}`);
          if (tx.status.block_height > block.height) continue;
          for (const output of tx.vout) if (output.scriptpubkey_address === address) received += BigInt(output.value);
        }
        if (page.length < TXS_PER_PAGE) break;
        lastSeen = parseTx(page[page.length - 1]).txid;
      }
      balances.set(address, fromBaseUnits(received, SATOSHI_DECIMALS));
    }
    return balances;
  }

  /**
   * Unmined transfers to watched addresses, at the mempool's cost rather than the watched set's
   * (docs/watcher.md, "Cost per block"): each call reads the mempool's txids and fetches only the
   * transactions not looked at before. Addresses that joined the set since the last call may have
   * been paid by a transaction looked at before they were watched; they are covered the cheaper
   * way: one read of each one's mempool history (`/scripthash/:hash/txs/mempool`), or, when more
   * addresses joined than the mempool holds (a start, a bulk load), every mempool transaction
   * once. Transactions that left the mempool are forgotten (the block scan and transactionState
   * own them).
   */
  async pendingTransfers(addresses: WatchedAddresses): Promise<ObservedTransfer[]> {
    const ids = await this.required('/mempool/txids', 'json');
    if (!Array.isArray(ids) || !ids.every((id) => typeof id === 'string' && HASH.test(id))) throw malformed('/mempool/txids is not a list of txids');
    const inMempool = new Set(ids as string[]);
    const mempool = this.mempool;
    const joined = addresses.all.filter((address) => !mempool.checked.has(address));
    const wholeMempool = joined.length > inMempool.size;
    const toFetch = wholeMempool ? [...inMempool] : [...inMempool].filter((id) => !mempool.known.has(id));
    for (let i = 0; i < toFetch.length; i += MEMPOOL_FETCH_CONCURRENCY) {
      await Promise.all(
        toFetch.slice(i, i + MEMPOOL_FETCH_CONCURRENCY).map(async (txid) => {
          const raw = await this.get(`/tx/${txid}`, 'json');
          if (raw !== undefined) this.notePending(parseTx(raw), addresses); // else: left the mempool since the list was read
        }),
      );
    }
    for (const id of inMempool) mempool.known.add(id);
    for (const address of joined) {
      if (!wholeMempool) {
        const txs = await this.required(`/scripthash/${scriptHashOf(address)}/txs/mempool`, 'json');
        if (!Array.isArray(txs)) throw malformed(`mempool of ${address} is not a list`);
        for (const raw of txs) this.notePending(parseTx(raw), addresses);
      }
      mempool.checked.add(address);
    }
    for (const id of mempool.known) if (!inMempool.has(id)) mempool.known.delete(id);
    for (const id of mempool.paying.keys()) if (!inMempool.has(id)) mempool.paying.delete(id);
    for (const address of mempool.checked) if (addresses.lookup(address) === undefined) mempool.checked.delete(address);
    return [...mempool.paying.values()].flat();
  }

  /** Remembers an unmined transaction's transfers to watched addresses (none: nothing kept but its id). */
  private notePending(tx: EsploraTx, addresses: WatchedAddresses): void {
    if (tx.status.confirmed) return;
    this.mempool.known.add(tx.txid);
    const transfers = this.transfersOf(tx, addresses, null);
    if (transfers.length === 0) return;
    this.rememberInputs(tx);
    this.mempool.paying.set(tx.txid, transfers);
  }

  /** What the adapter knows of the mempool between calls (see pendingTransfers). */
  private readonly mempool = {
    /** Txids already looked at (in the mempool at the last read). */
    known: new Set<string>(),
    /** Unmined transactions paying watched addresses, with their transfers. */
    paying: new Map<string, ObservedTransfer[]>(),
    /** Watched addresses whose own mempool history has been read once. */
    checked: new Set<string>(),
  };

  /**
   * pending: still in the mempool, or gone without any of its inputs spent elsewhere (it may be
   * rebroadcast); mined: in a block; replaced: gone, and another transaction spends one of its
   * inputs (a double-spend or RBF replacement). Needs the transaction's inputs: they are read
   * while it is known, and remembered for when it is not.
   */
  async transactionState(transactionHash: string): Promise<TransactionState> {
    const raw = await this.get(`/tx/${transactionHash}`, 'json');
    if (raw !== undefined) {
      const tx = parseTx(raw);
      this.rememberInputs(tx);
      return tx.status.confirmed ? 'mined' : 'pending';
    }
    const inputs = this.inputsOf.get(transactionHash);
    if (!inputs) return 'pending';
    for (const input of inputs) {
      const outspend = await this.get(`/tx/${input.txid}/outspend/${input.vout}`, 'json');
      if (isRecord(outspend) && outspend.spent === true && typeof outspend.txid === 'string' && outspend.txid !== transactionHash) {
        return 'replaced';
      }
    }
    return 'pending';
  }

  /** Inputs of transactions seen unmined (bounded): a vanished transaction can no longer be read. */
  private readonly inputsOf = new Map<string, readonly EsploraInput[]>();

  private rememberInputs(tx: EsploraTx): void {
    if (this.inputsOf.size >= 10_000) this.inputsOf.delete(this.inputsOf.keys().next().value!);
    this.inputsOf.set(tx.txid, tx.vin.filter((input) => !input.is_coinbase));
  }
}
