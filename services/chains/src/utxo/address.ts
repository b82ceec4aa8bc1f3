/** Native segwit v0 P2WPKH addresses (BIP173/BIP84): the UTXO family's address codec. */
import { hash } from 'node:crypto';
import { bech32 } from '@scure/base';
import { ok, refused, type Parsed } from '@coinvoice/domain/money';

/** Native segwit v0 P2WPKH: bech32(hrp, [0, ...words(hash160(pubkey))]), of a compressed key. */
export function p2wpkhAddress(compressedPublicKey: Uint8Array, hrp: string): string {
  if (compressedPublicKey.length !== 33) throw new RangeError('P2WPKH needs a compressed (33-byte) public key');
  return bech32.encode(hrp, [0, ...bech32.toWords(hash160(compressedPublicKey))]);
}

/** RIPEMD160(SHA256(bytes)): a P2WPKH witness program of a compressed public key. */
export function hash160(bytes: Uint8Array): Buffer {
  return hash('ripemd160', hash('sha256', bytes, 'buffer'), 'buffer');
}

/**
 * A native segwit v0 P2WPKH address for `hrp`: valid bech32 (not bech32m) checksum, that hrp,
 * witness version 0, 20-byte program. Answers the lower-case form (BIP173 allows all upper case).
 */
export function validateP2wpkhAddress(address: unknown, hrp: string): Parsed<string> {
  if (typeof address !== 'string' || address.length === 0 || address.length > 90) return refused('must be a bech32 address');
  const decoded = bech32.decodeUnsafe(address);
  if (!decoded) return refused('is not a valid bech32 address (bad characters, mixed case or checksum)');
  if (decoded.prefix !== hrp) return refused(`must start with "${hrp}1" on this network`);
  const [witnessVersion, ...programWords] = decoded.words;
  if (witnessVersion !== 0) return refused('must be a segwit version 0 address');
  const program = bech32.fromWordsUnsafe(programWords);
  if (!program || program.length !== 20) return refused('must be a P2WPKH address (20-byte witness program)');
  return ok(address.toLowerCase());
}
