/**
 * The Tron stand-in's own protobuf codec of Transaction.raw and its two contracts, written from
 * java-tron's .proto files (core/Tron.proto, contract/balance_contract.proto,
 * contract/smart_contract.proto) and https://protobuf.dev/programming-guides/encoding/,
 * independent of services/chains/src/tron/transaction.ts: a bug there makes the stand-in disagree
 * (wrong txID, wrong owner) instead of agreeing with itself.
 */

type Field = { no: number; int?: bigint; bytes?: Buffer };

function writeVarint(n: bigint, out: number[]): void {
  while (n >= 0x80n) {
    out.push(Number(n % 128n) + 128);
    n /= 128n;
  }
  out.push(Number(n));
}

/** One message from fields in the given order (zero/empty fields left out, as proto3 writes them). */
export function message(fields: Field[]): Buffer {
  const out: number[] = [];
  for (const f of fields) {
    if (f.bytes !== undefined) {
      if (f.bytes.length === 0) continue;
      writeVarint(BigInt(f.no * 8 + 2), out);
      writeVarint(BigInt(f.bytes.length), out);
      out.push(...f.bytes);
    } else if (f.int !== undefined && f.int !== 0n) {
      writeVarint(BigInt(f.no * 8), out);
      writeVarint(f.int, out);
    }
  }
  return Buffer.from(out);
}

/** Every field of a message, in order (varints and length-delimited ones; anything else throws). */
export function fields(buf: Buffer): Field[] {
  const found: Field[] = [];
  let i = 0;
  const varint = (): bigint => {
    let n = 0n;
    let mul = 1n;
    for (;;) {
      if (i >= buf.length) throw new Error('truncated');
      const b = buf[i++]!;
      n += BigInt(b & 127) * mul;
      mul *= 128n;
      if (b < 128) return n;
    }
  };
  while (i < buf.length) {
    const key = Number(varint());
    const no = key >> 3;
    if ((key & 7) === 0) found.push({ no, int: varint() });
    else if ((key & 7) === 2) {
      const len = Number(varint());
      found.push({ no, bytes: buf.subarray(i, i + len) });
      i += len;
    } else throw new Error(`wire type ${key & 7}`);
  }
  return found;
}

const one = (all: Field[], no: number) => all.find((f) => f.no === no);

export const TRANSFER_URL = 'type.googleapis.com/protocol.TransferContract';
export const TRIGGER_URL = 'type.googleapis.com/protocol.TriggerSmartContract';

/** A raw transaction's content as the stand-in reads it; addresses hex 41…, data hex. */
export interface WireRaw {
  refBlockBytes: string;
  refBlockHash: string;
  expiration: number;
  timestamp: number;
  feeLimit: number;
  type: 'TransferContract' | 'TriggerSmartContract';
  owner: string;
  /** to_address (TRX) or contract_address (a call). */
  to: string;
  amount: bigint;
  data: string;
}

export function encodeWireRaw(raw: WireRaw): Buffer {
  const transfer = raw.type === 'TransferContract';
  const value = transfer
    ? message([{ no: 1, bytes: Buffer.from(raw.owner, 'hex') }, { no: 2, bytes: Buffer.from(raw.to, 'hex') }, { no: 3, int: raw.amount }])
    : message([{ no: 1, bytes: Buffer.from(raw.owner, 'hex') }, { no: 2, bytes: Buffer.from(raw.to, 'hex') }, { no: 3, int: raw.amount }, { no: 4, bytes: Buffer.from(raw.data, 'hex') }]);
  const any = message([{ no: 1, bytes: Buffer.from(transfer ? TRANSFER_URL : TRIGGER_URL) }, { no: 2, bytes: value }]);
  const contract = message([{ no: 1, int: transfer ? 1n : 31n }, { no: 2, bytes: any }]);
  return message([
    { no: 1, bytes: Buffer.from(raw.refBlockBytes, 'hex') },
    { no: 4, bytes: Buffer.from(raw.refBlockHash, 'hex') },
    { no: 8, int: BigInt(raw.expiration) },
    { no: 11, bytes: contract },
    { no: 14, int: BigInt(raw.timestamp) },
    { no: 18, int: BigInt(raw.feeLimit) },
  ]);
}

export function decodeWireRaw(buf: Buffer): WireRaw {
  const raw = fields(buf);
  const contracts = raw.filter((f) => f.no === 11);
  if (contracts.length !== 1) throw new Error(`${contracts.length} contracts`);
  const contract = fields(contracts[0]!.bytes!);
  const any = fields(one(contract, 2)?.bytes ?? Buffer.alloc(0));
  const url = one(any, 1)?.bytes?.toString() ?? '';
  const value = fields(one(any, 2)?.bytes ?? Buffer.alloc(0));
  const type = one(contract, 1)?.int;
  const transfer = type === 1n && url === TRANSFER_URL;
  if (!transfer && !(type === 31n && url === TRIGGER_URL)) throw new Error(`contract type ${type} ${url}`);
  const hex = (f: Field | undefined) => f?.bytes?.toString('hex') ?? '';
  return {
    refBlockBytes: hex(one(raw, 1)),
    refBlockHash: hex(one(raw, 4)),
    expiration: Number(one(raw, 8)?.int ?? 0n),
    timestamp: Number(one(raw, 14)?.int ?? 0n),
    feeLimit: Number(one(raw, 18)?.int ?? 0n),
    type: transfer ? 'TransferContract' : 'TriggerSmartContract',
    owner: hex(one(value, 1)),
    to: hex(one(value, 2)),
    amount: one(value, 3)?.int ?? 0n,
    data: transfer ? '' : hex(one(value, 4)),
  };
}
