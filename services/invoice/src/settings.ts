/**
 * The invoice service's own settings (environment variables, validated at start; a bad value
 * stops the process with one line naming the variable). Documented in services/invoice/README.md.
 */
import { ConfigError, parseDurationMs, setting, type Setting } from '@coinvoice/runtime';
import { RATE_TABLE_ENV, rateProviderFromConfig, type StaticRateProvider } from './domain/rates';
import { accountXpubSetting } from '@coinvoice/chains/account-key';
import { CRYPTO_CODES, PAY_NETWORKS, type Chain, type CryptoCode } from '@coinvoice/chains/coin';
import { isCryptoCode, isPayNetwork, PAY_METHODS } from '@coinvoice/chains/currencies';
import { NETWORKS, type Network } from '@coinvoice/domain/project-network';
import { RATES_SOURCES, type RatesSource } from './rates/pricing';
import { chainWatcherSettings } from '@coinvoice/chains/watchers';
import { requireMainChainIds } from '@coinvoice/chains/evm/family';

/** `INVOICE_XPUB_BTC` (mainnet, live projects), `INVOICE_XPUB_BTC_TESTNET` (testnet, sandbox projects). */
export type XpubVariable = `INVOICE_XPUB_${CryptoCode}` | `INVOICE_XPUB_${CryptoCode}_TESTNET`;

export function xpubVariable(currency: CryptoCode, network: Network): XpubVariable {
  return network === 'testnet' ? `INVOICE_XPUB_${currency}_TESTNET` : `INVOICE_XPUB_${currency}`;
}

function xpubSettings(): Record<XpubVariable, Setting<string>> {
  const settings: Partial<Record<XpubVariable, Setting<string>>> = {};
  for (const currency of CRYPTO_CODES) {
    for (const network of NETWORKS) settings[xpubVariable(currency, network)] = accountXpubSetting(currency, network);
  }
  return settings as Record<XpubVariable, Setting<string>>;
}

const rateTableSetting: Setting<StaticRateProvider> = {
  expected:
    'a JSON rate table {"fiatUsd": {"USD": "1", …every fiat code}, "cryptoUsd": {"BTC": "…", …every coin}} ' +
    'with positive decimal-string rates in USD, or empty for the shipped table',
  default: '',
  parse: (raw) => {
    const provider = rateProviderFromConfig(raw);
    return provider.ok ? provider.value : undefined;
  },
};

/** INVOICE_COINS: the coins invoices may be created in (all supported by default). */
const enabledCoinsSetting: Setting<readonly CryptoCode[]> = {
  expected: `a comma-separated list of coins from ${CRYPTO_CODES.join(', ')} (at least one)`,
  default: CRYPTO_CODES.join(','),
  parse: (raw) => {
    const codes = raw.split(',').map((c) => c.trim().toUpperCase()).filter((c) => c !== '');
    if (codes.length === 0 || !codes.every(isCryptoCode)) return undefined;
    return CRYPTO_CODES.filter((code) => codes.includes(code));
  },
};

/** INVOICE_NETWORKS: the networks invoices may be paid on (all by default; docs/networks.md). */
const enabledNetworksSetting: Setting<readonly Chain[]> = {
  expected: `a comma-separated list of networks from ${PAY_NETWORKS.join(', ')} (at least one)`,
  default: PAY_NETWORKS.join(','),
  parse: (raw) => {
    const names = raw.split(',').map((c) => c.trim().toLowerCase()).filter((c) => c !== '');
    if (names.length === 0 || !names.every(isPayNetwork)) return undefined;
    return PAY_NETWORKS.filter((chain) => names.includes(chain));
  },
};

/** RATES_SOURCE; empty means by APP_ENV: live in production, static in development (see ratesSourceOf). */
const ratesSourceSetting: Setting<RatesSource | ''> = {
  expected: `one of ${RATES_SOURCES.join(', ')} (empty: live in production, static in development)`,
  default: '',
  parse: (raw) => (raw === '' ? '' : (RATES_SOURCES as readonly string[]).includes(raw) ? (raw as RatesSource) : undefined),
};

/** A duration: "24h", "90m", "30s" or milliseconds. */
function durationSetting(defaultValue: string): Setting<number> {
  return {
    expected: 'a duration such as 24h, 90m, 30s or a number of milliseconds',
    default: defaultValue,
    parse: (raw) => parseDurationMs(raw, { bareMilliseconds: true }),
  };
}

