/**
 * The invoice service's own settings (environment variables, validated at start; a bad value
 * stops the process with one line naming the variable). Documented in services/invoice/README.md.
 */
import { setting, type Setting } from '@coinvoice/runtime';
import {
  CRYPTO_CODES,
  NETWORKS,
  RATE_TABLE_ENV,
  parseExtendedPublicKey,
  rateProviderFromConfig,
  type CryptoCode,
  type Network,
  type StaticRateProvider,
} from './domain';

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

export const invoiceSettings = {
  /** Replacement for the shipped static rate table (DEFAULT_RATE_TABLE). */
  [RATE_TABLE_ENV]: rateTableSetting,
  /** How often the expiry sweeper looks for Waiting invoices past expiredAt. */
  INVOICE_SWEEP_INTERVAL_MS: setting.int({ default: 5_000, min: 10, max: 3_600_000 }),
  /** Invoices expired per sweeper transaction (a full batch is followed by the next at once). */
  INVOICE_SWEEP_BATCH_SIZE: setting.int({ default: 100, min: 1, max: 10_000 }),
  ...xpubSettings(),
} as const;
