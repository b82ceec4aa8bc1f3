/** Tron addresses: base58check of 0x41 ‖ the Ethereum key hash ("T…"), the Tron family's codec. */
import { ok, refused, type Parsed } from '@coinvoice/domain/money';
import { base58check } from '../base58check';
import { ethereumKeyHash } from '../evm/address';
import { TRON_ADDRESS_PREFIX } from './coins';

/** Tron address of a public key (compressed or not): base58check(0x41 ‖ keccak256(uncompressed key)[12..32]). */
export function tronAddress(publicKey: Uint8Array): string {
  return base58check.encode(Uint8Array.of(TRON_ADDRESS_PREFIX, ...ethereumKeyHash(publicKey)));
}

/**
 * The base58check spelling of a Tron address the full-node HTTP API gives in hex ("41" + 20 bytes,
 * its default without `visible: true`); undefined for anything else.
 */
export function tronAddressFromHex(hex: string): string | undefined {
  if (!/^41[0-9a-fA-F]{40}$/.test(hex)) return undefined;
  return base58check.encode(Uint8Array.from(Buffer.from(hex, 'hex')));
}

/** A Tron address: base58check with a valid checksum of 21 bytes starting 0x41 ("T…"). */
export function validateTronAddress(address: unknown): Parsed<string> {
  if (typeof address !== 'string' || address.length === 0 || address.length > 64) return refused('must be a Tron base58 address');
  let payload: Uint8Array;
  try {
    payload = base58check.decode(address);
  } catch {
    return refused('is not a valid base58check address (bad characters or checksum)');
  }
  if (payload.length !== 21 || payload[0] !== TRON_ADDRESS_PREFIX) return refused('is not a Tron address (21 bytes starting 0x41)');
  return ok(address);
}
