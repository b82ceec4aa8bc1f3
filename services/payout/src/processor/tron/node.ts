/**
 * The Tron full node's HTTP API as the processor uses it (docs/treasury.md#tron): build a TRX
 * transfer or a TRC-20 transfer call, broadcast signed bytes, read balances, a transaction's
 * outcome and block contents. Addresses go out base58 (`visible: true`). An answer that does not
 * parse fails the call; the node's refusals of a broadcast come back as their java-tron code.
 */
import { ChainUnavailable, fetchJson, isRecord } from '@coinvoice/chains/payout-check';
import { tronAddressBytes } from '@coinvoice/chains/tron/transaction';

/** A node-built transaction as its JSON carries it (raw_data is sent back as it is, but for expiration). */
export interface NodeTransaction {
  txID: string;
  raw_data: Record<string, unknown>;
  raw_data_hex: string;
}

/** What the node knows of a transaction: nothing yet, or its block and outcome. */
export type TronOutcome =
  | { mined: false }
  | { mined: true; blockNumber: bigint; succeeded: boolean; reason: string | undefined; feeSun: bigint };

export type BroadcastResult = { accepted: true } | { accepted: false; code: string; message: string };

export class TronNodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TronNodeError';
  }
}

function nodeTransaction(value: unknown, what: string): NodeTransaction {
  if (!isRecord(value) || typeof value.txID !== 'string' || typeof value.raw_data_hex !== 'string' || !isRecord(value.raw_data)) {
    const error = isRecord(value) ? (value.Error ?? (isRecord(value.result) ? value.result.message : undefined)) : undefined;
    throw new TronNodeError(`${what}: the node built no transaction${typeof error === 'string' ? ` (${hexText(error)})` : ''}`);
  }
  return { txID: value.txID, raw_data: value.raw_data, raw_data_hex: value.raw_data_hex };
}

/** java-tron hex-encodes some messages; plain text is returned as it is. */
function hexText(text: string): string {
  return /^([0-9a-f]{2})+$/i.test(text) ? Buffer.from(text, 'hex').toString('utf8') : text;
}

const integer = (value: unknown): bigint => (typeof value === 'bigint' ? value : typeof value === 'number' && Number.isInteger(value) ? BigInt(value) : 0n);

export class TronNode {
  constructor(private readonly settings: { url: string; timeoutMs: number }) {}

  private async post(path: string, body: Record<string, unknown>): Promise<unknown> {
    return fetchJson(`${this.settings.url}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body, (_key, value: unknown) => (typeof value === 'bigint' ? Number(value) : value)),
      timeoutMs: this.settings.timeoutMs,
    });
  }

  async headBlock(): Promise<{ number: bigint; timestamp: bigint }> {
    const block = await this.post('/wallet/getnowblock', {});
    const raw = isRecord(block) && isRecord(block.block_header) && isRecord(block.block_header.raw_data) ? block.block_header.raw_data : undefined;
    if (!raw) throw new ChainUnavailable('getnowblock: no block header');
    return { number: integer(raw.number), timestamp: integer(raw.timestamp) };
  }

  /** The timestamp and transaction ids of the canonical block `number`, or undefined above the head. */
  async block(number: bigint): Promise<{ timestamp: bigint; txids: Set<string> } | undefined> {
    const block = await this.post('/wallet/getblockbynum', { num: Number(number) });
    if (!isRecord(block) || !isRecord(block.block_header) || !isRecord(block.block_header.raw_data)) return undefined;
    const txs = Array.isArray(block.transactions) ? block.transactions : [];
    return { timestamp: integer(block.block_header.raw_data.timestamp), txids: new Set(txs.flatMap((t) => (isRecord(t) && typeof t.txID === 'string' ? [t.txID] : []))) };
  }

  /** TRX balance (sun) of a base58 address; 0 for an account the chain does not know. */
  async balance(address: string): Promise<bigint> {
    const account = await this.post('/wallet/getaccount', { address, visible: true });
    return isRecord(account) ? integer(account.balance) : 0n;
  }

  /** balanceOf(holder) of a TRC-20 contract, by a constant call. */
  async tokenBalance(contract: string, holder: string): Promise<bigint> {
    const answer = await this.post('/wallet/triggerconstantcontract', {
      owner_address: holder,
      contract_address: contract,
      function_selector: 'balanceOf(address)',
      parameter: Buffer.from(tronAddressBytes(holder).slice(1)).toString('hex').padStart(64, '0'),
      visible: true,
    });
    const result = isRecord(answer) && Array.isArray(answer.constant_result) ? answer.constant_result[0] : undefined;
    if (typeof result !== 'string' || !/^[0-9a-f]{64}$/i.test(result)) throw new TronNodeError(`balanceOf of ${contract}: no result`);
    return BigInt(`0x${result}`);
  }

  async createTransfer(from: string, to: string, sun: bigint): Promise<NodeTransaction> {
    return nodeTransaction(await this.post('/wallet/createtransaction', { owner_address: from, to_address: to, amount: sun, visible: true }), 'createtransaction');
  }

  /** A TRC-20 transfer(to, amount) call of `contract` with `feeLimit` sun for energy. */
  async createTokenTransfer(contract: string, from: string, to: string, amount: bigint, feeLimit: bigint): Promise<NodeTransaction> {
    const parameter = Buffer.from(tronAddressBytes(to).slice(1)).toString('hex').padStart(64, '0') + amount.toString(16).padStart(64, '0');
    const answer = await this.post('/wallet/triggersmartcontract', {
      owner_address: from,
      contract_address: contract,
      function_selector: 'transfer(address,uint256)',
      parameter,
      fee_limit: feeLimit,
      call_value: 0,
      visible: true,
    });
    return nodeTransaction(isRecord(answer) ? answer.transaction : undefined, 'triggersmartcontract');
  }

  async broadcast(tx: NodeTransaction, signature: string): Promise<BroadcastResult> {
    const answer = await this.post('/wallet/broadcasttransaction', { ...tx, signature: [signature], visible: true });
    if (isRecord(answer) && answer.result === true) return { accepted: true };
    const code = isRecord(answer) && typeof answer.code === 'string' ? answer.code : 'UNKNOWN';
    const message = isRecord(answer) && typeof answer.message === 'string' ? hexText(answer.message) : '';
    return { accepted: false, code, message };
  }

  /** gettransactioninfobyid: `{}` until mined; then its block, fee and (a contract call's) receipt. */
  async outcome(txid: string): Promise<TronOutcome> {
    const info = await this.post('/wallet/gettransactioninfobyid', { value: txid });
    if (!isRecord(info) || info.id !== txid || info.blockNumber === undefined) return { mined: false };
    const receipt = isRecord(info.receipt) ? info.receipt : {};
    const receiptResult = typeof receipt.result === 'string' ? receipt.result : undefined;
    const failed = info.result === 'FAILED' || (receiptResult !== undefined && receiptResult !== 'SUCCESS');
    const message = typeof info.resMessage === 'string' ? hexText(info.resMessage) : undefined;
    return {
      mined: true,
      blockNumber: integer(info.blockNumber),
      succeeded: !failed,
      reason: failed ? [receiptResult, message].filter(Boolean).join(': ') || 'FAILED' : undefined,
      feeSun: integer(info.fee),
    };
  }
}
