/**
 * The Tron family: TRX. Base58check addresses over the Ethereum key hash, `tron:` payment URIs,
 * the full node's HTTP API for the watcher and the payout check, and the confirmation policy
 * (docs/architecture.md#live-payments).
 */
import { setting } from '@coinvoice/runtime';
import { formatPlain, toBaseUnits } from '@coinvoice/domain/money';
import type { ChainFamily } from '../family';
import { HTTP_SOURCE_BATCH_BLOCKS, optionalNodeUrl, sourceTimeoutSettings } from '../node-settings';
import { tronAddress, validateTronAddress } from './address';
import { TRX } from './coins';
import { TronPayoutCheck } from './payout-check';
import type * as TronModule from './tron-adapter';

/* The adapter loads only when a watcher builds one. */
const tronModule = (): typeof TronModule => require('./tron-adapter');

/** The Tron full node, as both the invoice watcher and the payout service read it. */
const tronNodeSettings = {
  CHAIN_TRON_API_URL: optionalNodeUrl(),
  ...sourceTimeoutSettings,
} as const;

const tronSettings = {
  CHAIN_TRON_API_URL: tronNodeSettings.CHAIN_TRON_API_URL,
  CHAIN_TRON_CONFIRMATIONS: setting.int({ default: 20, min: 1, max: 1_000 }),
  CHAIN_TRON_POLL_MS: setting.int({ default: 3_000, min: 10, max: 600_000 }),
  ...sourceTimeoutSettings,
} as const;

export const tronFamily: ChainFamily<typeof tronSettings, typeof tronNodeSettings> = {
  name: 'tron',
  defaultConfirmations: { tron: 20 },
  currencies: [TRX],
  compressedKeys: false,
  encodeAddress: (publicKey) => tronAddress(publicKey),
  validateAddress: (address) => validateTronAddress(address),
  /** `tron:<address>?amount=<TRX>`. */
  paymentUri(currency, _network, address, amount) {
    toBaseUnits(amount, currency.baseUnitDecimals); // asserts the amount is payable on chain
    return `${currency.uriScheme}:${address}?amount=${formatPlain(amount)}`;
  },
  watcherSettings: tronSettings,
  sources: (config) => ({
    tron: {
      sourceVariable: 'CHAIN_TRON_API_URL',
      adapter: () =>
        config.CHAIN_TRON_API_URL === '' ? null : new (tronModule().TronAdapter)({ apiUrl: config.CHAIN_TRON_API_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }),
      pollMs: config.CHAIN_TRON_POLL_MS,
      batchBlocks: HTTP_SOURCE_BATCH_BLOCKS,
      confirmations: config.CHAIN_TRON_CONFIRMATIONS,
    },
  }),
  payoutSettings: tronNodeSettings,
  payoutChecks: (config) =>
    config.CHAIN_TRON_API_URL === '' ? {} : { tron: new TronPayoutCheck({ apiUrl: config.CHAIN_TRON_API_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS }) },
};
