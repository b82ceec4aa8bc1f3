/**
 * Every spelling under which coins reach the key behind one address (docs/treasury.md#house-addresses).
 * An EVM address and a Tron address are both the last 20 bytes of a secp256k1 key's hash: whoever
 * holds the key of `0x53F6…` also holds `T…` of the same 20 bytes, on every EVM network and on
 * Tron. So an address is compared in all its forms: as given, in lower case (bech32, EVM hex), in
 * EIP-55, and re-encoded from EVM hex to Tron base58 and back. Likewise a bech32 witness program is
 * one key's on Bitcoin and Litecoin, main and test networks alike (`bc1q<h>` and `ltc1q<h>`): it is
 * re-encoded under every UTXO chain's human-readable part.
 */
import { bech32 } from '@scure/base';
import { base58check } from './base58check';
import { BECH32_HRP } from './utxo/coins';
import { toEip55 } from './evm/address';
import { TRON_ADDRESS_PREFIX } from './tron/coins';

const EVM_HEX = /^0x[0-9a-fA-F]{40}$/;

/** The forms of `raw` (trimmed), distinct; at most a handful. */
export function addressForms(raw: string): string[] {
  const address = raw.trim();
  const forms = new Set([address, address.toLowerCase()]);
  const keyHash = keyHashOf(address);
  if (keyHash) {
    const evm = toEip55(`0x${Buffer.from(keyHash).toString('hex')}`);
    forms.add(evm);
    forms.add(evm.toLowerCase());
    forms.add(base58check.encode(Uint8Array.of(TRON_ADDRESS_PREFIX, ...keyHash)));
  }
  const witnessWords = witnessWordsOf(address);
  if (witnessWords) for (const hrp of UTXO_HRPS) forms.add(bech32.encode(hrp, witnessWords));
  return [...forms];
}

const UTXO_HRPS = Object.values(BECH32_HRP).flatMap((byNetwork) => Object.values(byNetwork));

/** The 5-bit words (witness version, program) of a bech32 address of a UTXO chain; undefined otherwise. */
function witnessWordsOf(address: string): number[] | undefined {
  const decoded = bech32.decodeUnsafe(address.toLowerCase());
  return decoded && UTXO_HRPS.includes(decoded.prefix) && decoded.words.length > 0 ? decoded.words : undefined;
}

/** The 20-byte key hash of an EVM hex or Tron base58 address; undefined for anything else. */
function keyHashOf(address: string): Uint8Array | undefined {
  if (EVM_HEX.test(address)) return Uint8Array.from(Buffer.from(address.slice(2), 'hex'));
  if (!/^T[1-9A-HJ-NP-Za-km-z]{20,40}$/.test(address)) return undefined;
  try {
    const payload = base58check.decode(address);
    return payload.length === 21 && payload[0] === TRON_ADDRESS_PREFIX ? payload.slice(1) : undefined;
  } catch {
    return undefined;
  }
}
