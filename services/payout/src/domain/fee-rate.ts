/**
 * Fee rates of the UTXO treasury (docs/treasury.md#utxo): satoshi (litoshi) per virtual byte, as
 * Esplora's `/fee-estimates` gives them (decimals such as 1.008). Held exactly as whole
 * millisatoshi per vbyte, so that a cap and a rate compare without floats. The processor and the
 * signer read the same cap, PAYOUT_MAX_FEE_RATE_<COIN>: the processor waits above it, the signer
 * refuses above it.
 */
import type { Setting } from '@coinvoice/runtime';
import { parsePositiveDecimal, toBaseUnits } from '@coinvoice/domain/money';

/** The UTXO coins with a treasury. */
export const UTXO_TREASURY_COINS = ['BTC', 'LTC'] as const;
export type UtxoTreasuryCoin = (typeof UTXO_TREASURY_COINS)[number];

/** Millisatoshi per vbyte. */
export type FeeRate = bigint & { readonly __feeRate: unique symbol };

/** Decimals a rate keeps: 1 msat/vB. */
const RATE_DECIMALS = 3;

/** "12.5" sat/vB → 12,500 msat/vB; undefined for anything but a positive decimal with ≤ 3 decimals. */
export function parseFeeRate(text: string): FeeRate | undefined {
  const parsed = parsePositiveDecimal(text.trim(), RATE_DECIMALS);
  return parsed.ok ? (toBaseUnits(parsed.value, RATE_DECIMALS) as FeeRate) : undefined;
}

/**
 * A rate as an Esplora JSON number (e.g. 1.008 or 87.882), rounded UP to the millisatoshi: a
 * transaction must never pay less than the estimate asked for. Undefined if not a positive finite number.
 */
export function feeRateOfEstimate(estimate: number): FeeRate | undefined {
  if (!Number.isFinite(estimate) || estimate <= 0) return undefined;
  return BigInt(Math.ceil(Math.round(estimate * 1e6) / 1e3)) as FeeRate;
}

/** The fee in base units that pays `rate` for `vsize` vbytes: rounded up. */
export function feeAt(rate: FeeRate, vsize: number): bigint {
  const msat = rate * BigInt(vsize);
  return (msat + 999n) / 1000n;
}

/** Whether `fee` for `vsize` vbytes pays at most `cap`. */
export function withinCap(fee: bigint, vsize: number, cap: FeeRate): boolean {
  return fee * 1000n <= cap * BigInt(vsize);
}

/** "12.5 sat/vB" for logs and messages. */
export function formatFeeRate(rate: FeeRate): string {
  const whole = rate / 1000n;
  const fraction = (rate % 1000n).toString().padStart(3, '0').replace(/0+$/, '');
  return `${whole}${fraction ? `.${fraction}` : ''} sat/vB`;
}

/** PAYOUT_MAX_FEE_RATE_<COIN>: sat/vB as a positive decimal (at most 3 decimals). */
export function maxFeeRateSetting(coin: UtxoTreasuryCoin, defaultRate: string): Setting<FeeRate> {
  return {
    expected: `the highest fee rate a ${coin} payout transaction may pay, in sat/vB, such as ${defaultRate} (a positive decimal, at most 3 decimals)`,
    default: defaultRate,
    parse: parseFeeRate,
  };
}

/** The cap settings, read by both the processor and the signer (defaults: docs/treasury.md#utxo). */
export const maxFeeRateSettings = {
  PAYOUT_MAX_FEE_RATE_BTC: maxFeeRateSetting('BTC', '100'),
  PAYOUT_MAX_FEE_RATE_LTC: maxFeeRateSetting('LTC', '20'),
} as const;
