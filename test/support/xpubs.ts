/**
 * An extended public key for every coin and network, as production requires them
 * (INVOICE_XPUB_<COIN> and INVOICE_XPUB_<COIN>_TESTNET): the public halves of throwaway key pairs
 * made from a fixed seed, so a production-mode test never needs real keys.
 */
import { CRYPTO_CODES, generateDevelopmentKeyPair, NETWORKS } from '../../services/invoice/src/domain';
import { xpubVariable, type XpubVariable } from '../../services/invoice/src/settings';

export function throwawayXpubs(): Record<XpubVariable, string> {
  return Object.fromEntries(
    CRYPTO_CODES.flatMap((coin) =>
      NETWORKS.map((network) => [xpubVariable(coin, network), generateDevelopmentKeyPair(coin, network, new Uint8Array(32).fill(7)).xpub]),
    ),
  ) as Record<XpubVariable, string>;
}
