/**
 * The `tron` chain adapter over the Tron full-node HTTP API (java-tron `/wallet/*`; docs/architecture.md#watcher-roles):
 * TRX transfers (TransferContract, contractRet SUCCESS) to watched addresses. Blocks are read by
 * number to follow the chain and BY ID (`/wallet/getblockbyid`) to scan, so a reorg between the two
 * cannot mix blocks. Addresses come in the API's hex form (41…) and are compared in the base58
 * form the invoice service issues. 20 confirmations by default: Tron's blocks are solid
 * (irreversible) after 19 more. Every answer is checked: a malformed one is a ChainSourceError.
 */
import type { CryptoCode } from '../coin';
import { tronAddressFromHex } from './address';
import { Decimal, fromBaseUnits } from '@coinvoice/domain/money';
import { NATIVE_VALUE_INDEX } from '../chain-adapter';
import { ChainSourceError, type BlockRef, type ChainAdapter, type ObservedTransfer, type WatchedAddresses } from '../chain-adapter';

export interface TronAdapterOptions {
  apiUrl: string;
  timeoutMs: number;
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
  readonly assets: readonly CryptoCode[] = ['TRX'];
  private readonly base: string;

  constructor(private readonly options: TronAdapterOptions) {
    this.base = options.apiUrl.replace(/\/+$/, '');
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
    return transfers;
  }

  /**
   * Nothing: a full node answers balances at its head only (`/wallet/getaccount`), never as of an
   * earlier block, and a head balance would count transfers above the reconciled height as missed
   * (and an address the merchant swept would hide one). Tron payments come from the block scan
   * alone; an empty answer makes the watcher's reconciliation skip these addresses.
   */
  async balancesAt(): Promise<Map<string, Decimal>> {
    return new Map();
  }
}
