/**
 * The Ethereum node as the processor uses it: plain JSON-RPC over fetch (no library), quantities
 * as bigint. A transport failure or a JSON-RPC error is an EvmNodeError; the caller's round fails
 * and is retried, nothing is written for it.
 */

export class EvmNodeError extends Error {
  constructor(
    message: string,
    /** The JSON-RPC error code, when the node answered one. */
    readonly rpcCode?: number,
    /** The revert data or message of an `eth_call` / `eth_estimateGas` that reverted. */
    readonly data?: unknown,
  ) {
    super(message);
    this.name = 'EvmNodeError';
  }
}

export interface EvmReceipt {
  transactionHash: string;
  blockHash: string;
  blockNumber: bigint;
  /** true: success (status 0x1); false: reverted. */
  succeeded: boolean;
  gasUsed: bigint;
  effectiveGasPrice: bigint;
}

export interface EvmFees {
  /** Base fee of the latest block. */
  baseFeePerGas: bigint;
  maxPriorityFeePerGas: bigint;
  /** 2 × base fee + priority fee: room for the base fee to rise for several full blocks. */
  maxFeePerGas: bigint;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const quantity = (value: bigint): string => `0x${value.toString(16)}`;

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function bigintOf(value: unknown, what: string): bigint {
  if (typeof value !== 'string' || !/^0x[0-9a-fA-F]+$/.test(value)) throw new EvmNodeError(`malformed ${what} from the node`);
  return BigInt(value);
}

/** keccak256("transfer(address,uint256)")[0..4]. */
const TRANSFER_SELECTOR = '0xa9059cbb';
/** keccak256("balanceOf(address)")[0..4]. */
const BALANCE_OF_SELECTOR = '0x70a08231';

const word = (hex: string): string => hex.replace(/^0x/, '').toLowerCase().padStart(64, '0');

/** ERC-20 `transfer(to, amount)` call data. */
export function erc20TransferData(to: string, amount: bigint): string {
  return `${TRANSFER_SELECTOR}${word(to)}${word(amount.toString(16))}`;
}

export class EvmNode {
  private nextId = 1;

  constructor(private readonly options: { url: string; timeoutMs: number }) {}

