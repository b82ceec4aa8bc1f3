/**
 * The Tron family: TRX and the TRC-20 stablecoins (USDT; USDC where configured). Base58check addresses over the Ethereum key hash, `tron:` payment URIs,
 * the full node's HTTP API for the watcher and the payout check, and the confirmation policy
 * (docs/architecture.md#live-payments).
 */
import { setting, type Setting } from '@coinvoice/runtime';
import { formatPlain, toBaseUnits } from '@coinvoice/domain/money';
import type { ChainFamily } from '../family';
import { HTTP_SOURCE_BATCH_BLOCKS, optionalNodeUrl, sourceTimeoutSettings } from '../node-settings';
import { tronAddress, validateTronAddress } from './address';
import { TRX, USDC_TRON, USDT_TRON } from './coins';
import { TronPayoutCheck } from './payout-check';
import type { TronTokenCode } from './trc20';
import type * as TronModule from './tron-adapter';

/* The adapter loads only when a watcher builds one. */
const tronModule = (): typeof TronModule => require('./tron-adapter');

/** A TRC-20 contract (base58check "T…"), or empty where the token is not taken. */
function trc20ContractSetting(defaultContract: string): Setting<string> {
  return {
    expected: 'a TRC-20 contract address (base58check, T followed by 33 characters), or empty',
    default: defaultContract,
    parse: (raw) => (raw === '' || validateTronAddress(raw).ok ? raw : undefined),
  };
}

/** The Tron full node and the token contracts, as both the invoice watcher and the payout service read them. */
const tronNodeSettings = {
  CHAIN_TRON_API_URL: optionalNodeUrl(),
  /** Tether's USD₮ contract (TRC-20). */
  CHAIN_TRON_USDT_CONTRACT: trc20ContractSetting(USDT_TRON.token!.contract.mainnet),
  /** Empty by default: Circle ended USDC on Tron in 2024 (docs/networks.md); set it to take USDC there. */
  CHAIN_TRON_USDC_CONTRACT: trc20ContractSetting(''),
  ...sourceTimeoutSettings,
} as const;

/** The configured TRC-20 contracts by token (empty: not taken). */
function tronTokens(config: { CHAIN_TRON_USDT_CONTRACT: string; CHAIN_TRON_USDC_CONTRACT: string }): Partial<Record<TronTokenCode, string>> {
  const tokens: Partial<Record<TronTokenCode, string>> = {};
  if (config.CHAIN_TRON_USDT_CONTRACT !== '') tokens.USDT = config.CHAIN_TRON_USDT_CONTRACT;
  if (config.CHAIN_TRON_USDC_CONTRACT !== '') tokens.USDC = config.CHAIN_TRON_USDC_CONTRACT;
  return tokens;
}

const tronSettings = {
  CHAIN_TRON_API_URL: tronNodeSettings.CHAIN_TRON_API_URL,
  CHAIN_TRON_USDT_CONTRACT: tronNodeSettings.CHAIN_TRON_USDT_CONTRACT,
  CHAIN_TRON_USDC_CONTRACT: tronNodeSettings.CHAIN_TRON_USDC_CONTRACT,
  CHAIN_TRON_CONFIRMATIONS: setting.int({ default: 20, min: 1, max: 1_000 }),
  CHAIN_TRON_POLL_MS: setting.int({ default: 3_000, min: 10, max: 600_000 }),
  ...sourceTimeoutSettings,
} as const;

export const tronFamily: ChainFamily<typeof tronSettings, typeof tronNodeSettings> = {
  name: 'tron',
  defaultConfirmations: { tron: 20 },
  currencies: [TRX, USDT_TRON, USDC_TRON],
  compressedKeys: false,
  encodeAddress: (publicKey) => tronAddress(publicKey),
  validateAddress: (address) => validateTronAddress(address),
  /**
   * `tron:<address>?amount=<TRX>`; a TRC-20 token adds `&token=<contract>` (TronLink's form), and
   * the token's test chain has none, so a sandbox token URI names the address and amount only.
   */
  paymentUri(currency, address, amount, target) {
    toBaseUnits(amount, currency.baseUnitDecimals); // asserts the amount is payable on chain
    if (!currency.token) return `${currency.uriScheme}:${address}?amount=${formatPlain(amount)}`;
    // A token without a contract (the Nile test chain has no Tether) gets the bare address: an
    // amount without &token= would ask a wallet for that many TRX (sandbox invoices are paid by
    // simulation), as the EVM form does for a test chain without the issuer's contract.
    if (target.contract === null) return `${currency.uriScheme}:${address}`;
    return `${currency.uriScheme}:${address}?amount=${formatPlain(amount)}&token=${target.contract}`;
  },
  watcherSettings: tronSettings,
  sources: (config) => ({
    tron: {
      sourceVariable: 'CHAIN_TRON_API_URL',
      adapter: () =>
        config.CHAIN_TRON_API_URL === ''
          ? null
          : new (tronModule().TronAdapter)({ apiUrl: config.CHAIN_TRON_API_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS, tokens: tronTokens(config) }),
      pollMs: config.CHAIN_TRON_POLL_MS,
      batchBlocks: HTTP_SOURCE_BATCH_BLOCKS,
      confirmations: config.CHAIN_TRON_CONFIRMATIONS,
    },
  }),
  payoutSettings: tronNodeSettings,
  payoutChecks: (config) =>
    config.CHAIN_TRON_API_URL === ''
      ? {}
      : { tron: new TronPayoutCheck({ apiUrl: config.CHAIN_TRON_API_URL, timeoutMs: config.CHAIN_SOURCE_TIMEOUT_MS, contracts: tronTokens(config) }) },
};
