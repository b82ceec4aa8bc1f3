/**
 * The invoice service's own settings (environment variables, validated at start; a bad value
 * stops the process with one line naming the variable). Documented in services/invoice/README.md.
 */
import { ConfigError, parseDurationMs, setting, type Setting } from '@coinvoice/runtime';
import {
  CRYPTO_CODES,
  cryptoCurrency,
  isCryptoCode,
  NETWORKS,
  RATE_TABLE_ENV,
  parseExtendedPublicKey,
  rateProviderFromConfig,
  type CryptoCode,
  type Network,
  type StaticRateProvider,
} from './domain';
import { RATES_SOURCES, type RatesSource } from './rates/pricing';

/** `INVOICE_XPUB_BTC` (mainnet, live projects), `INVOICE_XPUB_BTC_TESTNET` (testnet, sandbox projects). */
export type XpubVariable = `INVOICE_XPUB_${CryptoCode}` | `INVOICE_XPUB_${CryptoCode}_TESTNET`;

export function xpubVariable(currency: CryptoCode, network: Network): XpubVariable {
  return network === 'testnet' ? `INVOICE_XPUB_${currency}_TESTNET` : `INVOICE_XPUB_${currency}`;
}

/** Serialization prefixes of extended public keys per network (SLIP-132 included). */
const KEY_PREFIXES: Readonly<Record<Network, readonly string[]>> = {
  mainnet: ['xpub', 'zpub', 'Ltub'],
  testnet: ['tpub', 'vpub', 'ttub'],
};

/**
 * An account-level extended public key for one coin and network; empty (the default) means "not
 * configured": a development key is generated and kept in the database instead. A mainnet key
 * serialized with testnet versions (or the other way round) is refused, so a sandbox can never
 * share live keys by mistake.
 */
function xpubSetting(currency: CryptoCode, network: Network): Setting<string> {
  const prefixes = KEY_PREFIXES[network];
  return {
    expected:
      `an account-level extended PUBLIC key for ${currency} ${network} (${prefixes.join(', ')}…, ` +
      `e.g. the key of m/${currency === 'BTC' || currency === 'LTC' ? 84 : 44}'/coin'/0'), never a private key, or empty`,
    default: '',
    // Someone may paste a private key here by mistake: never echo it into a log.
    shown: false,
    parse: (raw) => {
      if (raw === '') return '';
      if (!prefixes.some((prefix) => raw.startsWith(prefix))) return undefined;
      return parseExtendedPublicKey(raw).ok ? raw : undefined;
    },
  };
}

