/**
 * Tron transactions as the signer reads them (docs/treasury.md#tron): a small protobuf codec of the
 * few java-tron messages a payout uses (protocol.Transaction.raw, Transaction.Contract,
 * google.protobuf.Any, TransferContract, TriggerSmartContract), its txID (sha256 of the raw
 * bytes), and the TRC-20 `transfer(address,uint256)` call data. The decoder is strict: a field it
 * does not know (a memo, scripts, another permission, auths) is refused, so what the signer checks
 * is everything the network executes.
 *
 * Wire format: https://protobuf.dev/programming-guides/encoding/ ; message numbers from java-tron's
 * protocol/src/main/protos/core/Tron.proto and core/contract/{balance,smart}_contract.proto.
 */
import { createHash } from 'node:crypto';
import { base58check } from '../base58check';
import { TRON_ADDRESS_PREFIX } from './coins';

export const TRANSFER_CONTRACT_TYPE = 1;
export const TRIGGER_SMART_CONTRACT_TYPE = 31;
const TYPE_URL: Record<number, string> = {
  [TRANSFER_CONTRACT_TYPE]: 'type.googleapis.com/protocol.TransferContract',
  [TRIGGER_SMART_CONTRACT_TYPE]: 'type.googleapis.com/protocol.TriggerSmartContract',
};

/** A TRX transfer: amounts in sun (1 TRX = 10^6 sun). Addresses base58 ("T…"). */
export interface TransferContract {
  type: 'TransferContract';
  owner: string;
  to: string;
  amount: bigint;
}

/** A smart-contract call; `data` lower-case hex without 0x. */
export interface TriggerSmartContract {
  type: 'TriggerSmartContract';
  owner: string;
  contract: string;
  callValue: bigint;
  data: string;
}

export type TronContract = TransferContract | TriggerSmartContract;

/** protocol.Transaction.raw, of one contract (the only shape a payout has). */
export interface TronRawTransaction {
  refBlockBytes: Uint8Array;
  refBlockHash: Uint8Array;
  /** Unix milliseconds after which the network refuses the transaction. */
  expiration: bigint;
  timestamp: bigint;
  /** Sun the call may burn for energy; 0 (absent) for a TRX transfer. */
  feeLimit: bigint;
  contract: TronContract;
}

export class TronCodecError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'TronCodecError';
  }
}

// --- addresses -----------------------------------------------------------------------------------

/** The 21 bytes (0x41 ‖ 20) of a base58 Tron address. */
export function tronAddressBytes(address: string): Uint8Array {
  const payload = base58check.decode(address);
  if (payload.length !== 21 || payload[0] !== TRON_ADDRESS_PREFIX) throw new TronCodecError(`not a Tron address: ${address}`);
  return payload;
}

function addressOf(bytes: Uint8Array, field: string): string {
  if (bytes.length !== 21 || bytes[0] !== TRON_ADDRESS_PREFIX) throw new TronCodecError(`${field} is not a 21-byte Tron address`);
  return base58check.encode(bytes);
}

// --- wire format ---------------------------------------------------------------------------------

const VARINT = 0;
const LENGTH_DELIMITED = 2;

function varint(value: bigint): number[] {
  if (value < 0n) throw new TronCodecError('negative integers are not written here');
  const out: number[] = [];
  let rest = value;
  do {
    const byte = Number(rest & 0x7fn);
    rest >>= 7n;
    out.push(rest > 0n ? byte | 0x80 : byte);
  } while (rest > 0n);
  return out;
}

function tag(field: number, wireType: number): number[] {
  return varint(BigInt((field << 3) | wireType));
}

function intField(field: number, value: bigint): number[] {
  return value === 0n ? [] : [...tag(field, VARINT), ...varint(value)];
}

function bytesField(field: number, value: Uint8Array): number[] {
  return value.length === 0 ? [] : [...tag(field, LENGTH_DELIMITED), ...varint(BigInt(value.length)), ...value];
}

type FieldValue = { wireType: typeof VARINT; value: bigint } | { wireType: typeof LENGTH_DELIMITED; value: Uint8Array };

