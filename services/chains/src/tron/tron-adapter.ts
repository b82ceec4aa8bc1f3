/**
 * The `tron` chain adapter over the Tron full-node HTTP API (java-tron `/wallet/*`; docs/architecture.md#watcher-roles):
 * TRX transfers (TransferContract, contractRet SUCCESS) to watched addresses, and TRC-20 Transfer
 * events of the configured token contracts (USDT; USDC where configured; docs/networks.md#tron-trc-20).
 * Blocks are read by number to follow the chain and BY ID (`/wallet/getblockbyid`) to scan, so a
 * reorg between the two cannot mix blocks. Addresses come in the API's hex form (41…) and are
 * compared in the base58 form the invoice service issues. 20 confirmations by default: Tron's
 * blocks are solid (irreversible) after 19 more. Every answer is checked: a malformed one is a
 * ChainSourceError.
 */
import type { CryptoCode } from '../coin';
import { tronAddressFromHex } from './address';
import { contractLogAddress, failedCall, TRON_TOKENS, trc20TransfersOf, type TronTokenCode } from './trc20';
import { Decimal, fromBaseUnits } from '@coinvoice/domain/money';
import { NATIVE_VALUE_INDEX } from '../chain-adapter';
import { ChainSourceError, type BlockRef, type ChainAdapter, type ObservedTransfer, type WatchedAddresses } from '../chain-adapter';

export interface TronAdapterOptions {
  apiUrl: string;
  timeoutMs: number;
  /** The configured contract (base58 "T…") per token taken; a token left out is not watched. */
  tokens?: Readonly<Partial<Record<TronTokenCode, string>>>;
}

const SUN_DECIMALS = 6;
const BLOCK_ID = /^[0-9a-f]{64}$/;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function malformed(what: string): ChainSourceError {
  return new ChainSourceError('malformed', `tron: ${what}`);
}

interface TronBlock {
  ref: BlockRef;
  transactions: unknown[];
}

export class TronAdapter implements ChainAdapter {
  readonly chain = 'tron' as const;
  readonly assets: readonly CryptoCode[];
  private readonly base: string;
  /** By the 20-byte hex a log's `address` carries: the token and its registry decimals. */
  private readonly tokenOf = new Map<string, { asset: TronTokenCode; decimals: number }>();

  constructor(private readonly options: TronAdapterOptions) {
    this.base = options.apiUrl.replace(/\/+$/, '');
    for (const [asset, contract] of Object.entries(options.tokens ?? {}) as Array<[TronTokenCode, string]>) {
      if (contract === '') continue;
      this.tokenOf.set(contractLogAddress(contract), { asset, decimals: TRON_TOKENS[asset].baseUnitDecimals });
    }
    this.assets = ['TRX', ...Array.from(this.tokenOf.values(), (t) => t.asset)];
  }

