/**
 * An extended public key for every coin and network, as production requires them
 * (INVOICE_XPUB_<COIN> and INVOICE_XPUB_<COIN>_TESTNET): the public halves of throwaway key pairs
 * made from a fixed seed, so a production-mode test never needs real keys.
 */
import { generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import { CRYPTO_CODES } from '@coinvoice/chains/coin';
import { NETWORKS } from '@coinvoice/domain/project-network';
import { xpubVariable, type XpubVariable } from '../../services/invoice/src/settings';

export function throwawayXpubs(): Record<XpubVariable, string> {
  return Object.fromEntries(
    CRYPTO_CODES.flatMap((coin) =>
      NETWORKS.map((network) => [xpubVariable(coin, network), generateDevelopmentKeyPair(coin, network, new Uint8Array(32).fill(7)).xpub]),
    ),
  ) as Record<XpubVariable, string>;
}