/** The fields of one message by number; a repeated field, another wire type or an unknown number is refused. */
function readMessage(bytes: Uint8Array, name: string, known: Record<number, typeof VARINT | typeof LENGTH_DELIMITED>): Map<number, FieldValue> {
  const fields = new Map<number, FieldValue>();
  let at = 0;
  const readVarint = (): bigint => {
    let value = 0n;
    for (let shift = 0n; shift < 70n; shift += 7n) {
      if (at >= bytes.length) throw new TronCodecError(`${name}: truncated varint`);
      const byte = bytes[at++]!;
      value |= BigInt(byte & 0x7f) << shift;
      if ((byte & 0x80) === 0) return value;
    }
    throw new TronCodecError(`${name}: varint too long`);
  };
  while (at < bytes.length) {
    const key = readVarint();
    const field = Number(key >> 3n);
    const wireType = Number(key & 7n);
    if (known[field] === undefined) throw new TronCodecError(`${name}: field ${field} is not signed here`);
    if (known[field] !== wireType) throw new TronCodecError(`${name}: field ${field} has wire type ${wireType}`);
    if (fields.has(field)) throw new TronCodecError(`${name}: field ${field} repeats`);
    if (wireType === VARINT) {
      fields.set(field, { wireType: VARINT, value: readVarint() });
    } else {
      const length = Number(readVarint());
      if (at + length > bytes.length) throw new TronCodecError(`${name}: field ${field} runs past the end`);
      fields.set(field, { wireType: LENGTH_DELIMITED, value: bytes.slice(at, at + length) });
      at += length;
    }
  }
  return fields;
}

function intOf(fields: Map<number, FieldValue>, field: number): bigint {
  const found = fields.get(field);
  if (!found) return 0n;
  if (found.wireType !== VARINT) throw new TronCodecError(`field ${field} is not an integer`);
  // int64 on the wire: a negative value is a ten-byte two's complement, never a valid amount here.
  if (found.value >= 2n ** 63n) throw new TronCodecError(`field ${field} is negative`);
  return found.value;
}

function bytesOf(fields: Map<number, FieldValue>, field: number): Uint8Array {
  const found = fields.get(field);
  if (!found) return new Uint8Array();
  if (found.wireType !== LENGTH_DELIMITED) throw new TronCodecError(`field ${field} is not bytes`);
  return found.value;
}

// --- messages ------------------------------------------------------------------------------------

function encodeContractValue(contract: TronContract): Uint8Array {
  if (contract.type === 'TransferContract') {
    return Uint8Array.from([...bytesField(1, tronAddressBytes(contract.owner)), ...bytesField(2, tronAddressBytes(contract.to)), ...intField(3, contract.amount)]);
  }
  return Uint8Array.from([
    ...bytesField(1, tronAddressBytes(contract.owner)),
    ...bytesField(2, tronAddressBytes(contract.contract)),
    ...intField(3, contract.callValue),
    ...bytesField(4, Buffer.from(contract.data, 'hex')),
  ]);
}

/** protocol.Transaction.raw's bytes, fields in java-tron's order (what the node's raw_data_hex holds). */
export function encodeRawTransaction(raw: TronRawTransaction): Uint8Array {
  const type = raw.contract.type === 'TransferContract' ? TRANSFER_CONTRACT_TYPE : TRIGGER_SMART_CONTRACT_TYPE;
  const any = Uint8Array.from([...bytesField(1, Buffer.from(TYPE_URL[type]!)), ...bytesField(2, encodeContractValue(raw.contract))]);
  const contract = Uint8Array.from([...intField(1, BigInt(type)), ...bytesField(2, any)]);
  return Uint8Array.from([
    ...bytesField(1, raw.refBlockBytes),
    ...bytesField(4, raw.refBlockHash),
    ...intField(8, raw.expiration),
    ...bytesField(11, contract),
    ...intField(14, raw.timestamp),
    ...intField(18, raw.feeLimit),
  ]);
}