export const invoiceSettings = {
  /** The coins invoices may be created in; in production each needs its INVOICE_XPUB_<COIN>. */
  INVOICE_COINS: enabledCoinsSetting,
  INVOICE_NETWORKS: enabledNetworksSetting,
  RATES_SOURCE: ratesSourceSetting,
  RATES_COINBASE_URL: setting.url(['https:', 'http:'], { default: 'https://api.coinbase.com' }),
  RATES_KRAKEN_URL: setting.url(['https:', 'http:'], { default: 'https://api.kraken.com' }),
  /** A quote older than this is never used: no fresh quote, no live invoice. */
  RATES_MAX_AGE_MS: setting.int({ default: 60_000, min: 1_000, max: 3_600_000 }),
  /** How often each provider is asked (in the background). */
  RATES_REFRESH_MS: setting.int({ default: 15_000, min: 100, max: 3_600_000 }),
  /** One provider request's time limit. */
  RATES_TIMEOUT_MS: setting.int({ default: 5_000, min: 100, max: 60_000 }),
  /** Replacement for the shipped static rate table (DEFAULT_RATE_TABLE). */
  [RATE_TABLE_ENV]: rateTableSetting,
  /** How often the expiry sweeper looks for Waiting invoices past expiredAt. */
  INVOICE_SWEEP_INTERVAL_MS: setting.int({ default: 5_000, min: 10, max: 3_600_000 }),
  /** Invoices expired per sweeper transaction (a full batch is followed by the next at once). */
  INVOICE_SWEEP_BATCH_SIZE: setting.int({ default: 100, min: 1, max: 10_000 }),
  /** Most CreateInvoice / PayInvoice / GetInvoice calls group-committed in one batch (docs/performance.md#group-commit). */
  INVOICE_BATCH_MAX: setting.int({ default: 64, min: 1, max: 1_000 }),
  /** Longest a call waits for others while a batch is running, in ms. */
  INVOICE_BATCH_WAIT_MS: setting.int({ default: 2, min: 0, max: 100 }),
  /** How long after expiredAt an unpaid live invoice's address is still watched for late payments. */
  INVOICE_MONITOR_AFTER_EXPIRY: durationSetting('24h'),
  /**
   * Watched addresses whose balances a watcher reconciles per confirmed height, round robin
   * (docs/watcher.md): bounds a block's cost; each address is checked every watched/N heights.
   */
  WATCHER_RECONCILE_PER_BLOCK: setting.int({ default: 500, min: 1, max: 100_000 }),
  /**
   * How often a watcher reads its whole watched set again (docs/watcher.md#why-the-incremental-read-is-complete):
   * in between it reads only the invoices created since; the full read drops the addresses whose window ended.
   */
  WATCHER_FULL_RELOAD: durationSetting('1m'),
  /** The chain families' nodes and watchers (services/chains/src/<family>/family.ts). */
  ...chainWatcherSettings,
  ...xpubSettings(),
} as const;

export type InvoiceConfig = { APP_ENV: 'development' | 'production' } & {
  [K in keyof typeof invoiceSettings]: (typeof invoiceSettings)[K] extends Setting<infer T> ? T : never;
};

export function ratesSourceOf(config: Pick<InvoiceConfig, 'APP_ENV' | 'RATES_SOURCE'>): RatesSource {
  return config.RATES_SOURCE !== '' ? config.RATES_SOURCE : config.APP_ENV === 'production' ? 'live' : 'static';
}

/**
 * Rules across settings (docs/architecture.md#production-refuses-what-is-unsafe), checked before the process connects anywhere. In
 * production every enabled coin needs its configured keys, mainnet and testnet (sandbox projects
 * run in production too): development keys are never generated there. Throws the first problem.
 */
export function checkInvoiceConfig(config: InvoiceConfig): void {
  if (config.RATES_REFRESH_MS >= config.RATES_MAX_AGE_MS) {
    throw new ConfigError('RATES_REFRESH_MS', `less than RATES_MAX_AGE_MS (${config.RATES_MAX_AGE_MS}), so quotes are renewed before they age out`, String(config.RATES_REFRESH_MS));
  }
  requireMainChainIds(config);
  if (config.APP_ENV !== 'production') return;
  for (const variable of xpubsRequired(config.INVOICE_COINS, config.INVOICE_NETWORKS)) {
    if (config[variable] === '') {
      const coin = variable.replace(/^INVOICE_XPUB_/, '').replace(/_TESTNET$/, '') as CryptoCode;
      const borrowers = keyBorrowers(coin, config.INVOICE_COINS, config.INVOICE_NETWORKS);
      throw new ConfigError(
        variable,
        `the ${coin} account's extended public key: APP_ENV=production never generates development keys ` +
          (config.INVOICE_COINS.includes(coin)
            ? `(or remove ${coin} from INVOICE_COINS)`
            : `(${borrowers.join(', ')} take their addresses from it: docs/networks.md)`),
        undefined,
      );
    }
  }
}

/** The pairs other than the coin's own that take their addresses from `coin`'s key ("USDT on tron"). */
function keyBorrowers(coin: CryptoCode, coins: readonly CryptoCode[], networks: readonly Chain[]): string[] {
  return PAY_METHODS.filter((m) => m.keyCurrency === coin && m.code !== coin && coins.includes(m.code) && networks.includes(m.chain)).map(
    (m) => `${m.code} on ${m.chain}`,
  );
}

/**
 * The coins whose keys the enabled coins' addresses come from: each coin's own, and the key
 * currency of its entries on the enabled networks (USDT on tron takes its addresses from the TRX
 * key; docs/networks.md). A token entry whose contract is left empty still counts: its key costs
 * nothing and the pair becomes takeable by configuring the contract alone.
 */
function keyCoins(coins: readonly CryptoCode[], networks: readonly Chain[]): CryptoCode[] {
  return CRYPTO_CODES.filter((code) => coins.includes(code) || keyBorrowers(code, coins, networks).length > 0);
}

/** The keys production needs for the enabled coins: mainnet ones first, then the sandbox's testnet ones. */
function xpubsRequired(coins: readonly CryptoCode[], networks: readonly Chain[]): XpubVariable[] {
  const keyed = keyCoins(coins, networks);
  return NETWORKS.flatMap((network) => keyed.map((coin) => xpubVariable(coin, network)));
}

/**
 * The variables APP_ENV=production needs non-empty beyond those without a default, from the raw
 * environment (the manifest checks in test/deploy ask this of a rendered production overlay).
 */
export function requiredInProduction(env: Readonly<Record<string, string | undefined>>): string[] {
  const coins = enabledCoinsSetting.parse(env.INVOICE_COINS || (enabledCoinsSetting.default ?? ''));
  const networks = enabledNetworksSetting.parse(env.INVOICE_NETWORKS || (enabledNetworksSetting.default ?? ''));
  return xpubsRequired(coins ?? CRYPTO_CODES, networks ?? PAY_NETWORKS);
}
