/**
 * The `payout sign` role's settings (docs/treasury.md#signer-policy), parsed once at start; a bad
 * value stops the process with one line naming the variable. Documented in
 * services/payout/README.md, "Signer". The limits have development defaults only: a production
 * signer states every one of them.
 */
import {
  bindHostSetting,
  commonSettings,
  grpcHealthPortSetting,
  rpcTlsSettings,
  setting,
  type ConfigOf,
  type Setting,
} from '@coinvoice/runtime';
import { accountXpubSetting } from '@coinvoice/chains/account-key';
import { evmNodeSettings } from '@coinvoice/chains/evm/family';
import { tronFamily } from '@coinvoice/chains/tron/family';
import { cryptoCurrency } from '@coinvoice/chains/currencies';
import { payoutSettings } from '../settings';
import { assetAmountSetting } from './amount-setting';
import { utxoSignerSettings } from './utxo-settings';
import { parsePositiveDecimal, toBaseUnits } from '@coinvoice/domain/money';

/** The assets the Ethereum signer moves. */
export const SIGNER_ASSETS = ['ETH', 'USDT', 'USDC'] as const;
export type SignerAsset = (typeof SIGNER_ASSETS)[number];

export function isSignerAsset(value: string): value is SignerAsset {
  return (SIGNER_ASSETS as readonly string[]).includes(value);
}

/** Base-unit decimals of each asset (wei 18, token units 6), from the coin registry. */
export function assetDecimals(asset: SignerAsset): number {
  return cryptoCurrency(asset).baseUnitDecimals;
}

/**
 * A whole number of wei (or gas) that may exceed 2^53: a bigint. `default` holds in every
 * environment; `devDefault` in development only (production must state the value).
 */
function bigintSetting(options: ({ default: string } | { devDefault: string }) & { min: bigint; max?: bigint }): Setting<bigint> {
  return {
    expected: `a whole number from ${options.min}${options.max === undefined ? '' : ` to ${options.max}`}`,
    ...('default' in options ? { default: options.default } : { devDefault: options.devDefault }),
    parse: (raw) => {
      if (!/^\d{1,40}$/.test(raw.trim())) return undefined;
      const value = BigInt(raw.trim());
      return value >= options.min && (options.max === undefined || value <= options.max) ? value : undefined;
    },
  };
}

/** 200 gwei: far above an ordinary mainnet base fee, low enough that a runaway fee cannot drain the treasury. */
export const DEFAULT_MAX_FEE_PER_GAS_WEI = 200_000_000_000n;
/** An ETH transfer uses 21,000 gas, an ERC-20 transfer about 35,000–65,000 (USDT's up to ~63,000). */
export const DEFAULT_MAX_GAS_LIMIT = 100_000n;
/**
 * One token sweep's worst case: the gas cap at the fee cap (100,000 × 200 gwei = 0.02 ETH). A top-up
 * is spent on exactly one sweep, so a larger one would only leave ETH idle on a deposit address.
 */
export const DEFAULT_MAX_GAS_TOP_UP_WEI = DEFAULT_MAX_GAS_LIMIT * DEFAULT_MAX_FEE_PER_GAS_WEI;
/**
 * 5 gwei: the tip goes to the block's proposer, who may be the one draining it (a colluding
 * builder). Nodes suggest 0.01–2 gwei on mainnet (eth_maxPriorityFeePerGas; anvil 1 gwei), and
 * 5 gwei leaves room for the processor's 12.5 % replacement bumps (1 gwei → 5 gwei after 13).
 * At the gas cap a transaction then tips at most 100,000 × 5 gwei = 0.0005 ETH.
 */
export const DEFAULT_MAX_PRIORITY_FEE_PER_GAS_WEI = 5_000_000_000n;
/**
 * 0.5 ETH per UTC day of fees, all purposes (development default; production states its own):
 * 25 transactions at the gas and fee caps (0.02 ETH each), about 250 at ordinary mainnet fees
 * (~0.002 ETH for a token transfer at 2 × 15 gwei base fee + tip). What a compromised processor can
 * burn in fees per day, whatever it signs (docs/treasury.md#signer-policy).
 */
export const DEV_DAILY_FEE_LIMIT_WEI = 500_000_000_000_000_000n;
/**
 * 0.2 ETH of gas top-ups per UTC day (development default): 10 top-ups at SIGNER_MAX_GAS_TOP_UP_WEI,
 * about 70 token sweeps at ordinary fees (a top-up is one sweep's gas, ~0.003 ETH).
 */
export const DEV_DAILY_GAS_TOP_UP_LIMIT_WEI = 200_000_000_000_000_000n;

