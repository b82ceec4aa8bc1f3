/**
 * The UTXO family: Bitcoin and Litecoin. Native segwit addresses from BIP84 account keys, BIP21
 * payment URIs, dust limits in the registry entries, one Esplora node per chain for the watcher
 * (mempool payments, replacement detection) and the payout check, and the confirmation policy
 * (docs/architecture.md#live-payments).
 */
import { setting } from '@coinvoice/runtime';
import { formatPlain, toBaseUnits } from '@coinvoice/domain/money';
import type { ChainFamily } from '../family';
import { HTTP_SOURCE_BATCH_BLOCKS, optionalNodeUrl, sourceTimeoutSettings } from '../node-settings';
import { p2wpkhAddress, validateP2wpkhAddress } from './address';
import { BECH32_HRP, BTC, LTC } from './coins';
import type * as EsploraModule from './esplora-adapter';
import { EsploraPayoutCheck } from './payout-check';

/* The adapter loads only when a watcher builds one: the serve role reads this module for confirmations. */
const esploraModule = (): typeof EsploraModule => require('./esplora-adapter');

/** The Esplora nodes, as both the invoice watchers and the payout service read them. */
const utxoNodeSettings = {
  CHAIN_BITCOIN_ESPLORA_URL: optionalNodeUrl(),
  CHAIN_LITECOIN_ESPLORA_URL: optionalNodeUrl(),
  ...sourceTimeoutSettings,
} as const;

const utxoSettings = {
  CHAIN_BITCOIN_ESPLORA_URL: utxoNodeSettings.CHAIN_BITCOIN_ESPLORA_URL,
  CHAIN_BITCOIN_CONFIRMATIONS: setting.int({ default: 2, min: 1, max: 100 }),
  CHAIN_BITCOIN_POLL_MS: setting.int({ default: 10_000, min: 10, max: 600_000 }),
  CHAIN_LITECOIN_ESPLORA_URL: utxoNodeSettings.CHAIN_LITECOIN_ESPLORA_URL,
  CHAIN_LITECOIN_CONFIRMATIONS: setting.int({ default: 6, min: 1, max: 100 }),
  CHAIN_LITECOIN_POLL_MS: setting.int({ default: 10_000, min: 10, max: 600_000 }),
  ...sourceTimeoutSettings,
} as const;

function bech32Chain(chain: string): 'bitcoin' | 'litecoin' {
  if (chain !== 'bitcoin' && chain !== 'litecoin') throw new Error(`not a UTXO chain: ${chain}`);
  return chain;
}

export const utxoFamily: ChainFamily<typeof utxoSettings, typeof utxoNodeSettings> = {
  name: 'utxo',
  defaultConfirmations: { bitcoin: 2, litecoin: 6 },
  currencies: [BTC, LTC],
  compressedKeys: true,
  encodeAddress: (publicKey, currency, network) => p2wpkhAddress(publicKey, BECH32_HRP[bech32Chain(currency.chain)][network]),
  validateAddress: (address, currency, network) => validateP2wpkhAddress(address, BECH32_HRP[bech32Chain(currency.chain)][network]),
  /** BIP21 `bitcoin:<address>?amount=<BTC>` (`litecoin:` likewise). */
  paymentUri(currency, address, amount) {
    toBaseUnits(amount, currency.baseUnitDecimals); // asserts the amount is payable on chain
    return `${currency.uriScheme}:${address}?amount=${formatPlain(amount)}`;
  },
  watcherSettings: utxoSettings,
  sources: (config) => ({
    bitcoin: {
      sourceVariable: 'CHAIN_BITCOIN_ESPLORA_URL',
      adapter: () =>
        config.CHAIN_BITCOIN_ESPLORA_URL === ''
          ? null
          : new (esploraModule().EsploraAdapter)({ chain: 'bitcoin', baseUrl: config.CHAIN_BITCOIN_ESPLORA_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
      pollMs: config.CHAIN_BITCOIN_POLL_MS,
      batchBlocks: HTTP_SOURCE_BATCH_BLOCKS,
      confirmations: config.CHAIN_BITCOIN_CONFIRMATIONS,
    },
    litecoin: {
      sourceVariable: 'CHAIN_LITECOIN_ESPLORA_URL',
      adapter: () =>
        config.CHAIN_LITECOIN_ESPLORA_URL === ''
          ? null
          : new (esploraModule().EsploraAdapter)({ chain: 'litecoin', baseUrl: config.CHAIN_LITECOIN_ESPLORA_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
      pollMs: config.CHAIN_LITECOIN_POLL_MS,
      batchBlocks: HTTP_SOURCE_BATCH_BLOCKS,
      confirmations: config.CHAIN_LITECOIN_CONFIRMATIONS,
    },
  }),
  payoutSettings: utxoNodeSettings,
  payoutChecks: (config) => {
    const timeoutMs = config.CHAIN_SOURCE_TIMEOUT_MS;
    return {
      ...(config.CHAIN_BITCOIN_ESPLORA_URL === '' ? {} : { bitcoin: new EsploraPayoutCheck({ chain: 'bitcoin', baseUrl: config.CHAIN_BITCOIN_ESPLORA_URL, timeoutMs }) }),
      ...(config.CHAIN_LITECOIN_ESPLORA_URL === '' ? {} : { litecoin: new EsploraPayoutCheck({ chain: 'litecoin', baseUrl: config.CHAIN_LITECOIN_ESPLORA_URL, timeoutMs }) }),
    };
  },
};
