/**
 * A protocol-level stand-in for a Tron full node's HTTP API (java-tron `/wallet/*`), NOT a node:
 * no Tron node installs on these machines. Blocks and TransferContract transactions in the API's
 * JSON shapes (blockID = 8-byte number ‖ 24 bytes of hash, block_header.raw_data, txID, ret,
 * raw_data.contract[].parameter.value with hex 41… addresses and amounts in sun); signatures are
 * random bytes, not verified by anyone. Plays mining, failed transactions, reorgs and outages. Also
 * serves one transaction by id (`gettransactionbyid`, `gettransactioninfobyid`: `{}` until mined),
 * and TRC-20 contract calls (TriggerSmartContract) beside TRX transfers: a token's
 * `transfer(to, amount)` and a batch-payout contract's call that makes the token emit one Transfer
 * per recipient. Their execution results are TransactionInfos as java-tron writes them
 * (`gettransactioninfobyid`, and per block `gettransactioninfobyblocknum`): `receipt.result`,
 * `log[]` with the emitting contract as 20 bytes of hex without 41, topics and data as bare hex —
 * the Transfer topic is keccak-256 of the event's signature, computed here, and the addresses in
 * topics are the base58 addresses decoded. A reverted call has no log and `result: "FAILED"`.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { base58CheckDecode } from './independent-codecs';

/** A log as java-tron's TransactionInfo carries it. */
interface TronLog {
  /** The emitting contract: 20 bytes of hex, no 41. */
  address: string;
  topics: string[];
  data: string;
}

interface TronTx {
  txID: string;
  to: string;
  /** Sun for TRX; the token's base units for a TRC-20 transfer. */
  amountSun: number;
  success: boolean;
  /** Set for a smart contract call (TriggerSmartContract) of this contract (hex 41…) instead of a TRX transfer. */
  trc20Contract?: string;
  /** The call's data (hex): `transfer(to, amount)` unless set. */
  callData?: string;
  /** The events the call emits when it succeeds (a reverted call emits none). */
  logs?: TronLog[];
  /** The amount's JSON text when it is past 2^53 (java-tron writes int64 digits a double cannot hold). */
  amountText?: string;
}

interface TronBlock {
  blockID: string;
  number: number;
  parentHash: string;
  timestamp: number;
  txs: TronTx[];
}

/** Hex (41…) form of a base58 Tron address, as the full node's JSON spells it. */
export function tronHex(address: string): string {
  const payload = base58CheckDecode(address);
  if (!payload || payload.length !== 21 || payload[0] !== 0x41) throw new Error(`not a Tron address: ${address}`);
  return Buffer.from(payload).toString('hex');
}

/** keccak-256 of a signature, bare hex: an event's topic, or (first 4 bytes) a function's selector. */
function keccakHex(signature: string): string {
  return Buffer.from(keccak_256(Buffer.from(signature))).toString('hex');
}

/** One 32-byte ABI word (bare hex) of an unsigned integer. */
function word(value: bigint | number): string {
  return BigInt(value).toString(16).padStart(64, '0');
}

/** One 32-byte ABI word of a Tron address (hex 41…): its 20 bytes, left-padded. */
function addressWord(hex41: string): string {
  return hex41.slice(2).padStart(64, '0');
}

/** The Transfer(address,address,uint256) event of `contract` (hex 41…), as its log. */
function transferLog(contract: string, fromHex41: string, toHex41: string, amount: bigint): TronLog {
  return { address: contract.slice(2), topics: [keccakHex('Transfer(address,address,uint256)'), addressWord(fromHex41), addressWord(toHex41)], data: word(amount) };
}

/** Marks a bigint in the JSON being written, to be replaced by its bare digits. */
const EXACT_INTEGER = 'exact-integer:';

