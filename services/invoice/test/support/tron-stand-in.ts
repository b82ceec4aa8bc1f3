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
 *
 * For the payout processor (docs/treasury.md#tron) it also builds and judges REAL transactions:
 * `createtransaction` and `triggersmartcontract` answer a protobuf Transaction.raw (raw_data_hex,
 * written by its own codec, tron-wire.ts) and txID = sha256 of it; `broadcasttransaction` accepts
 * a transaction only when its txID is sha256(raw_data_hex), its 65-byte signature recovers
 * (secp256k1, the native `secp256k1` package) to the contract's owner, it has not expired, it is
 * not a duplicate and the owner holds the TRX (balances of the accounts a test funds; TRC-20
 * balances per contract). Accepted transactions go into the next mined block; a TRC-20 transfer
 * burns its energy (64,285 to a holder, 130,285 to a new one, at ENERGY_PRICE_SUN) within its
 * fee_limit or fails OUT_OF_ENERGY.
 */
import { createHash, randomBytes } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { keccak_256 } from '@noble/hashes/sha3.js';
import { base58CheckDecode, base58CheckEncode } from './independent-codecs';
import { decodeWireRaw, encodeWireRaw, type WireRaw } from './tron-wire';

/** The native secp256k1 binding (no types shipped): public-key recovery only. */
const secp256k1 = require('secp256k1') as { ecdsaRecover(sig: Uint8Array, recid: number, msg32: Uint8Array, compressed: boolean): Uint8Array };

/** Burnt by the sender of a TRX transfer to an account that does not exist yet (java-tron's CreateNewAccountFeeInSystemContract, 1 TRX). */
export const ACCOUNT_CREATION_FEE_SUN = 1_000_000n;
/** Sun per unit of energy burnt (java-tron's getEnergyFee since 2024: 210). */
export const ENERGY_PRICE_SUN = 210n;
/** Energy of a TRC-20 transfer (USDT on mainnet): to a holder, and to an address holding none. */
export const ENERGY_TO_HOLDER = 64_285n;
export const ENERGY_TO_NEW_HOLDER = 130_285n;

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
  /** A broadcast transaction: the bytes and signature it came with, served as they are. */
  signed?: { rawData: unknown; rawDataHex: string; signature: string[]; owner: string; feeSun: bigint; receipt: string; energy: bigint };
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

/** JSON with sorted keys and integers as digits (a bigint and a number of the same value agree). */
function canonicalJson(value: unknown): string {
  if (typeof value === 'bigint' || typeof value === 'number') return String(value);
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value).sort().map((key) => `${JSON.stringify(key)}:${canonicalJson((value as Record<string, unknown>)[key])}`).join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
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
  /** TRX balances (sun) by hex 41… address: the accounts a test funded and those paid since. */
  private readonly balances = new Map<string, bigint>();
  /** TRC-20 balances by contract then holder (hex 41…). */
  private readonly tokenBalances = new Map<string, Map<string, bigint>>();
  /** Accepted by broadcasttransaction, for the next mined block. */
  private pending: TronTx[] = [];
  /** Every transaction id accepted or served, for DUP_TRANSACTION_ERROR. */
  private readonly seen = new Set<string>();
  /** Added to the wall clock: a test moves time past an expiration without waiting. */
  clockShiftMs = 0;
  /** none; hold: a broadcast is never answered nor taken; accept_no_answer: taken, never answered; drop: answered as accepted, never taken. */
  broadcastFault: 'none' | 'hold' | 'accept_no_answer' | 'drop' = 'none';
  /** Broadcasts a fault held so far. */
  heldBroadcasts = 0;
  /** Broadcasts refused, by code (a test reads why). */
  readonly refusals: Array<{ code: string; message: string }> = [];
  /** Every API path asked, in order (a test counts what a block cost). */
  readonly paths: string[] = [];

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

  /** The stand-in's time (ms): block timestamps and expiration checks read it. */
  now(): number {
    return Date.now() + this.clockShiftMs;
  }

  fund(address: string, sun: bigint): void {
    const hex = tronHex(address);
    this.balances.set(hex, (this.balances.get(hex) ?? 0n) + sun);
  }

  balanceOf(address: string): bigint {
    return this.balances.get(tronHex(address)) ?? 0n;
  }

  fundToken(contract: string, holder: string, amount: bigint): void {
    const holders = this.tokenBalances.get(tronHex(contract)) ?? new Map<string, bigint>();
    holders.set(tronHex(holder), (holders.get(tronHex(holder)) ?? 0n) + amount);
    this.tokenBalances.set(tronHex(contract), holders);
  }

  tokenBalanceOf(contract: string, holder: string): bigint {
    return this.tokenBalances.get(tronHex(contract))?.get(tronHex(holder)) ?? 0n;
  }

  /** Mines a block every `ms` until the returned function is called. */
  mineEvery(ms: number): () => void {
    const timer = setInterval(() => this.mine([]), ms);
    return () => clearInterval(timer);
  }

  /** Transactions accepted and not yet mined. */
  get pendingCount(): number {
    return this.pending.length;
  }

  /** Mined transactions (broadcast ones) paying `to` (base58), TRX or TRC-20. */
  paymentsTo(to: string): TronTx[] {
    const hex = tronHex(to);
    return this.blocks.flatMap((b) => b.txs).filter((t) => t.signed && t.to === hex);
  }

  mine(txs: TronTx[]): TronBlock {
    txs = [...txs, ...this.pending];
    this.pending = [];
    const number = this.blocks.length;
    const parentHash = this.tip?.blockID ?? '0'.repeat(64);
    const digest = createHash('sha256').update(`${number}:${parentHash}:${this.forks}:${txs.map((t) => t.txID).join(',')}`).digest('hex');
    const blockID = number.toString(16).padStart(16, '0') + digest.slice(16);
    const block = { blockID, number, parentHash, timestamp: Math.max(this.now(), (this.tip?.timestamp ?? 0) + 1), txs };
    this.blocks.push(block);
    return block;
  }

  private txJson(tx: TronTx, block: TronBlock) {
    if (tx.signed) {
      return { ret: [{ contractRet: tx.signed.receipt }], signature: tx.signed.signature, txID: tx.txID, raw_data: tx.signed.rawData, raw_data_hex: tx.signed.rawDataHex };
    }
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
    if (tx.signed) {
      const signed = tx.signed;
      return {
        id: tx.txID,
        fee: signed.feeSun,
        blockNumber: block.number,
        blockTimeStamp: block.timestamp,
        ...(call ? { contractResult: [tx.success ? word(1) : ''], contract_address: tx.trc20Contract } : {}),
        receipt: call ? { energy_fee: signed.feeSun, energy_usage_total: signed.energy, net_usage: 345, result: signed.receipt } : { net_usage: 268 },
        ...(call && tx.success && tx.logs ? { log: tx.logs } : {}),
        ...(tx.success ? {} : { result: 'FAILED', resMessage: Buffer.from(signed.receipt).toString('hex') }),
      };
    }
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
      this.paths.push(path);
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
      if (path === '/wallet/createtransaction') return this.send(res, 200, this.createTransaction(input));
      if (path === '/wallet/triggersmartcontract') return this.send(res, 200, this.triggerSmartContract(input));
      if (path === '/wallet/broadcasttransaction') {
        // A test's fault: the request never answered, and (accept_no_answer) the transaction taken all the same.
        if (this.broadcastFault === 'drop') {
          // Answered as accepted and lost (a node restarted, its pool dropped it): never mined.
          this.heldBroadcasts++;
          return this.send(res, 200, { result: true, txid: input.txID });
        }
        if (this.broadcastFault !== 'none') {
          this.heldBroadcasts++;
          if (this.broadcastFault === 'accept_no_answer') this.broadcast(input);
          return;
        }
        return this.send(res, 200, this.broadcast(input));
      }
      if (path === '/wallet/triggerconstantcontract') {
        // balanceOf(address) of a TRC-20 contract the stand-in keeps balances of.
        const contract = this.inputAddress(input.contract_address, input.visible);
        const parameter = typeof input.parameter === 'string' ? input.parameter : '';
        if (!contract || input.function_selector !== 'balanceOf(address)' || !/^0{24}[0-9a-f]{40}$/.test(parameter)) {
          return this.send(res, 200, { result: { code: 'OTHER_ERROR', message: Buffer.from('only balanceOf(address) is served').toString('hex') } });
        }
        const balance = this.tokenBalances.get(contract)?.get(`41${parameter.slice(24)}`) ?? 0n;
        return this.send(res, 200, { result: { result: true }, constant_result: [word(balance)] });
      }
      if (path === '/wallet/getaccount') {
        const hex = this.inputAddress(input.address, input.visible);
        const balance = hex === undefined ? undefined : this.balances.get(hex);
        return this.send(res, 200, balance === undefined ? {} : { address: input.address, balance });
      }
      if (path === '/wallet/gettransactioninfobyid') {
        const mined = this.minedTx(input.value);
        return this.send(res, 200, mined ? this.txInfoJson(mined.tx, mined.block) : {});
      }
      return this.send(res, 404, { Error: `unknown path ${path}` });
    });
  }

  /** An address as the API takes it: base58 with `visible: true`, hex 41… otherwise. */
  private inputAddress(value: unknown, visible: unknown): string | undefined {
    if (typeof value !== 'string') return undefined;
    if (visible === true) {
      const payload = base58CheckDecode(value);
      return payload && payload.length === 21 && payload[0] === 0x41 ? payload.toString('hex') : undefined;
    }
    return /^41[0-9a-f]{40}$/i.test(value) ? value.toLowerCase() : undefined;
  }

  /** raw_data as java-tron's JSON writes it (addresses base58 when visible, hex otherwise). */
  private rawJson(raw: WireRaw, visible: boolean) {
    const address = (hex: string) => (visible ? base58CheckEncode(Buffer.from(hex, 'hex')) : hex);
    const transfer = raw.type === 'TransferContract';
    const value = transfer
      ? { amount: raw.amount, owner_address: address(raw.owner), to_address: address(raw.to) }
      : { data: raw.data, owner_address: address(raw.owner), contract_address: address(raw.to), ...(raw.amount > 0n ? { call_value: raw.amount } : {}) };
    return {
      contract: [{ parameter: { value, type_url: `type.googleapis.com/protocol.${raw.type}` }, type: raw.type }],
      ref_block_bytes: raw.refBlockBytes,
      ref_block_hash: raw.refBlockHash,
      expiration: raw.expiration,
      ...(raw.feeLimit > 0 ? { fee_limit: raw.feeLimit } : {}),
      timestamp: raw.timestamp,
    };
  }

  /** A transaction over the tip (TaPoS: its number's bytes 6..8 and hash bytes 8..16), expiring in 60 s as java-tron's do. */
  private built(fields: Pick<WireRaw, 'type' | 'owner' | 'to' | 'amount' | 'data' | 'feeLimit'>, visible: boolean) {
    const tip = this.tip;
    const raw: WireRaw = { ...fields, refBlockBytes: tip.blockID.slice(12, 16), refBlockHash: tip.blockID.slice(16, 32), expiration: tip.timestamp + 60_000, timestamp: this.now() };
    const bytes = encodeWireRaw(raw);
    return { visible, txID: createHash('sha256').update(bytes).digest('hex'), raw_data: this.rawJson(raw, visible), raw_data_hex: bytes.toString('hex') };
  }

  private createTransaction(input: Record<string, unknown>) {
    const owner = this.inputAddress(input.owner_address, input.visible);
    const to = this.inputAddress(input.to_address, input.visible);
    if (!owner || !to || typeof input.amount !== 'number' || !(input.amount > 0)) return { Error: 'class java.lang.IllegalArgumentException : invalid owner_address, to_address or amount' };
    if ((this.balances.get(owner) ?? 0n) < BigInt(input.amount)) {
      return { Error: `class org.tron.core.exception.ContractValidateException : Validate TransferContract error, balance is not sufficient.` };
    }
    return this.built({ type: 'TransferContract', owner, to, amount: BigInt(input.amount), data: '', feeLimit: 0 }, input.visible === true);
  }

  private triggerSmartContract(input: Record<string, unknown>) {
    const owner = this.inputAddress(input.owner_address, input.visible);
    const contract = this.inputAddress(input.contract_address, input.visible);
    if (!owner || !contract || typeof input.function_selector !== 'string' || typeof input.parameter !== 'string') {
      return { result: { code: 'OTHER_ERROR', message: Buffer.from('invalid owner_address, contract_address, function_selector or parameter').toString('hex') } };
    }
    const data = keccakHex(input.function_selector).slice(0, 8) + input.parameter;
    const callValue = BigInt(typeof input.call_value === 'number' ? input.call_value : 0);
    const feeLimit = typeof input.fee_limit === 'number' ? input.fee_limit : 0;
    return { result: { result: true }, transaction: this.built({ type: 'TriggerSmartContract', owner, to: contract, amount: callValue, data, feeLimit }, input.visible === true) };
  }

  private refuse(code: string, text: string, txid: string) {
    this.refusals.push({ code, message: text });
    return { code, txid, message: Buffer.from(text).toString('hex') };
  }

  /** java-tron's checks, in its order: the signature, TaPoS, expiration, duplicate, then the contract. */
  private broadcast(input: Record<string, unknown>) {
    const txid = typeof input.txID === 'string' ? input.txID : '';
    const rawHex = typeof input.raw_data_hex === 'string' ? input.raw_data_hex : '';
    const signatures = Array.isArray(input.signature) ? (input.signature as unknown[]) : [];
    let raw: WireRaw;
    try {
      raw = decodeWireRaw(Buffer.from(rawHex, 'hex'));
    } catch (err) {
      return this.refuse('OTHER_ERROR', `raw_data_hex does not parse: ${(err as Error).message}`, txid);
    }
    const digest = createHash('sha256').update(Buffer.from(rawHex, 'hex')).digest();
    if (digest.toString('hex') !== txid) return this.refuse('OTHER_ERROR', 'txID is not sha256(raw_data)', txid);
    // java-tron builds the transaction from the JSON raw_data: it must say what the bytes say.
    if (canonicalJson(this.rawJson(raw, input.visible === true)) !== canonicalJson(input.raw_data)) {
      return this.refuse('OTHER_ERROR', 'raw_data does not match raw_data_hex', txid);
    }
    const signature = typeof signatures[0] === 'string' ? Buffer.from(signatures[0], 'hex') : Buffer.alloc(0);
    let signer: string | undefined;
    if (signatures.length === 1 && signature.length === 65) {
      const v = signature[64]!;
      const recid = v >= 27 ? v - 27 : v;
      try {
        const key = secp256k1.ecdsaRecover(signature.subarray(0, 64), recid, digest, false);
        signer = `41${Buffer.from(keccak_256(key.subarray(1))).subarray(12).toString('hex')}`;
      } catch {
        signer = undefined;
      }
    }
    if (signer !== raw.owner) return this.refuse('SIGERROR', `validate signature error: the signature is not ${raw.owner}'s`, txid);
    const ref = [...this.blocks, ...this.forked].find((b) => b.blockID.slice(12, 16) === raw.refBlockBytes && b.blockID.slice(16, 32) === raw.refBlockHash);
    if (!ref) return this.refuse('TAPOS_ERROR', 'Tapos check error', txid);
    const now = this.now();
    if (raw.expiration <= now || raw.expiration > now + 24 * 3_600_000) {
      return this.refuse('TRANSACTION_EXPIRATION_ERROR', `Transaction expiration, transaction expiration time is ${raw.expiration}, but head block time is ${now}`, txid);
    }
    if (this.seen.has(txid)) return this.refuse('DUP_TRANSACTION_ERROR', 'dup transaction', txid);
    const balance = this.balances.get(raw.owner) ?? 0n;
    if (raw.type === 'TransferContract') {
      // Paying an account the chain does not know creates it: the sender burns ACCOUNT_CREATION_FEE_SUN.
      const creation = this.balances.has(raw.to) ? 0n : ACCOUNT_CREATION_FEE_SUN;
      if (balance < raw.amount + creation) return this.refuse('CONTRACT_VALIDATE_ERROR', 'Validate TransferContract error, balance is not sufficient.', txid);
      this.balances.set(raw.owner, balance - raw.amount - creation);
      this.balances.set(raw.to, (this.balances.get(raw.to) ?? 0n) + raw.amount);
      this.accept({ txID: txid, to: raw.to, amountSun: Number(raw.amount), success: true, signed: { rawData: input.raw_data, rawDataHex: rawHex, signature: [signature.toString('hex')], owner: raw.owner, feeSun: creation, receipt: 'SUCCESS', energy: 0n } });
    } else {
      if (raw.amount > 0n) return this.refuse('CONTRACT_VALIDATE_ERROR', 'call_value is not taken by this stand-in', txid);
      if (balance < BigInt(raw.feeLimit)) return this.refuse('CONTRACT_VALIDATE_ERROR', 'balance is not sufficient to pay fee_limit', txid);
      const call = /^a9059cbb0{24}([0-9a-f]{40})([0-9a-f]{64})$/.exec(raw.data);
      const holders = this.tokenBalances.get(raw.to);
      const to = call ? `41${call[1]}` : raw.to;
      const amount = call ? BigInt(`0x${call[2]}`) : 0n;
      const energy = holders?.get(to) ? ENERGY_TO_HOLDER : ENERGY_TO_NEW_HOLDER;
      const cost = energy * ENERGY_PRICE_SUN;
      const outOfEnergy = cost > BigInt(raw.feeLimit);
      const reverted = !call || !holders || (holders.get(raw.owner) ?? 0n) < amount;
      const receipt = outOfEnergy ? 'OUT_OF_ENERGY' : reverted ? 'REVERT' : 'SUCCESS';
      // A failed call still burns: all of fee_limit when energy runs out, the energy used when it reverts.
      const burnt = outOfEnergy ? BigInt(raw.feeLimit) : cost;
      this.balances.set(raw.owner, balance - burnt);
      if (receipt === 'SUCCESS') {
        holders!.set(raw.owner, holders!.get(raw.owner)! - amount);
        holders!.set(to, (holders!.get(to) ?? 0n) + amount);
      }
      const logs = receipt === 'SUCCESS' ? [transferLog(raw.to, raw.owner, to, amount)] : [];
      this.accept({ txID: txid, to, amountSun: Number(amount), success: receipt === 'SUCCESS', trc20Contract: raw.to, callData: raw.data, logs, signed: { rawData: input.raw_data, rawDataHex: rawHex, signature: [signature.toString('hex')], owner: raw.owner, feeSun: burnt, receipt, energy: outOfEnergy ? BigInt(raw.feeLimit) / ENERGY_PRICE_SUN : energy } });
    }
    return { result: true, txid };
  }

  private accept(tx: TronTx): void {
    this.seen.add(tx.txID);
    this.pending.push(tx);
  }

  private send(res: ServerResponse, status: number, body: unknown): void {
    res.writeHead(status, { 'content-type': 'application/json' });
    // An exact amount text is carried as a bigint and written as bare digits, as java-tron does.
    const text = JSON.stringify(body, (_key, value: unknown) => (typeof value === 'bigint' ? `${EXACT_INTEGER}${value}` : value));
    res.end(text.replace(new RegExp(`"${EXACT_INTEGER}(\\d+)"`, 'g'), '$1'));
  }
}
