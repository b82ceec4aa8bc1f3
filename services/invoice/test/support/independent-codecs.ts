/**
 * Address codecs written from the specifications, independent of the code under test and of
 * @scure/base: BIP173 bech32, base58(check) with node:crypto SHA-256, hash160 and point
 * decompression with node:crypto, and the EIP-55 rule. Tests decode derived addresses with these.
 * (keccak-256 comes from @noble/hashes: node:crypto only has the differently padded SHA3-256.)
 */
import { createHash, ECDH } from 'node:crypto';
import { keccak_256 } from '@noble/hashes/sha3.js';

const BECH32_CHARSET = 'qpzry9x8gf2tvdw0s3jn54khce6mua7l';
const BECH32_GENERATOR = [0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3];

function bech32Polymod(values: number[]): number {
  let chk = 1;
  for (const value of values) {
    const top = chk >>> 25;
    chk = ((chk & 0x1ffffff) << 5) ^ value;
    for (let i = 0; i < 5; i++) if ((top >>> i) & 1) chk ^= BECH32_GENERATOR[i] ?? 0;
  }
  return chk >>> 0;
}

function hrpExpand(hrp: string): number[] {
  const codes = [...hrp].map((c) => c.charCodeAt(0));
  return [...codes.map((c) => c >> 5), 0, ...codes.map((c) => c & 31)];
}

/** BIP173 segwit address decode: witness version and program, or null when invalid. */
export function decodeSegwitV0(address: string): { hrp: string; version: number; program: Buffer } | null {
  if (address !== address.toLowerCase() && address !== address.toUpperCase()) return null;
  const lower = address.toLowerCase();
  const separator = lower.lastIndexOf('1');
  if (separator < 1 || separator + 7 > lower.length || lower.length > 90) return null;
  const hrp = lower.slice(0, separator);
  const data: number[] = [];
  for (const c of lower.slice(separator + 1)) {
    const value = BECH32_CHARSET.indexOf(c);
    if (value < 0) return null;
    data.push(value);
  }
  // Constant 1 is bech32 (segwit v0); bech32m (v1+) uses 0x2bc830a3.
  if (bech32Polymod([...hrpExpand(hrp), ...data]) !== 1) return null;
  const words = data.slice(0, -6);
  const [version, ...programWords] = words;
  if (version === undefined) return null;
  // Regroup 5-bit words into bytes, no padding allowed beyond 4 zero bits.
  let acc = 0;
  let bits = 0;
  const bytes: number[] = [];
  for (const word of programWords) {
    acc = (acc << 5) | word;
    bits += 5;
    if (bits >= 8) {
      bits -= 8;
      bytes.push((acc >> bits) & 0xff);
    }
  }
  if (bits >= 5 || ((acc << (8 - bits)) & 0xff) !== 0) return null;
  return { hrp, version, program: Buffer.from(bytes) };
}

const BASE58_ALPHABET = '123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz';

export function base58Decode(text: string): Buffer {
  let value = 0n;
  for (const c of text) {
    const digit = BASE58_ALPHABET.indexOf(c);
    if (digit < 0) throw new Error(`not base58: ${c}`);
    value = value * 58n + BigInt(digit);
  }
  const hex = value === 0n ? '' : value.toString(16);
  const body = Buffer.from(hex.length % 2 ? `0${hex}` : hex, 'hex');
  const leadingZeros = text.length - text.replace(/^1+/, '').length;
  return Buffer.concat([Buffer.alloc(leadingZeros), body]);
}

export function base58Encode(bytes: Buffer): string {
  let value = BigInt(`0x${bytes.toString('hex') || '0'}`);
  let out = '';
  while (value > 0n) {
    out = BASE58_ALPHABET.charAt(Number(value % 58n)) + out;
    value /= 58n;
  }
  for (const byte of bytes) {
    if (byte !== 0) break;
    out = `1${out}`;
  }
  return out;
}

const sha256 = (data: Buffer): Buffer => createHash('sha256').update(data).digest();

/** base58check payload, or null when the 4-byte double-SHA-256 checksum does not match. */
export function base58CheckDecode(text: string): Buffer | null {
  const raw = base58Decode(text);
  if (raw.length < 5) return null;
  const payload = raw.subarray(0, -4);
  const checksum = raw.subarray(-4);
  return sha256(sha256(payload)).subarray(0, 4).equals(checksum) ? payload : null;
}

export function base58CheckEncode(payload: Buffer): string {
  return base58Encode(Buffer.concat([payload, sha256(sha256(payload)).subarray(0, 4)]));
}

export function hash160(data: Uint8Array): Buffer {
  return createHash('ripemd160').update(sha256(Buffer.from(data))).digest();
}

/** The 64-byte X‖Y of a compressed secp256k1 key, decompressed by OpenSSL. */
export function uncompressedXY(compressedPublicKey: Uint8Array): Buffer {
  const full = ECDH.convertKey(Buffer.from(compressedPublicKey), 'secp256k1', undefined, undefined, 'uncompressed') as Buffer;
  return full.subarray(1);
}

export function ethereumKeyHash(compressedPublicKey: Uint8Array): Buffer {
  return Buffer.from(keccak_256(uncompressedXY(compressedPublicKey))).subarray(12);
}

/** EIP-55 as specified: hex letter i is upper case when nibble i of keccak256(lower-case hex) is ≥ 8. */
export function eip55(hexLower40: string): string {
  const hash = Buffer.from(keccak_256(Buffer.from(hexLower40, 'ascii'))).toString('hex');
  return `0x${[...hexLower40].map((c, i) => (parseInt(hash.charAt(i), 16) >= 8 ? c.toUpperCase() : c)).join('')}`;
}
