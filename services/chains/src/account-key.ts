/**
 * An account-level extended public key as a setting (INVOICE_XPUB_<COIN>[_TESTNET]) and its
 * identity: the invoice service derives deposit addresses from it, and the payout service's signer
 * refuses to start unless its seed's account key is the same key (docs/treasury.md#keys).
 */
import { createHash } from 'node:crypto';
import type { Setting } from '@coinvoice/runtime';
import type { Network } from '@coinvoice/domain/project-network';
import { extendedPublicKeyPrefixes, parseExtendedPublicKey } from './addresses';
import type { CryptoCode } from './coin';
import { cryptoCurrency } from './currencies';

/**
 * An account-level extended public key for one coin and network; empty (the default) means "not
 * configured". A mainnet key serialized with testnet versions (or the other way round) is refused,
 * so a sandbox can never share live keys by mistake.
 */
export function accountXpubSetting(currency: CryptoCode, network: Network): Setting<string> {
  const prefixes = extendedPublicKeyPrefixes(network);
  return {
    expected:
      `an account-level extended PUBLIC key for ${currency} ${network} (${prefixes.join(', ')}…, ` +
      `e.g. the key of m/${cryptoCurrency(currency).derivationPurpose}'/coin'/0'), never a private key, or empty`,
    default: '',
    // Someone may paste a private key here by mistake: never echo it into a log.
    shown: false,
    parse: (raw) => {
      if (raw === '') return '';
      if (!prefixes.some((prefix) => raw.startsWith(prefix))) return undefined;
      return parseExtendedPublicKey(raw).ok ? raw : undefined;
    },
  };
}

/** The bytes that identify a BIP32 key: its chain code and (compressed) public key. */
export function keyMaterialOf(key: { chainCode: Uint8Array | null | undefined; publicKey: Uint8Array | null | undefined }): string {
  if (!key.chainCode || !key.publicKey) throw new Error('invalid extended key: incomplete');
  return createHash('sha256').update(key.chainCode).update(key.publicKey).digest('hex');
}

/** Identity of a key: its chain code and public key, whatever version bytes it was serialized with. */
export function keyMaterialHash(xpub: string): string {
  const key = parseExtendedPublicKey(xpub);
  if (!key.ok) throw new Error(`invalid extended public key: ${key.reason}`);
  return keyMaterialOf(key.value);
}