  private async post(path: string, body: Record<string, unknown>): Promise<unknown> {
    let response: Response;
    try {
      response = await fetch(`${this.base}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (err) {
      const timeout = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      throw new ChainSourceError(timeout ? 'timeout' : 'unavailable', `tron ${path}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw new ChainSourceError('unavailable', `tron ${path}: HTTP ${response.status}`);
    }
    try {
      return (await response.json()) as unknown;
    } catch {
      throw malformed(`${path} is not JSON`);
    }
  }

  /** A block answer; undefined for the API's `{}` (no such block). */
  private parseBlock(value: unknown, path: string): TronBlock | undefined {
    if (isRecord(value) && Object.keys(value).length === 0) return undefined;
    const header = isRecord(value) && isRecord(value.block_header) ? value.block_header : undefined;
    const raw = header && isRecord(header.raw_data) ? header.raw_data : undefined;
    if (!isRecord(value) || typeof value.blockID !== 'string' || !BLOCK_ID.test(value.blockID) || !raw) throw malformed(`${path} is not a block`);
    const number = raw.number;
    const parentHash = raw.parentHash;
    const timestamp = raw.timestamp;
    if (!Number.isSafeInteger(number) || typeof parentHash !== 'string' || !BLOCK_ID.test(parentHash) || !Number.isSafeInteger(timestamp)) {
      throw malformed(`${path}: block ${value.blockID} lacks number, parentHash or timestamp`);
    }
    const transactions = value.transactions ?? [];
    if (!Array.isArray(transactions)) throw malformed(`${path}: block ${value.blockID} has malformed transactions`);
    return { ref: { height: number as number, hash: value.blockID, parentHash, time: new Date(timestamp as number) }, transactions };
  }

  async head(): Promise<BlockRef> {
    const block = this.parseBlock(await this.post('/wallet/getnowblock', {}), '/wallet/getnowblock');
    if (!block) throw malformed('/wallet/getnowblock answered no block');
    return block.ref;
  }

  async blockAt(height: number): Promise<BlockRef | null> {
    const block = this.parseBlock(await this.post('/wallet/getblockbynum', { num: height }), '/wallet/getblockbynum');
    if (!block) return null;
    if (block.ref.height !== height) throw malformed(`/wallet/getblockbynum ${height} answered block ${block.ref.height}`);
    return block.ref;
  }

  async scanBlock(block: BlockRef, addresses: WatchedAddresses): Promise<ObservedTransfer[]> {
    const read = this.parseBlock(await this.post('/wallet/getblockbyid', { value: block.hash }), '/wallet/getblockbyid');
    if (!read) throw new ChainSourceError('missing_block', `tron: block ${block.hash} is no longer known`);
    if (read.ref.hash !== block.hash) throw malformed(`/wallet/getblockbyid ${block.hash} answered ${read.ref.hash}`);
    const transfers: ObservedTransfer[] = [];
    for (const tx of read.transactions) {
      if (!isRecord(tx) || typeof tx.txID !== 'string' || !BLOCK_ID.test(tx.txID) || !isRecord(tx.raw_data)) throw malformed(`block ${block.hash} has a malformed transaction`);
      const ret = Array.isArray(tx.ret) && isRecord(tx.ret[0]) ? tx.ret[0].contractRet : undefined;
      const contracts = Array.isArray(tx.raw_data.contract) ? tx.raw_data.contract : [];
      // A failed transaction moves nothing.
      if (ret !== 'SUCCESS') continue;
      for (const contract of contracts) {
        if (!isRecord(contract) || contract.type !== 'TransferContract') continue;
        const value = isRecord(contract.parameter) && isRecord(contract.parameter.value) ? contract.parameter.value : undefined;
        if (!value || typeof value.to_address !== 'string' || !Number.isSafeInteger(value.amount) || (value.amount as number) <= 0) {
          throw malformed(`transaction ${tx.txID} has a malformed TransferContract`);
        }
        const to = tronAddressFromHex(value.to_address);
        const address = to && addresses.lookup(to);
        if (!address) continue;
        transfers.push({
          transactionHash: tx.txID,
          outputIndex: NATIVE_VALUE_INDEX,
          address,
          asset: 'TRX',
          amount: fromBaseUnits(BigInt(value.amount as number), SUN_DECIMALS),
          block,
        });
      }
    }
    // The infos are a second request: skipped when no token is taken, nothing is watched or the block is empty.
    if (this.tokenOf.size > 0 && addresses.size > 0 && read.transactions.length > 0) transfers.push(...(await this.tokenTransfers(block, read.transactions as Array<{ txID: string }>, addresses)));
    return transfers;
  }

  /**
   * TRC-20 Transfer events of the configured contracts to watched addresses in `block`: the
   * block's TransactionInfos (`/wallet/gettransactioninfobyblocknum`, one request whatever the
   * watched set), matched in memory. Any transaction may emit them — a batch-payout contract's call
   * emits one per recipient — so every successful transaction's logs are read, not only calls of
   * the token. The answer names no block hash, only the height: it is taken for THIS block only
   * when it lists exactly the block's transactions, in order (java-tron keeps the infos per height,
   * in block order), so a reorg between the two reads is an error and the watcher retries.
   */
  private async tokenTransfers(block: BlockRef, transactions: ReadonlyArray<{ txID: string }>, addresses: WatchedAddresses): Promise<ObservedTransfer[]> {
    const path = '/wallet/gettransactioninfobyblocknum';
    const answer = await this.post(path, { num: block.height });
    // java-tron answers `[]` both for an empty block and for a height it does not have, `{}` for num 0.
    const infos = Array.isArray(answer) ? answer : isRecord(answer) && Object.keys(answer).length === 0 ? [] : undefined;
    if (!infos) throw malformed(`${path} ${block.height}: ${isRecord(answer) && typeof answer.Error === 'string' ? answer.Error : 'not an array of transaction infos'}`);
    const sameBlock =
      infos.length === transactions.length &&
      infos.every((info, i) => isRecord(info) && info.id === transactions[i]!.txID && info.blockNumber === block.height);
    if (!sameBlock) {
      throw new ChainSourceError('missing_block', `tron: the transaction infos at height ${block.height} are not those of block ${block.hash} (a reorg, or a node still storing them)`);
    }
    const contracts = new Set(this.tokenOf.keys());
    const transfers: ObservedTransfer[] = [];
    for (const info of infos as Array<Record<string, unknown>>) {
      // A failed call's effects, its Transfer events included, were undone: it moved no token.
      if (failedCall(info) !== undefined) continue;
      const logs = trc20TransfersOf(info, contracts);
      if (!logs) throw malformed(`${path} ${block.height}: transaction ${String(info.id)} has a malformed log`);
      for (const log of logs) {
        const address = addresses.lookup(log.to);
        const token = this.tokenOf.get(log.contract)!;
        if (!address || log.value === 0n) continue;
        transfers.push({
          transactionHash: info.id as string,
          // The log's index within its transaction: a batched transfer pays several addresses in one transaction.
          outputIndex: log.logIndex,
          address,
          asset: token.asset,
          amount: fromBaseUnits(log.value, token.decimals),
          block,
        });
      }
    }
    return transfers;
  }

  /**
   * Nothing, for TRX and the TRC-20 tokens alike: a full node answers balances at its head only
   * (`/wallet/getaccount`; a token's `balanceOf` through `/wallet/triggerconstantcontract`, whose
   * java-tron and JSON-RPC `eth_call` forms take no block either), never as of an earlier block,
   * and a head balance would count the transfers above the reconciled height as missed — then
   * again when the scan reaches them (and an address the merchant swept would hide one). Tron
   * payments come from the block scan alone; an empty answer makes the watcher's reconciliation
   * skip these addresses (docs/networks.md#tron-trc-20).
   */
  async balancesAt(asset: CryptoCode): Promise<Map<string, Decimal>> {
    if (!this.assets.includes(asset)) throw new Error(`tron: ${asset} is not an asset of this adapter`);
    return new Map();
  }
}
