/**
 * A protocol-level stand-in for a Tron full node's HTTP API (java-tron `/wallet/*`), NOT a node:
 * no Tron node installs on these machines. Blocks and TransferContract transactions in the API's
 * JSON shapes (blockID = 8-byte number ‖ 24 bytes of hash, block_header.raw_data, txID, ret,
 * raw_data.contract[].parameter.value with hex 41… addresses and amounts in sun); signatures are
 * random bytes, not verified by anyone. Plays mining, failed transactions and outages. Also serves
 * one transaction by id (`gettransactionbyid`, `gettransactioninfobyid`: `{}` until mined), and
 * TRC-20 `transfer` calls (TriggerSmartContract) beside TRX transfers.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { base58CheckDecode } from './independent-codecs';

interface TronTx {
  txID: string;
  to: string;
  /** Sun for TRX; the token's base units for a TRC-20 transfer. */
  amountSun: number;
  success: boolean;
  /** Set for a TRC-20 `transfer(to, amount)` call of this contract (hex 41…) instead of a TRX transfer. */
  trc20Contract?: string;
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

/** Marks a bigint in the JSON being written, to be replaced by its bare digits. */
const EXACT_INTEGER = 'exact-integer:';

export class TronStandIn {
  readonly blocks: TronBlock[] = [];
  down = false;
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

  /** A TRC-20 `transfer(to, amount)` of the token at `contract` (base58). */
  trc20Transfer(contract: string, to: string, amount: number, success = true): TronTx {
    return { ...this.transfer(to, amount, success), trc20Contract: tronHex(contract) };
  }

  mine(txs: TronTx[]): TronBlock {
    const number = this.blocks.length;
    const parentHash = this.tip?.blockID ?? '0'.repeat(64);
    const digest = createHash('sha256').update(`${number}:${parentHash}:${txs.map((t) => t.txID).join(',')}`).digest('hex');
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
            value: { data: `a9059cbb${tx.to.slice(2).padStart(64, '0')}${tx.amountSun.toString(16).padStart(64, '0')}`, owner_address: this.from, contract_address: tx.trc20Contract },
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

  /** `gettransactioninfobyid`'s answer for a mined transaction (a TRC-20 call adds its receipt's result and log). */
  private txInfoJson(tx: TronTx, block: TronBlock) {
    return {
      id: tx.txID,
      fee: 1_100_000,
      blockNumber: block.number,
      blockTimeStamp: block.timestamp,
      contractResult: [''],
      receipt: tx.trc20Contract ? { energy_usage_total: 29_631, net_usage: 345, result: tx.success ? 'SUCCESS' : 'REVERT' } : { net_usage: 268 },
      ...(tx.trc20Contract ? { contract_address: tx.trc20Contract } : {}),
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
        const block = this.blocks.find((b) => b.blockID === input.value);
        return this.send(res, 200, block ? this.blockJson(block) : {});
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
