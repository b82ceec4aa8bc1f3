/** EIP-55 checksummed hex addresses: the EVM family's address codec (and the key hash Tron shares). */
import { keccak_256 } from '@noble/hashes/sha3.js';
import { ok, refused, type Parsed } from '@coinvoice/domain/money';
import { secp256k1Points } from '../secp256k1';

/** EIP-55 checksummed Ethereum address of a public key (compressed or not). */
export function eip55Address(publicKey: Uint8Array): string {
  return toEip55(bytesToHex(ethereumKeyHash(publicKey)));
}

/**
 * The EIP-55 form of a 40-hex-digit address (with or without 0x, any case): hex letter i is upper
 * case when nibble i of keccak256(lower-case hex) is ≥ 8.
 */
export function toEip55(hexAddress: string): string {
  const lower = hexAddress.replace(/^0x/i, '').toLowerCase();
  if (!/^[0-9a-f]{40}$/.test(lower)) throw new RangeError('an Ethereum address is 40 hex digits');
  const digest = keccak_256(Buffer.from(lower, 'latin1'));
  let out = '0x';
  for (let i = 0; i < lower.length; i++) {
    const byte = digest[i >> 1] ?? 0;
    const nibble = i % 2 === 0 ? byte >> 4 : byte & 0x0f;
    const char = lower.charAt(i);
    out += nibble >= 8 ? char.toUpperCase() : char;
  }
  return out;
}

/**
 * An Ethereum address with a valid EIP-55 checksum: "0x" + 40 hex digits whose case matches the
 * checksum exactly. With `requireChecksum: false`, all-lower or all-upper case (no checksum to check)
 * is accepted too. Answers the checksummed form.
 */
export function validateEip55Address(address: unknown, options: { requireChecksum?: boolean } = {}): Parsed<string> {
  if (typeof address !== 'string' || !/^0x[0-9a-fA-F]{40}$/.test(address)) return refused('must be "0x" followed by 40 hex digits');
  const checksummed = toEip55(address);
  if (address === checksummed) return ok(checksummed);
  const hex = address.slice(2);
  const singleCase = hex === hex.toLowerCase() || hex === hex.toUpperCase();
  if (options.requireChecksum === false && singleCase) return ok(checksummed);
  return refused(singleCase ? 'must carry its EIP-55 checksum (mixed case)' : 'has an invalid EIP-55 checksum');
}

/** keccak256 of the 64-byte uncompressed public key (without the 0x04 tag), last 20 bytes. */
export function ethereumKeyHash(publicKey: Uint8Array): Uint8Array {
  const uncompressed = publicKey.length === 65 ? publicKey : secp256k1Points.uncompress(publicKey);
  return keccak_256(uncompressed.subarray(1)).subarray(12);
}

function bytesToHex(bytes: Uint8Array): string {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('hex');
}