  async call<T = unknown>(method: string, params: Json[]): Promise<T> {
    let response: Response;
    try {
      response = await fetch(this.options.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ jsonrpc: '2.0', id: this.nextId++, method, params }),
        signal: AbortSignal.timeout(this.options.timeoutMs),
      });
    } catch (err) {
      throw new EvmNodeError(`${method}: the node did not answer (${err instanceof Error ? err.name : 'error'})`);
    }
    let body: unknown;
    try {
      body = await response.json();
    } catch {
      throw new EvmNodeError(`${method}: HTTP ${response.status} without a JSON-RPC answer`);
    }
    if (!isObject(body)) throw new EvmNodeError(`${method}: malformed JSON-RPC answer`);
    if (isObject(body.error)) {
      const message = typeof body.error.message === 'string' ? body.error.message : 'error';
      const code = typeof body.error.code === 'number' ? body.error.code : undefined;
      throw new EvmNodeError(`${method}: ${message}`, code, body.error.data);
    }
    if (!('result' in body)) throw new EvmNodeError(`${method}: malformed JSON-RPC answer`);
    return body.result as T;
  }

  async chainId(): Promise<bigint> {
    return bigintOf(await this.call('eth_chainId', []), 'chain id');
  }

  async blockNumber(): Promise<bigint> {
    return bigintOf(await this.call('eth_blockNumber', []), 'block number');
  }

  /** The hash of the canonical block at `height`, or null when the node has none there. */
  async blockHashAt(height: bigint): Promise<string | null> {
    const block = await this.call('eth_getBlockByNumber', [quantity(height), false]);
    if (block === null) return null;
    if (!isObject(block) || typeof block.hash !== 'string') throw new EvmNodeError('malformed block from the node');
    return block.hash.toLowerCase();
  }

  /** The balance at the latest block, or at block `height`. */
  async balance(address: string, height?: bigint): Promise<bigint> {
    return bigintOf(await this.call('eth_getBalance', [address, height === undefined ? 'latest' : quantity(height)]), 'balance');
  }

  /** The token balance at the latest block, or at block `height`. */
  async tokenBalance(contract: string, address: string, height?: bigint): Promise<bigint> {
    const result = await this.call('eth_call', [{ to: contract, data: `${BALANCE_OF_SELECTOR}${word(address)}` }, height === undefined ? 'latest' : quantity(height)]);
    return bigintOf(result === '0x' ? '0x0' : result, 'token balance');
  }

  /** Transactions mined from `address` (its next nonce) at the latest block, or at block `height`. */
  async minedNonce(address: string, height?: bigint): Promise<bigint> {
    return bigintOf(await this.call('eth_getTransactionCount', [address, height === undefined ? 'latest' : quantity(height)]), 'nonce');
  }

  /** EIP-1559 fees: the latest block's base fee and the node's priority fee suggestion. */
  async fees(): Promise<EvmFees> {
    const [history, priority] = await Promise.all([
      this.call('eth_feeHistory', [quantity(1n), 'latest', []]),
      this.call('eth_maxPriorityFeePerGas', []),
    ]);
    if (!isObject(history) || !Array.isArray(history.baseFeePerGas) || history.baseFeePerGas.length === 0) throw new EvmNodeError('malformed fee history from the node');
    // The last entry is the NEXT block's base fee (EIP-1559 makes it known one block ahead).
    const baseFeePerGas = bigintOf(history.baseFeePerGas[history.baseFeePerGas.length - 1], 'base fee');
    const maxPriorityFeePerGas = bigintOf(priority, 'priority fee');
    return { baseFeePerGas, maxPriorityFeePerGas, maxFeePerGas: 2n * baseFeePerGas + maxPriorityFeePerGas };
  }

  /** Gas of a call, as the node estimates it; throws EvmNodeError (with the revert) when it would revert. */
  async estimateGas(call: { from: string; to: string; data: string; value: bigint }): Promise<bigint> {
    return bigintOf(await this.call('eth_estimateGas', [{ from: call.from, to: call.to, data: call.data, value: quantity(call.value) }]), 'gas estimate');
  }

  /**
   * Why a mined transaction reverted: the same call replayed on the state before its block. Best
   * effort: the node's own words, or a plain "reverted" when it gives none.
   */
  async revertReason(call: { from: string; to: string; data: string; value: bigint; blockNumber: bigint }): Promise<string> {
    try {
      await this.call('eth_call', [{ from: call.from, to: call.to, data: call.data, value: quantity(call.value) }, quantity(call.blockNumber - 1n)]);
      return 'reverted';
    } catch (err) {
      return err instanceof EvmNodeError ? err.message.replace(/^eth_call: /, '') : 'reverted';
    }
  }

  /** Broadcasts signed bytes; returns the hash the node reports. */
  async sendRawTransaction(raw: string): Promise<string> {
    const hash = await this.call('eth_sendRawTransaction', [raw]);
    if (typeof hash !== 'string') throw new EvmNodeError('malformed eth_sendRawTransaction answer');
    return hash.toLowerCase();
  }

  /** Whether the node knows the transaction (in its pool or mined). */
  async knowsTransaction(hash: string): Promise<boolean> {
    return (await this.call('eth_getTransactionByHash', [hash])) !== null;
  }

  async receipt(hash: string): Promise<EvmReceipt | null> {
    const receipt = await this.call('eth_getTransactionReceipt', [hash]);
    if (receipt === null) return null;
    if (!isObject(receipt) || typeof receipt.blockHash !== 'string') throw new EvmNodeError('malformed receipt from the node');
    return {
      transactionHash: String(receipt.transactionHash).toLowerCase(),
      blockHash: receipt.blockHash.toLowerCase(),
      blockNumber: bigintOf(receipt.blockNumber, 'receipt block number'),
      succeeded: receipt.status === '0x1',
      gasUsed: bigintOf(receipt.gasUsed, 'gas used'),
      effectiveGasPrice: bigintOf(receipt.effectiveGasPrice, 'effective gas price'),
    };
  }
}