export class TronStandIn {
  readonly blocks: TronBlock[] = [];
  down = false;
  /** Reorgs so far: a block mined after one never has the id of the block it replaced. */
  private forks = 0;
  /** Blocks a reorg dropped: still known by id. */
  private readonly forked: TronBlock[] = [];
  private readonly sockets = new Set<Socket>();
  private readonly from = `41${randomBytes(20).toString('hex')}`;

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<TronStandIn> {
    let standIn: TronStandIn | undefined;
    const server = createServer((req, res) => standIn!.handle(req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    standIn = new TronStandIn(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.on('connection', (socket) => {
      standIn!.sockets.add(socket);
      socket.on('close', () => standIn!.sockets.delete(socket));
    });
    for (let i = 0; i < 3; i++) standIn.mine([]);
    return standIn;
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  get tip(): TronBlock {
    return this.blocks[this.blocks.length - 1]!;
  }

  transfer(to: string, amountSun: number, success = true): TronTx {
    return { txID: randomBytes(32).toString('hex'), to: tronHex(to), amountSun, success };
  }

  /** Writes the TRX amount of `tx` as exactly this integer text (past 2^53). */
  setAmountText(tx: TronTx, digits: string): void {
    tx.amountText = digits;
  }

  /** A TRC-20 `transfer(to, amount)` of the token at `contract` (base58): its Transfer event when it succeeds. */
  trc20Transfer(contract: string, to: string, amount: number, success = true): TronTx {
    const token = tronHex(contract);
    const tx = { ...this.transfer(to, amount, success), trc20Contract: token };
    return { ...tx, logs: [transferLog(token, this.from, tx.to, BigInt(amount))] };
  }

  /**
   * A batch-payout contract's call (`batchTransfer(address token, address[] to, uint256[] amounts)`,
   * as payment processors and exchanges send): the token emits one Transfer per payment, then the
   * batch contract its own event. One transaction, several Transfer logs.
   */
  batchTransfer(batchContract: string, token: string, payments: Array<{ to: string; amount: bigint }>, success = true): TronTx {
    const batch = tronHex(batchContract);
    const tokenHex = tronHex(token);
    const recipients = payments.map((p) => tronHex(p.to));
    const n = payments.length;
    // ABI: the token, the two arrays' offsets (3 head words, then the first array: length + n words), then each array.
    const callData =
      keccakHex('batchTransfer(address,address[],uint256[])').slice(0, 8) +
      addressWord(tokenHex) + word(3 * 32) + word((3 + 1 + n) * 32) +
      word(n) + recipients.map(addressWord).join('') +
      word(n) + payments.map((p) => word(p.amount)).join('');
    const total = payments.reduce((sum, p) => sum + p.amount, 0n);
    const logs = [
      ...payments.map((p, i) => transferLog(tokenHex, this.from, recipients[i]!, p.amount)),
      { address: batch.slice(2), topics: [keccakHex('BatchPaid(address,uint256)'), addressWord(tokenHex)], data: word(total) },
    ];
    return { txID: randomBytes(32).toString('hex'), to: recipients[0]!, amountSun: 0, success, trc20Contract: batch, callData, logs };
  }

  /**
   * Drops the blocks from `height` up (a reorg: the chain continues from height - 1 with new
   * blocks). Like java-tron, which keeps recent fork blocks (KhaosDB), the dropped blocks are still
   * served by id; by number, only the canonical chain.
   */
  reorg(height: number): void {
    this.forked.push(...this.blocks.splice(height));
    this.forks++;
  }

  mine(txs: TronTx[]): TronBlock {
    const number = this.blocks.length;
    const parentHash = this.tip?.blockID ?? '0'.repeat(64);
    const digest = createHash('sha256').update(`${number}:${parentHash}:${this.forks}:${txs.map((t) => t.txID).join(',')}`).digest('hex');
    const blockID = number.toString(16).padStart(16, '0') + digest.slice(16);
    const block = { blockID, number, parentHash, timestamp: Math.max(Date.now(), (this.tip?.timestamp ?? 0) + 1), txs };
    this.blocks.push(block);
    return block;
  }

  private txJson(tx: TronTx, block: TronBlock) {
    const contract = tx.trc20Contract
      ? {
          parameter: {
            // transfer(address,uint256): selector, the 20-byte address and the amount, each in a 32-byte word.
            value: { data: tx.callData ?? `a9059cbb${addressWord(tx.to)}${word(tx.amountSun)}`, owner_address: this.from, contract_address: tx.trc20Contract },
            type_url: 'type.googleapis.com/protocol.TriggerSmartContract',
          },
          type: 'TriggerSmartContract',
        }
      : {
          parameter: { value: { amount: tx.amountText ? BigInt(tx.amountText) : tx.amountSun, owner_address: this.from, to_address: tx.to }, type_url: 'type.googleapis.com/protocol.TransferContract' },
          type: 'TransferContract',
        };
    const rawData = {
      contract: [contract],
      ref_block_bytes: block.blockID.slice(12, 16),
      ref_block_hash: block.parentHash.slice(16, 32),
      expiration: block.timestamp + 60_000,
      timestamp: block.timestamp - 1_000,
      ...(tx.trc20Contract ? { fee_limit: 100_000_000 } : {}),
    };
    return {
      ret: [{ contractRet: tx.success ? 'SUCCESS' : tx.trc20Contract ? 'REVERT' : 'OUT_OF_ENERGY' }],
      signature: [randomBytes(65).toString('hex')],
      txID: tx.txID,
      raw_data: rawData,
      raw_data_hex: Buffer.from(JSON.stringify(rawData, (_key, value: unknown) => (typeof value === 'bigint' ? value.toString() : value))).toString('hex'),
    };
  }

  /**
   * `gettransactioninfobyid`'s answer for a mined transaction (a contract call adds its receipt's
   * result, its return value and, when it succeeded, its logs; java-tron leaves out empty fields).
   */
  private txInfoJson(tx: TronTx, block: TronBlock) {
    const call = tx.trc20Contract !== undefined;
    return {
      id: tx.txID,
      fee: call ? 6_432_000 : 1_100_000,
      blockNumber: block.number,
      blockTimeStamp: block.timestamp,
      // A `transfer` returns true (one word); a reverted call returns its revert data.
      contractResult: [call && tx.success ? word(1) : ''],
      ...(call ? { contract_address: tx.trc20Contract } : {}),
      receipt: call ? { energy_usage_total: 29_631, net_usage: 345, result: tx.success ? 'SUCCESS' : 'REVERT' } : { net_usage: 268 },
      ...(call && tx.success && tx.logs && tx.logs.length > 0 ? { log: tx.logs } : {}),
      ...(tx.success ? {} : { result: 'FAILED', resMessage: Buffer.from('REVERT opcode executed').toString('hex') }),
    };
  }

  private minedTx(txID: unknown): { tx: TronTx; block: TronBlock } | undefined {
    for (const block of this.blocks) {
      const tx = block.txs.find((t) => t.txID === txID);
      if (tx) return { tx, block };
    }
    return undefined;
  }

  private blockJson(block: TronBlock) {
    return {
      blockID: block.blockID,
      block_header: {
        raw_data: {
          number: block.number,
          txTrieRoot: '0'.repeat(64),
          witness_address: `41${'ab'.repeat(20)}`,
          parentHash: block.parentHash,
          version: 30,
          timestamp: block.timestamp,
        },
        witness_signature: randomBytes(65).toString('hex'),
      },
      ...(block.txs.length > 0 ? { transactions: block.txs.map((t) => this.txJson(t, block)) } : {}),
    };
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += chunk.toString()));
    req.on('end', () => {
      if (this.down) return this.send(res, 503, { Error: 'stand-in is down' });
      const input = (body ? JSON.parse(body) : {}) as Record<string, unknown>;
      const path = new URL(req.url ?? '/', 'http://stand-in').pathname;
      if (path === '/wallet/getnowblock') return this.send(res, 200, this.blockJson(this.tip));
      if (path === '/wallet/getblockbynum') {
        const block = this.blocks[Number(input.num)];
        return this.send(res, 200, block ? this.blockJson(block) : {});
      }
      if (path === '/wallet/getblockbyid') {
        const block = this.blocks.find((b) => b.blockID === input.value) ?? this.forked.find((b) => b.blockID === input.value);
        return this.send(res, 200, block ? this.blockJson(block) : {});
      }
      if (path === '/wallet/gettransactioninfobyblocknum') {
        // java-tron: `{}` for num <= 0; `[]` for an empty block and for a height it does not have.
        const num = Number(input.num);
        if (!(num > 0)) return this.send(res, 200, {});
        const block = this.blocks[num];
        return this.send(res, 200, block ? block.txs.map((t) => this.txInfoJson(t, block)) : []);
      }
      if (path === '/wallet/gettransactionbyid') {
        const mined = this.minedTx(input.value);
        return this.send(res, 200, mined ? this.txJson(mined.tx, mined.block) : {});
      }
      if (path === '/wallet/gettransactioninfobyid') {
        const mined = this.minedTx(input.value);
        return this.send(res, 200, mined ? this.txInfoJson(mined.tx, mined.block) : {});
      }
      return this.send(res, 404, { Error: `unknown path ${path}` });
    });
  }

  private send(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' });
    // An exact amount text is carried as a bigint and written as bare digits, as java-tron does.
    const text = JSON.stringify(body, (_key, value: unknown) => (typeof value === 'bigint' ? `${EXACT_INTEGER}${value}` : value));
    res.end(text.replace(new RegExp(`"${EXACT_INTEGER}(\\d+)"`, 'g'), '$1'));
  }
}
