/**
 * Where an EVM account's treasury (hot) address is: account/1/0, the change branch, never given to
 * a customer (docs/treasury.md#keys). The signer derives its private key from the seed; the
 * watcher derives its address from the account xpub, to know the house's own transfers.
 */
import { addressFromPublicKey, parseExtendedPublicKey } from '../addresses';

export const TREASURY_BRANCH = 1;
export const TREASURY_INDEX = 0;

/** The treasury address (EIP-55) of an account xpub, or undefined when the xpub does not parse. */
export function treasuryAddressOf(accountXpub: string): string | undefined {
  const account = parseExtendedPublicKey(accountXpub);
  if (!account.ok) return undefined;
  const key = account.value.deriveChild(TREASURY_BRANCH).deriveChild(TREASURY_INDEX).publicKey;
  return key ? addressFromPublicKey(key, 'ETH', 'mainnet') : undefined;
}