/** Decodes raw_data bytes holding exactly one TransferContract or TriggerSmartContract. */
export function decodeRawTransaction(bytes: Uint8Array): TronRawTransaction {
  // ref_block_bytes 1, ref_block_num 3, ref_block_hash 4, expiration 8, contract 11, timestamp 14, fee_limit 18.
  const raw = readMessage(bytes, 'Transaction.raw', { 1: LENGTH_DELIMITED, 3: VARINT, 4: LENGTH_DELIMITED, 8: VARINT, 11: LENGTH_DELIMITED, 14: VARINT, 18: VARINT });
  // type 1, parameter 2, Permission_id 5 (only the owner permission, 0, is signed here).
  const contract = readMessage(bytesOf(raw, 11), 'Transaction.Contract', { 1: VARINT, 2: LENGTH_DELIMITED, 5: VARINT });
  if (intOf(contract, 5) !== 0n) throw new TronCodecError('Transaction.Contract: a permission other than the owner\'s');
  const type = Number(intOf(contract, 1));
  const any = readMessage(bytesOf(contract, 2), 'google.protobuf.Any', { 1: LENGTH_DELIMITED, 2: LENGTH_DELIMITED });
  const typeUrl = Buffer.from(bytesOf(any, 1)).toString('utf8');
  if (TYPE_URL[type] === undefined || typeUrl !== TYPE_URL[type]) throw new TronCodecError(`contract type ${type} (${typeUrl}) is not signed here`);
  const value = bytesOf(any, 2);
  let decoded: TronContract;
  if (type === TRANSFER_CONTRACT_TYPE) {
    const fields = readMessage(value, 'TransferContract', { 1: LENGTH_DELIMITED, 2: LENGTH_DELIMITED, 3: VARINT });
    decoded = { type: 'TransferContract', owner: addressOf(bytesOf(fields, 1), 'owner_address'), to: addressOf(bytesOf(fields, 2), 'to_address'), amount: intOf(fields, 3) };
  } else {
    // call_token_value 5 and token_id 6 (TRC-10 riders) are refused by leaving them out.
    const fields = readMessage(value, 'TriggerSmartContract', { 1: LENGTH_DELIMITED, 2: LENGTH_DELIMITED, 3: VARINT, 4: LENGTH_DELIMITED });
    decoded = {
      type: 'TriggerSmartContract',
      owner: addressOf(bytesOf(fields, 1), 'owner_address'),
      contract: addressOf(bytesOf(fields, 2), 'contract_address'),
      callValue: intOf(fields, 3),
      data: Buffer.from(bytesOf(fields, 4)).toString('hex'),
    };
  }
  return {
    refBlockBytes: bytesOf(raw, 1),
    refBlockHash: bytesOf(raw, 4),
    expiration: intOf(raw, 8),
    timestamp: intOf(raw, 14),
    feeLimit: intOf(raw, 18),
    contract: decoded,
  };
}

/** The transaction id: sha256 of raw_data's bytes, hex. */
export function tronTxid(rawBytes: Uint8Array): string {
  return createHash('sha256').update(rawBytes).digest('hex');
}

// --- TRC-20 --------------------------------------------------------------------------------------

/** `transfer(address,uint256)`'s selector. */
const TRANSFER_SELECTOR = 'a9059cbb';

/** The exact call data of TRC-20 `transfer(recipient, amount)`: the 20-byte address (no 41) in a word. */
export function trc20TransferData(recipient: string, amount: bigint): string {
  const address = Buffer.from(tronAddressBytes(recipient).slice(1)).toString('hex');
  return TRANSFER_SELECTOR + address.padStart(64, '0') + amount.toString(16).padStart(64, '0');
}

/** Recipient (base58) and amount of a canonical `transfer` call, or undefined for anything else. */
export function decodeTrc20Transfer(data: string): { recipient: string; amount: bigint } | undefined {
  const lower = data.toLowerCase();
  if (!/^[0-9a-f]*$/.test(lower) || !lower.startsWith(TRANSFER_SELECTOR) || lower.length !== 8 + 128) return undefined;
  const word = lower.slice(8, 72);
  if (!word.startsWith('0'.repeat(24))) return undefined;
  const recipient = base58check.encode(Uint8Array.from(Buffer.from(`41${word.slice(24)}`, 'hex')));
  const amount = BigInt(`0x${lower.slice(72)}`);
  return trc20TransferData(recipient, amount) === lower ? { recipient, amount } : undefined;
}