/**
 * 50 TRX: a TRC-20 transfer to a new holder costs 130,285 energy, burnt at 210 sun per energy
 * (the 2024–2026 price) ≈ 27.4 TRX, plus ~345 bandwidth ≈ 0.35 TRX; the cap leaves room for one
 * energy price rise while bounding what one signature can burn (docs/treasury.md#tron).
 */
export const DEFAULT_MAX_FEE_LIMIT_SUN = 50_000_000n;

export const signerSettings = {
  APP_ENV: commonSettings.APP_ENV,
  DATABASE_URL: commonSettings.DATABASE_URL,
  DATABASE_POOL_MAX: setting.int({ default: 5, min: 1, max: 50 }),
  LOG_LEVEL: commonSettings.LOG_LEVEL,
  SHUTDOWN_GRACE_MS: commonSettings.SHUTDOWN_GRACE_MS,
  /** The signer's own ports: it runs beside `payout serve` (50053/9053) on a developer's machine. */
  GRPC_PORT: setting.port(50055),
  GRPC_HEALTH_PORT: grpcHealthPortSetting,
  ADMIN_PORT: setting.port(9055),
  BIND_HOST: bindHostSetting,
  ...rpcTlsSettings,
  /**
   * Development only: serve gRPC without mutual TLS, and then only on a loopback BIND_HOST. Without
   * TLS there is no caller identity, so whoever reaches the port could ask for signatures.
   */
  SIGNER_ALLOW_PLAINTEXT: setting.bool({ default: false }),
  /**
   * The processors' PAYOUT_AUTO_MAX_<ASSET> (the same values, from the same configuration): a payout
   * above it is signed only once an operator approved it (docs/treasury.md#signer-policy). Default
   * 0: every payout needs an Approve.
   */
  PAYOUT_AUTO_MAX_ETH: payoutSettings.PAYOUT_AUTO_MAX_ETH,
  PAYOUT_AUTO_MAX_USDT: payoutSettings.PAYOUT_AUTO_MAX_USDT,
  PAYOUT_AUTO_MAX_USDC: payoutSettings.PAYOUT_AUTO_MAX_USDC,
  PAYOUT_AUTO_MAX_BTC: payoutSettings.PAYOUT_AUTO_MAX_BTC,
  PAYOUT_AUTO_MAX_LTC: payoutSettings.PAYOUT_AUTO_MAX_LTC,
  PAYOUT_AUTO_MAX_TRX: payoutSettings.PAYOUT_AUTO_MAX_TRX,
  /** A file holding the BIP39 mnemonic (English words, checksum checked); never an environment variable. */
  SIGNER_SEED_FILE: { expected: 'the path of a readable file holding the BIP39 mnemonic', parse: (raw: string) => raw.trim() || undefined } as Setting<string>,
  /** The invoice service's account keys: the seed's m/44'/60'/0' must be each configured one. */
  INVOICE_XPUB_ETH: accountXpubSetting('ETH', 'mainnet'),
  INVOICE_XPUB_USDT: accountXpubSetting('USDT', 'mainnet'),
  INVOICE_XPUB_USDC: accountXpubSetting('USDC', 'mainnet'),
  /** POL and BNB addresses are EVM addresses too (docs/networks.md): the same account key. */
  INVOICE_XPUB_POL: accountXpubSetting('POL', 'mainnet'),
  INVOICE_XPUB_BNB: accountXpubSetting('BNB', 'mainnet'),
  /** The chain id every transaction must carry (1: Ethereum mainnet; anvil 31337). */
  CHAIN_ETHEREUM_CHAIN_ID: setting.int({ default: 1, min: 1, max: 2 ** 32 }),
  CHAIN_ETHEREUM_USDT_CONTRACT: evmNodeSettings.CHAIN_ETHEREUM_USDT_CONTRACT,
  CHAIN_ETHEREUM_USDC_CONTRACT: evmNodeSettings.CHAIN_ETHEREUM_USDC_CONTRACT,
  /** Largest single payout per asset. */
  SIGNER_MAX_PAYOUT_ETH: assetAmountSetting('ETH', '1'),
  SIGNER_MAX_PAYOUT_USDT: assetAmountSetting('USDT', '5000'),
  SIGNER_MAX_PAYOUT_USDC: assetAmountSetting('USDC', '5000'),
  /** Largest total of payouts signed per asset and UTC day. */
  SIGNER_DAILY_LIMIT_ETH: assetAmountSetting('ETH', '10'),
  SIGNER_DAILY_LIMIT_USDT: assetAmountSetting('USDT', '50000'),
  SIGNER_DAILY_LIMIT_USDC: assetAmountSetting('USDC', '50000'),
  /** maxFeePerGas cap of every transaction (wei per gas). */
  SIGNER_MAX_FEE_PER_GAS_WEI: bigintSetting({ default: DEFAULT_MAX_FEE_PER_GAS_WEI.toString(), min: 1n }),
  /** Gas limit cap of every transaction. */
  SIGNER_MAX_GAS_LIMIT: bigintSetting({ default: DEFAULT_MAX_GAS_LIMIT.toString(), min: 21_000n, max: 30_000_000n }),
  /** Largest gas top-up (wei) sent from the treasury to a deposit address. */
  SIGNER_MAX_GAS_TOP_UP_WEI: bigintSetting({ default: DEFAULT_MAX_GAS_TOP_UP_WEI.toString(), min: 1n }),
  /** maxPriorityFeePerGas cap of every transaction (wei per gas): the part a block's proposer keeps. */
  SIGNER_MAX_PRIORITY_FEE_PER_GAS_WEI: bigintSetting({ default: DEFAULT_MAX_PRIORITY_FEE_PER_GAS_WEI.toString(), min: 1n }),
  /** Largest sum of gas_limit × max_fee_per_gas (wei) over the signatures of a UTC day, all purposes. */
  SIGNER_DAILY_FEE_LIMIT_WEI: bigintSetting({ devDefault: DEV_DAILY_FEE_LIMIT_WEI.toString(), min: 1n }),
  /** Largest sum of gas top-up values (wei) signed per UTC day. */
  SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI: bigintSetting({ devDefault: DEV_DAILY_GAS_TOP_UP_LIMIT_WEI.toString(), min: 1n }),
  // The Tron treasury (docs/treasury.md#tron). USDT on Tron shares SIGNER_MAX_PAYOUT_USDT and
  // SIGNER_DAILY_LIMIT_USDT with Ethereum's: one dollar exposure per day, whichever chain pays.
  /** The invoice service's TRX account key: the seed's m/44'/195'/0' must be it. Empty: Tron is not signed. */
  INVOICE_XPUB_TRX: accountXpubSetting('TRX', 'mainnet'),
  /** The TRC-20 USDT contract a Tron USDT payout calls (the watcher's setting). */
  CHAIN_TRON_USDT_CONTRACT: tronFamily.watcherSettings.CHAIN_TRON_USDT_CONTRACT,
  SIGNER_MAX_PAYOUT_TRX: assetAmountSetting('TRX', '20000'),
  SIGNER_DAILY_LIMIT_TRX: assetAmountSetting('TRX', '200000'),
  /** The largest fee_limit (sun) a TRC-20 call may carry: what one call can burn for energy at most. */
  SIGNER_MAX_FEE_LIMIT_SUN: bigintSetting({ default: DEFAULT_MAX_FEE_LIMIT_SUN.toString(), min: 1n, max: 15_000_000_000n }),
  /**
   * The latest expiration a Tron transaction may carry, from the signer's clock. java-tron refuses
   * expirations more than 24 h after its head block; a short window bounds how long a signed but
   * unbroadcast transaction stays a threat, and how long a payout waits before a re-signature.
   */
  SIGNER_TRON_MAX_EXPIRATION: setting.duration({ default: '10m', minMs: 60_000, maxMs: 24 * 3_600_000 }),
  /** Bitcoin and Litecoin (docs/treasury.md#utxo-signer-policy). */
  ...utxoSignerSettings,
} as const;

