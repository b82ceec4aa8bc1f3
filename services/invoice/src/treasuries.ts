/**
 * The house's own EVM addresses as the invoice service knows them: the treasury address of each
 * EVM coin's account key (docs/treasury.md#keys). The watcher does not count what they send as a
 * payment; FindHouseAddress names them so no payout is sent there (docs/treasury.md#house-addresses).
 */
import { familyOf, SUPPORTED_CRYPTO } from '@coinvoice/chains/currencies';
import { isChainName } from '@coinvoice/chains/watchers';
import { evmFamily } from '@coinvoice/chains/evm/family';
import { treasuryAddressOf } from '@coinvoice/chains/evm/treasury';
import type { ConfigOf } from '@coinvoice/runtime';
import { invoiceSettings, xpubVariable } from './settings';

type InvoiceConfig = ConfigOf<typeof invoiceSettings>;

/**
 * The treasury addresses of the account keys of every EVM coin when `chain` is an EVM network
 * (docs/treasury.md#keys; one key's treasury is the same address on every EVM network, and it
 * recovers wrong-network payments there too): what they send to a deposit address is a token
 * sweep's gas, not a payment. Lower case.
 */
export function houseSendersOf(chain: string, config: InvoiceConfig): Set<string> {
  const senders = new Set<string>();
  if (!isChainName(chain) || familyOf(chain) !== evmFamily) return senders;
  for (const coin of SUPPORTED_CRYPTO) {
    if (familyOf(coin.chain) !== evmFamily) continue;
    const xpub = config[xpubVariable(coin.code, 'mainnet')];
    const treasury = xpub ? treasuryAddressOf(xpub) : undefined;
    if (treasury) senders.add(treasury.toLowerCase());
  }
  return senders;
}

