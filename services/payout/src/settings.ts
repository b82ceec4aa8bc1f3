/**
 * The payout service's own settings (environment variables, validated at start; a bad value stops
 * the process with one line naming the variable). Documented in services/payout/README.md.
 */
import { rateLimitSetting, setting, type Setting } from '@coinvoice/runtime';
import { payoutCheckSettings } from '@coinvoice/chains/payout-verification';
import { DEFAULT_CODE_TTL_MS } from './domain/code';

/** A decimal amount ≥ 0 of an asset (at most 12 integer digits and 18 decimals), kept as its decimal string. */
function assetAmountSetting(defaultAmount: string): Setting<string> {
  return { expected: 'a decimal amount ≥ 0, e.g. "0.5"', default: defaultAmount, parse: (raw) => (/^\d{1,12}(\.\d{1,18})?$/.test(raw) ? raw : undefined) };
}

export const payoutSettings = {
  /** gRPC URL of the auth service: GetProjectContext gives the merchant's email for the code. */
  AUTH_URL: setting.url(['http:', 'https:'], { devDefault: 'http://127.0.0.1:50051' }),
  /** gRPC URL of the notifier: it emails the verification code (the only place the code goes). */
  NOTIFIER_URL: setting.url(['http:', 'https:'], { devDefault: 'http://127.0.0.1:50054' }),
  /** gRPC URL of the invoice service: the ledger invariant check reads what it reported (ListLedgerCredits). */
  INVOICE_URL: setting.url(['http:', 'https:'], { devDefault: 'http://127.0.0.1:50052' }),
  /** How often the ledger invariants are checked (docs/accounting.md); also on demand (CheckLedgerInvariants). */
  LEDGER_CHECK_INTERVAL_MS: setting.int({ default: 3_600_000, min: 1_000, max: 24 * 3_600_000 }),
  /** A credit reported this recently may still be in flight: not yet "missing". */
  LEDGER_CHECK_GRACE_MS: setting.int({ default: 600_000, min: 0, max: 24 * 3_600_000 }),
  /** Payouts of one project that may await verification at once (docs/architecture.md#rate-limits). */
  PAYOUT_MAX_OPEN_UNVERIFIED: setting.int({ default: 3, min: 1, max: 1_000_000 }),
  /** Verification attempts per project, across its payouts (each payout also allows only 5). */
  RATE_LIMIT_PAYOUT_VERIFY_PER_PROJECT: rateLimitSetting('payout-verify-project', '20/1h'),
  /** Payout requests per project (each one emails a code). */
  RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT: rateLimitSetting('payout-request-project', '30/1h'),
  /** Auto-sweep destination codes checked per project (each change also allows only 5 attempts). */
  RATE_LIMIT_AUTO_SWEEP_VERIFY_PER_PROJECT: rateLimitSetting('auto-sweep-verify-project', '20/1h'),
  /** Auto-sweep changes per project that email a code (each PUT naming a new destination). */
  RATE_LIMIT_AUTO_SWEEP_CODE_PER_PROJECT: rateLimitSetting('auto-sweep-code-project', '10/1h'),
  /** How long a verification code is valid (docs/architecture.md#payouts: 15 minutes); after it the payout is cancelled. */
  PAYOUT_CODE_TTL_MS: setting.int({ default: DEFAULT_CODE_TTL_MS, min: 1_000, max: 24 * 60 * 60_000 }),
  /** How often the sweeper looks for AwaitingVerification payouts whose code expired. */
  PAYOUT_SWEEP_INTERVAL_MS: setting.int({ default: 5_000, min: 10, max: 3_600_000 }),
  /** Payouts cancelled per sweeper transaction (a full batch is followed by the next at once). */
  PAYOUT_SWEEP_BATCH_SIZE: setting.int({ default: 100, min: 1, max: 10_000 }),
  /**
   * The chain families' nodes (the same settings as the invoice watcher's): when one is set, an
   * operator's Complete of a payout on its chains is checked on chain (services/chains
   * payout-check.ts). Empty: not checked.
   */
  ...payoutCheckSettings,
  /**
   * The largest payout of each Ethereum-treasury asset the processor sends without an operator's
   * Approve (docs/treasury.md); default 0: every payout waits for one. The Treasury
   * page's approval queue is the live verified payouts above it.
   */
  PAYOUT_AUTO_MAX_ETH: assetAmountSetting('0'),
  PAYOUT_AUTO_MAX_USDT: assetAmountSetting('0'),
  PAYOUT_AUTO_MAX_USDC: assetAmountSetting('0'),
  /** The same for the Bitcoin, Litecoin and Tron treasuries (USDT on Tron shares PAYOUT_AUTO_MAX_USDT). */
  PAYOUT_AUTO_MAX_BTC: assetAmountSetting('0'),
  PAYOUT_AUTO_MAX_LTC: assetAmountSetting('0'),
  PAYOUT_AUTO_MAX_TRX: assetAmountSetting('0'),
  /**
   * The smallest live payout of each coin, on every network (auto-sweep thresholds too): the
   * treasury pays each transfer's network fee, so a payout worth less than it costs the house more
   * than it moves. Set them above your networks' usual fees; sandbox payouts are simulated.
   */
  PAYOUT_MIN_BTC: assetAmountSetting('0.0001'),
  PAYOUT_MIN_LTC: assetAmountSetting('0.0005'),
  PAYOUT_MIN_ETH: assetAmountSetting('0.001'),
  PAYOUT_MIN_USDT: assetAmountSetting('1'),
  PAYOUT_MIN_USDC: assetAmountSetting('1'),
  PAYOUT_MIN_TRX: assetAmountSetting('1'),
  PAYOUT_MIN_POL: assetAmountSetting('1'),
  PAYOUT_MIN_BNB: assetAmountSetting('0.001'),
} as const;

/** The assets a PAYOUT_AUTO_MAX_<ASSET> names. */
type AutoMaxAsset = 'ETH' | 'USDT' | 'USDC' | 'BTC' | 'LTC' | 'TRX';

/**
 * PAYOUT_AUTO_MAX_<ASSET> by asset code, decimal strings: payouts up to it go without an operator's
 * Approve. What the Treasury page shows, and what the signer checks an unapproved payout against.
 */
export function autoMaximaOf(config: Readonly<Record<`PAYOUT_AUTO_MAX_${AutoMaxAsset}`, string>>): Readonly<Record<string, string>> {
  return {
    ETH: config.PAYOUT_AUTO_MAX_ETH,
    USDT: config.PAYOUT_AUTO_MAX_USDT,
    USDC: config.PAYOUT_AUTO_MAX_USDC,
    BTC: config.PAYOUT_AUTO_MAX_BTC,
    LTC: config.PAYOUT_AUTO_MAX_LTC,
    TRX: config.PAYOUT_AUTO_MAX_TRX,
  };
}