export type SignerConfig = ConfigOf<typeof signerSettings>;

/** The XPUB variables the signer compares its account key with. */
export const SIGNER_XPUB_VARIABLES = ['INVOICE_XPUB_ETH', 'INVOICE_XPUB_USDT', 'INVOICE_XPUB_USDC', 'INVOICE_XPUB_POL', 'INVOICE_XPUB_BNB'] as const;

/** Per-asset limits, as the policy reads them. */
export interface AssetLimits {
  maxPayout: bigint;
  dailyLimit: bigint;
}

export function assetLimitsOf(config: SignerConfig): Record<SignerAsset, AssetLimits> {
  return {
    ETH: { maxPayout: config.SIGNER_MAX_PAYOUT_ETH, dailyLimit: config.SIGNER_DAILY_LIMIT_ETH },
    USDT: { maxPayout: config.SIGNER_MAX_PAYOUT_USDT, dailyLimit: config.SIGNER_DAILY_LIMIT_USDT },
    USDC: { maxPayout: config.SIGNER_MAX_PAYOUT_USDC, dailyLimit: config.SIGNER_DAILY_LIMIT_USDC },
  };
}

/**
 * PAYOUT_AUTO_MAX_<ASSET> by asset code, decimal strings: a payout above it is signed only once an
 * operator approved it, as the processors claim it only then (docs/treasury.md#signer-policy).
 */
export type AutoMaxima = Readonly<Record<string, string>>;