function xpubSettings(): Record<XpubVariable, Setting<string>> {
  const settings: Partial<Record<XpubVariable, Setting<string>>> = {};
  for (const currency of CRYPTO_CODES) {
    for (const network of NETWORKS) settings[xpubVariable(currency, network)] = xpubSetting(currency, network);
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

/** RATES_SOURCE; empty means by APP_ENV: live in production, static in development (see ratesSourceOf). */
const ratesSourceSetting: Setting<RatesSource | ''> = {
  expected: `one of ${RATES_SOURCES.join(', ')} (empty: live in production, static in development)`,
  default: '',
  parse: (raw) => (raw === '' ? '' : (RATES_SOURCES as readonly string[]).includes(raw) ? (raw as RatesSource) : undefined),
};

/** An EVM contract address (0x + 40 hex); compared case-insensitively. */
function contractSetting(defaultContract: string): Setting<string> {
  return {
    expected: 'an ERC-20 contract address (0x followed by 40 hex digits)',
    default: defaultContract,
    parse: (raw) => (/^0x[0-9a-fA-F]{40}$/.test(raw) ? raw : undefined),
  };
}

/** A URL, or empty for "not configured"; its password is never echoed. */
function optionalUrl(protocols: string[]): Setting<string> {
  const url = setting.url(protocols);
  return { ...url, expected: `${url.expected}, or empty`, default: '', parse: (raw) => (raw === '' ? '' : url.parse(raw)) };
}

/** A duration: "24h", "90m", "30s" or milliseconds. */
function durationSetting(defaultValue: string): Setting<number> {
  return {
    expected: 'a duration such as 24h, 90m, 30s or a number of milliseconds',
    default: defaultValue,
    parse: (raw) => parseDurationMs(raw, { bareMilliseconds: true }),
  };
}

/**
 * The Ethereum source (docs/architecture.md#chains-and-sources). The serve role reads CHAIN_ETHEREUM_CONFIRMATIONS too: each
 * invoice fixes its confirmation count at creation. An empty RPC URL means "not configured":
 * `npm start` then starts no watcher and `watch ethereum` refuses to start.
 */
export const ethereumSettings = {
  CHAIN_ETHEREUM_RPC_URL: optionalUrl(['http:', 'https:']),
  CHAIN_ETHEREUM_CONFIRMATIONS: setting.int({ default: 12, min: 1, max: 1_000 }),
  CHAIN_ETHEREUM_USDT_CONTRACT: contractSetting(cryptoCurrency('USDT').token!.contract.mainnet),
  CHAIN_ETHEREUM_USDC_CONTRACT: contractSetting(cryptoCurrency('USDC').token!.contract.mainnet),
  CHAIN_ETHEREUM_POLL_MS: setting.int({ default: 2_000, min: 10, max: 600_000 }),
  /** Timeout of one JSON-RPC call. */
  CHAIN_ETHEREUM_RPC_TIMEOUT_MS: setting.int({ default: 10_000, min: 100, max: 120_000 }),
  /** Blocks written per database transaction while backfilling. */
  CHAIN_ETHEREUM_BATCH_BLOCKS: setting.int({ default: 50, min: 1, max: 1_000 }),
} as const;

/** The Esplora sources of bitcoin and litecoin and the Tron full node (docs/architecture.md#chains-and-sources). */
export const utxoAndTronSettings = {
  CHAIN_BITCOIN_ESPLORA_URL: optionalUrl(['http:', 'https:']),
  CHAIN_BITCOIN_CONFIRMATIONS: setting.int({ default: 2, min: 1, max: 100 }),
  CHAIN_BITCOIN_POLL_MS: setting.int({ default: 10_000, min: 10, max: 600_000 }),
  CHAIN_LITECOIN_ESPLORA_URL: optionalUrl(['http:', 'https:']),
  CHAIN_LITECOIN_CONFIRMATIONS: setting.int({ default: 6, min: 1, max: 100 }),
  CHAIN_LITECOIN_POLL_MS: setting.int({ default: 10_000, min: 10, max: 600_000 }),
  CHAIN_TRON_API_URL: optionalUrl(['http:', 'https:']),
  CHAIN_TRON_CONFIRMATIONS: setting.int({ default: 20, min: 1, max: 1_000 }),
  CHAIN_TRON_POLL_MS: setting.int({ default: 3_000, min: 10, max: 600_000 }),
  /** One request to an Esplora or Tron source. */
  CHAIN_SOURCE_TIMEOUT_MS: setting.int({ default: 10_000, min: 100, max: 120_000 }),
} as const;

export const invoiceSettings = {
  /** The coins invoices may be created in; in production each needs its INVOICE_XPUB_<COIN>. */
  INVOICE_COINS: enabledCoinsSetting,
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
  /** How long after expiredAt an unpaid live invoice's address is still watched for late payments. */
  INVOICE_MONITOR_AFTER_EXPIRY: durationSetting('24h'),
  /**
   * Watched addresses whose balances a watcher reconciles per confirmed height, round robin
   * (docs/watcher.md): bounds a block's cost; each address is checked every watched/N heights.
   */
  WATCHER_RECONCILE_PER_BLOCK: setting.int({ default: 500, min: 1, max: 100_000 }),
  ...ethereumSettings,
  ...utxoAndTronSettings,
  ...xpubSettings(),
} as const;

type InvoiceConfig = { APP_ENV: 'development' | 'production' } & {
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
  if (config.APP_ENV !== 'production') return;
  for (const variable of xpubsRequired(config.INVOICE_COINS)) {
    if (config[variable] === '') {
      const coin = variable.replace(/^INVOICE_XPUB_/, '').replace(/_TESTNET$/, '');
      throw new ConfigError(
        variable,
        `the ${coin} account's extended public key: APP_ENV=production never generates development keys ` +
          `(or remove ${coin} from INVOICE_COINS)`,
        undefined,
      );
    }
  }
}

/** The keys production needs for the enabled coins: mainnet ones first, then the sandbox's testnet ones. */
function xpubsRequired(coins: readonly CryptoCode[]): XpubVariable[] {
  return NETWORKS.flatMap((network) => coins.map((coin) => xpubVariable(coin, network)));
}

/**
 * The variables APP_ENV=production needs non-empty beyond those without a default, from the raw
 * environment (the manifest checks in test/deploy ask this of a rendered production overlay).
 */
export function requiredInProduction(env: Readonly<Record<string, string | undefined>>): string[] {
  const coins = enabledCoinsSetting.parse(env.INVOICE_COINS || (enabledCoinsSetting.default ?? ''));
  return xpubsRequired(coins ?? CRYPTO_CODES);
}
