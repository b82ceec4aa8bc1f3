/**
 * The signer's Bitcoin and Litecoin settings (docs/treasury.md#utxo-signer-policy), spread into
 * signerSettings. Limits have development defaults only: a production signer states each one.
 */
import type { Setting } from '@coinvoice/runtime';
import { accountXpubSetting } from '@coinvoice/chains/account-key';
import { maxFeeRateSettings, type FeeRate, type UtxoTreasuryCoin } from '../domain/fee-rate';
import { assetAmountSetting } from './amount-setting';
import type { UtxoTreasuryNetwork } from './utxo-signing-keys';

/** The coin each UTXO network's treasury pays out. */
export const UTXO_NETWORK_COINS: Readonly<Record<UtxoTreasuryNetwork, UtxoTreasuryCoin>> = { bitcoin: 'BTC', litecoin: 'LTC' };

/** Whole satoshis (litoshis), a positive integer. */
function baseUnitsSetting(devDefault: string): Setting<bigint> {
  return {
    expected: 'a positive whole number of base units (satoshi, litoshi)',
    devDefault,
    parse: (raw) => (/^\d{1,18}$/.test(raw.trim()) && BigInt(raw.trim()) > 0n ? BigInt(raw.trim()) : undefined),
  };
}

export const utxoSignerSettings = {
  /** The invoice service's BIP84 account keys: the seed's m/84'/0'/0' and m/84'/2'/0' must be them. */
  INVOICE_XPUB_BTC: accountXpubSetting('BTC', 'mainnet'),
  INVOICE_XPUB_LTC: accountXpubSetting('LTC', 'mainnet'),
  /** Largest single payout. */
  SIGNER_MAX_PAYOUT_BTC: assetAmountSetting('BTC', '0.5'),
  SIGNER_MAX_PAYOUT_LTC: assetAmountSetting('LTC', '50'),
  /** Largest total of payouts signed per coin and UTC day (a payout counts once, not again per replacement). */
  SIGNER_DAILY_LIMIT_BTC: assetAmountSetting('BTC', '5'),
  SIGNER_DAILY_LIMIT_LTC: assetAmountSetting('LTC', '500'),
  /** Largest sum of fees (base units) signed per coin and UTC day; a replacement counts what it adds. */
  SIGNER_DAILY_FEE_LIMIT_BTC: baseUnitsSetting('5000000'),
  SIGNER_DAILY_FEE_LIMIT_LTC: baseUnitsSetting('50000000'),
  /** The processor's cap, enforced here on the signed transaction's fee / vsize. */
  ...maxFeeRateSettings,
} as const satisfies Record<string, Setting<unknown>>;

/** One coin's limits, as the UTXO policy reads them. */
export interface UtxoCoinLimits {
  maxPayout: bigint;
  dailyLimit: bigint;
  dailyFeeLimit: bigint;
  maxFeeRate: FeeRate;
}

type UtxoSignerConfig = { [K in keyof typeof utxoSignerSettings]: (typeof utxoSignerSettings)[K] extends Setting<infer T> ? T : never };

export function utxoLimitsOf(config: UtxoSignerConfig): Record<UtxoTreasuryCoin, UtxoCoinLimits> {
  return {
    BTC: { maxPayout: config.SIGNER_MAX_PAYOUT_BTC, dailyLimit: config.SIGNER_DAILY_LIMIT_BTC, dailyFeeLimit: config.SIGNER_DAILY_FEE_LIMIT_BTC, maxFeeRate: config.PAYOUT_MAX_FEE_RATE_BTC },
    LTC: { maxPayout: config.SIGNER_MAX_PAYOUT_LTC, dailyLimit: config.SIGNER_DAILY_LIMIT_LTC, dailyFeeLimit: config.SIGNER_DAILY_FEE_LIMIT_LTC, maxFeeRate: config.PAYOUT_MAX_FEE_RATE_LTC },
  };
}
