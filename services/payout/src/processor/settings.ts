/**
 * The settings of the `process ethereum` role (docs/treasury.md#processor), validated at start: a
 * bad value stops the process with one line naming the variable. Documented in
 * services/payout/README.md ("Processor"). The node settings are the invoice watcher's
 * (services/chains evm/family.ts), so one ConfigMap configures both.
 */
import { setting, type Setting } from '@coinvoice/runtime';
import { evmFamily } from '@coinvoice/chains/evm/family';
import { cryptoCurrency } from '@coinvoice/chains/currencies';
import { Decimal, toBaseUnits } from '@coinvoice/domain/money';
import { payoutSettings } from '../settings';
import { signerSettings } from '../signer/settings';

/** The assets the Ethereum processor pays and sweeps. */
export const EVM_ASSETS = ['ETH', 'USDT', 'USDC'] as const;
export type EvmAsset = (typeof EVM_ASSETS)[number];

export function isEvmAsset(value: string): value is EvmAsset {
  return (EVM_ASSETS as readonly string[]).includes(value);
}

/** A non-negative amount of `asset` (e.g. `0.5`), parsed once into base units (wei, token units). */
function assetAmount(asset: EvmAsset, defaultAmount: string): Setting<bigint> {
  const decimals = cryptoCurrency(asset).baseUnitDecimals;
  return {
    expected: `an amount of ${asset} (e.g. 0.5), at most ${decimals} decimal places, 0 or more`,
    default: defaultAmount,
    parse: (raw) => {
      if (!/^\d{1,15}(\.\d{1,18})?$/.test(raw)) return undefined;
      const amount = new Decimal(raw);
      if (amount.decimalPlaces() > decimals) return undefined;
      return toBaseUnits(amount, decimals);
    },
  };
}

const watcherSettings = evmFamily.watcherSettings;

export const processorSettings = {
  /** The Ethereum node (the watcher's settings): the processor's reads and broadcasts. */
  CHAIN_ETHEREUM_RPC_URL: watcherSettings.CHAIN_ETHEREUM_RPC_URL,
  CHAIN_ETHEREUM_RPC_TIMEOUT_MS: watcherSettings.CHAIN_ETHEREUM_RPC_TIMEOUT_MS,
  CHAIN_ETHEREUM_USDT_CONTRACT: watcherSettings.CHAIN_ETHEREUM_USDT_CONTRACT,
  CHAIN_ETHEREUM_USDC_CONTRACT: watcherSettings.CHAIN_ETHEREUM_USDC_CONTRACT,
  /** Confirmations after which a payout completes and a sweep is confirmed: the invoices' count. */
  CHAIN_ETHEREUM_CONFIRMATIONS: watcherSettings.CHAIN_ETHEREUM_CONFIRMATIONS,
  /** gRPC URL of the invoice service: the sweep intake reads its accounted deposits (ListAccountedDeposits). */
  INVOICE_URL: payoutSettings.INVOICE_URL,
  /** gRPC URL of the signer (`payout sign`); https with mutual TLS in production. */
  SIGNER_URL: setting.url(['http:', 'https:'], { devDefault: 'http://127.0.0.1:50055' }),
  /**
   * Payouts up to this amount are sent without an operator's Approve (docs/treasury.md#processor);
   * default 0: every payout waits for Approve. The serve role's settings (its Treasury page shows
   * the queue above them): one declaration, so both roles read the variable alike.
   */
  PAYOUT_AUTO_MAX_ETH: payoutSettings.PAYOUT_AUTO_MAX_ETH,
  PAYOUT_AUTO_MAX_USDT: payoutSettings.PAYOUT_AUTO_MAX_USDT,
  PAYOUT_AUTO_MAX_USDC: payoutSettings.PAYOUT_AUTO_MAX_USDC,
  /** A transaction not mined this long after its broadcast is replaced (same nonce, fees +12.5 % or more). */
  PAYOUT_REPLACE_AFTER: setting.duration({ default: '3m', minMs: 1_000, maxMs: 24 * 3_600_000 }),
  /** How often a round runs (record, re-broadcast, replace, sweep, pay); a standby retries the lock as often. */
  PAYOUT_PROCESSOR_POLL_MS: setting.int({ default: 2_000, min: 50, max: 600_000 }),
  /**
   * A deposit worth less than this after its sweep's gas is left where it is (`skipped_dust`):
   * moving it would cost about as much as it is worth. ETH: 0.001 ≈ 2.4× a 21,000-gas sweep at
   * 20 gwei; tokens: 5 ≈ a top-up plus a token transfer (~80,000 gas) at 20 gwei and 3,000 USD/ETH.
   */
  SWEEP_DUST_ETH: assetAmount('ETH', '0.001'),
  SWEEP_DUST_USDT: assetAmount('USDT', '5'),
  SWEEP_DUST_USDC: assetAmount('USDC', '5'),
  /**
   * The signer's caps (docs/treasury.md#signer-policy), the signer role's declarations: the
   * processor asks for no more (a gas limit, a fee, a replacement bump above them is refused), so
   * one ConfigMap gives both roles the same values.
   */
  SIGNER_MAX_GAS_LIMIT: signerSettings.SIGNER_MAX_GAS_LIMIT,
  SIGNER_MAX_FEE_PER_GAS_WEI: signerSettings.SIGNER_MAX_FEE_PER_GAS_WEI,
  SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI: signerSettings.SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI,
  /**
   * The treasury below this balance is an alert (CoinvoiceTreasuryBelowMinimum): payouts would
   * soon wait for sweeps. Default 0: no alert until an operator sets what the treasury must hold.
   */
  TREASURY_MIN_BALANCE_ETH: assetAmount('ETH', '0'),
  TREASURY_MIN_BALANCE_USDT: assetAmount('USDT', '0'),
  TREASURY_MIN_BALANCE_USDC: assetAmount('USDC', '0'),
  /** A payout in flight longer than this (since the processor claimed it) is an alert (CoinvoicePayoutStuck). */
  PAYOUT_STUCK_AFTER: setting.duration({ default: '30m', minMs: 1_000, maxMs: 7 * 24 * 3_600_000 }),
} as const;

