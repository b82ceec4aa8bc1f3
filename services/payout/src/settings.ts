/**
 * The payout service's own settings (environment variables, validated at start; a bad value stops
 * the process with one line naming the variable). Documented in services/payout/README.md.
 */
import { rateLimitSetting, setting, type Setting } from '@coinvoice/runtime';
import { cryptoCurrency } from '@coinvoice/runtime/coins';
import { DEFAULT_CODE_TTL_MS } from './domain';

/** A URL, or empty for "not configured". */
function optionalUrl(protocols: string[]): Setting<string> {
  const url = setting.url(protocols);
  return { ...url, expected: `${url.expected}, or empty`, default: '', parse: (raw) => (raw === '' ? '' : url.parse(raw)) };
}

function contractSetting(defaultContract: string): Setting<string> {
  return {
    expected: 'an ERC-20 contract address (0x followed by 40 hex digits)',
    default: defaultContract,
    parse: (raw) => (/^0x[0-9a-fA-F]{40}$/.test(raw) ? raw : undefined),
  };
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
  /** How long a verification code is valid (docs/architecture.md#payouts: 15 minutes); after it the payout is cancelled. */
  PAYOUT_CODE_TTL_MS: setting.int({ default: DEFAULT_CODE_TTL_MS, min: 1_000, max: 24 * 60 * 60_000 }),
  /** How often the sweeper looks for AwaitingVerification payouts whose code expired. */
  PAYOUT_SWEEP_INTERVAL_MS: setting.int({ default: 5_000, min: 10, max: 3_600_000 }),
  /** Payouts cancelled per sweeper transaction (a full batch is followed by the next at once). */
  PAYOUT_SWEEP_BATCH_SIZE: setting.int({ default: 100, min: 1, max: 10_000 }),
  /**
   * The Ethereum node (the same settings as the invoice watcher's): when set, an operator's Complete
   * of an ETH/USDT/USDC payout is checked on chain (chain-check/). Empty: not checked.
   */
  CHAIN_ETHEREUM_RPC_URL: optionalUrl(['http:', 'https:']),
  CHAIN_ETHEREUM_RPC_TIMEOUT_MS: setting.int({ default: 10_000, min: 100, max: 120_000 }),
  CHAIN_ETHEREUM_USDT_CONTRACT: contractSetting(cryptoCurrency('USDT').token!.contract.mainnet),
  CHAIN_ETHEREUM_USDC_CONTRACT: contractSetting(cryptoCurrency('USDC').token!.contract.mainnet),
  /**
   * The Esplora sources and the Tron full node (the same settings as the invoice watchers'): when
   * set, Complete of a BTC / LTC / TRX payout is checked on chain (chain-check/). Empty: not checked.
   */
  CHAIN_BITCOIN_ESPLORA_URL: optionalUrl(['http:', 'https:']),
  CHAIN_LITECOIN_ESPLORA_URL: optionalUrl(['http:', 'https:']),
  CHAIN_TRON_API_URL: optionalUrl(['http:', 'https:']),
  /** One request to an Esplora or Tron source. */
  CHAIN_SOURCE_TIMEOUT_MS: setting.int({ default: 10_000, min: 100, max: 120_000 }),
} as const;
