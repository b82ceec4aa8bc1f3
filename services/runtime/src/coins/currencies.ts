/**
 * The currency registry (docs/architecture.md#money): the fiat price currencies and crypto pay currencies the
 * service supports, with what the rest of the domain needs to know about each.
 */
import { Decimal, formatPlain, refused, toBaseUnits, type Parsed } from './money';

export const FIAT_CODES = ['USD', 'EUR', 'GBP', 'JPY', 'CHF', 'CAD', 'AUD'] as const;
export type FiatCode = (typeof FIAT_CODES)[number];

export const CRYPTO_CODES = ['BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX'] as const;
export type CryptoCode = (typeof CRYPTO_CODES)[number];

/** Live projects use mainnet; sandbox projects use the coin's testnet (same key formats). */
export type Network = 'mainnet' | 'testnet';
export const NETWORKS: readonly Network[] = ['mainnet', 'testnet'];

export type Chain = 'bitcoin' | 'litecoin' | 'ethereum' | 'tron';

/**
 * How a coin's addresses look. `p2wpkh`: native segwit v0 key hash, bech32 (BIP173/BIP84);
 * `eip55`: 0x + 40 hex with the EIP-55 mixed-case checksum; `tron-base58check`: base58check of
 * 0x41 + the 20-byte Ethereum-style key hash, "T…".
 */
export type AddressFormat = 'p2wpkh' | 'eip55' | 'tron-base58check';

export interface FiatCurrency {
  readonly kind: 'fiat';
  readonly code: FiatCode;
  readonly name: string;
  /** ISO 4217 minor units: the decimals a price may have (2 for USD, 0 for JPY). */
  readonly minorUnits: number;
}

export interface Erc20Token {
  readonly standard: 'erc20';
  /** The token contract (EIP-55) per network; testnet is Sepolia. */
  readonly contract: Readonly<Record<Network, string>>;
}

export interface CryptoCurrency {
  readonly kind: 'crypto';
  readonly code: CryptoCode;
  readonly name: string;
  readonly chain: Chain;
  /** Decimals of the smallest on-chain unit: satoshi 8, wei 18, USDT/USDC token units 6, sun 6. */
  readonly baseUnitDecimals: number;
  /**
   * Decimals of invoice and payout amounts: 8 (docs/architecture.md#money), or fewer when the coin's base unit is
   * coarser (USDT/USDC/TRX: 6), so every amount is a whole number of base units and can be paid.
   */
  readonly amountDecimals: number;
  readonly addressFormat: AddressFormat;
  /** SLIP-44 coin type of the BIP44 path m/purpose'/coin'/account' on mainnet; testnets use 1. */
  readonly bip44CoinType: number;
  /** BIP44 purpose: 84 (native segwit) for BTC/LTC, 44 for account-based chains. */
  readonly derivationPurpose: 44 | 84;
  /** Scheme of the wallet payment URI shown as a QR code on the checkout page. */
  readonly uriScheme: 'bitcoin' | 'litecoin' | 'ethereum' | 'tron';
  /** Set for tokens: the payment is a contract call, not a native transfer. */
  readonly token?: Erc20Token;
  /**
   * UTXO chains: the smallest P2WPKH output, in base units, that nodes relay. Below it an output is
   * "dust" and a standard wallet cannot send it: Bitcoin Core's dust threshold at its default
   * dust relay fee of 3,000 sat/kvB is 294 sat; Litecoin Core's fee is ten times that (30,000).
   */
  readonly dustLimitBaseUnits?: number;
}

export type Currency = FiatCurrency | CryptoCurrency;

const fiat = (code: FiatCode, name: string, minorUnits: number): FiatCurrency => ({ kind: 'fiat', code, name, minorUnits });

const FIAT: Readonly<Record<FiatCode, FiatCurrency>> = {
  USD: fiat('USD', 'US Dollar', 2),
  EUR: fiat('EUR', 'Euro', 2),
  GBP: fiat('GBP', 'Pound Sterling', 2),
  JPY: fiat('JPY', 'Yen', 0),
  CHF: fiat('CHF', 'Swiss Franc', 2),
  CAD: fiat('CAD', 'Canadian Dollar', 2),
  AUD: fiat('AUD', 'Australian Dollar', 2),
};

const CRYPTO: Readonly<Record<CryptoCode, CryptoCurrency>> = {
  BTC: {
    kind: 'crypto',
    code: 'BTC',
    name: 'Bitcoin',
    chain: 'bitcoin',
    baseUnitDecimals: 8,
    amountDecimals: 8,
    addressFormat: 'p2wpkh',
    bip44CoinType: 0,
    derivationPurpose: 84,
    uriScheme: 'bitcoin',
    dustLimitBaseUnits: 294,
  },
  LTC: {
    kind: 'crypto',
    code: 'LTC',
    name: 'Litecoin',
    chain: 'litecoin',
    baseUnitDecimals: 8,
    amountDecimals: 8,
    addressFormat: 'p2wpkh',
    bip44CoinType: 2,
    derivationPurpose: 84,
    uriScheme: 'litecoin',
    dustLimitBaseUnits: 2_940,
  },
  ETH: {
    kind: 'crypto',
    code: 'ETH',
    name: 'Ether',
    chain: 'ethereum',
    baseUnitDecimals: 18,
    amountDecimals: 8,
    addressFormat: 'eip55',
    bip44CoinType: 60,
    derivationPurpose: 44,
    uriScheme: 'ethereum',
  },
  USDT: {
    kind: 'crypto',
    code: 'USDT',
    name: 'Tether USD (ERC-20)',
    chain: 'ethereum',
    baseUnitDecimals: 6,
    amountDecimals: 6,
    addressFormat: 'eip55',
    bip44CoinType: 60,
    derivationPurpose: 44,
    uriScheme: 'ethereum',
    token: {
      standard: 'erc20',
      // Tether has no official Sepolia deployment; this is Aave's widely used Sepolia USDT faucet token.
      contract: { mainnet: '0xdAC17F958D2ee523a2206206994597C13D831ec7', testnet: '0xaA8E23Fb1079EA71e0a56F48a2aA51851D8433D0' },
    },
  },
  USDC: {
    kind: 'crypto',
    code: 'USDC',
    name: 'USD Coin (ERC-20)',
    chain: 'ethereum',
    baseUnitDecimals: 6,
    amountDecimals: 6,
    addressFormat: 'eip55',
    bip44CoinType: 60,
    derivationPurpose: 44,
    uriScheme: 'ethereum',
    token: {
      standard: 'erc20',
      // Circle's official contracts (testnet: Ethereum Sepolia).
      contract: { mainnet: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48', testnet: '0x1c7D4B196Cb0C7B01d743Fbc6116a902379C7238' },
    },
  },
  TRX: {
    kind: 'crypto',
    code: 'TRX',
    name: 'Tron',
    chain: 'tron',
    baseUnitDecimals: 6,
    amountDecimals: 6,
    addressFormat: 'tron-base58check',
    bip44CoinType: 195,
    derivationPurpose: 44,
    uriScheme: 'tron',
  },
};

/** Chain ids for EIP-681 URIs: Ethereum mainnet and Sepolia. */
export const EVM_CHAIN_ID: Readonly<Record<Network, number>> = { mainnet: 1, testnet: 11155111 };

export const SUPPORTED_FIAT: readonly FiatCurrency[] = FIAT_CODES.map((code) => FIAT[code]);
export const SUPPORTED_CRYPTO: readonly CryptoCurrency[] = CRYPTO_CODES.map((code) => CRYPTO[code]);

export function isFiatCode(code: unknown): code is FiatCode {
  return typeof code === 'string' && (FIAT_CODES as readonly string[]).includes(code);
}

export function isCryptoCode(code: unknown): code is CryptoCode {
  return typeof code === 'string' && (CRYPTO_CODES as readonly string[]).includes(code);
}

/** The registry entry of a known fiat code. */
export function fiatCurrency(code: FiatCode): FiatCurrency {
  return FIAT[code];
}

/** The registry entry of a known crypto code. */
export function cryptoCurrency(code: CryptoCode): CryptoCurrency {
  return CRYPTO[code];
}

/**
 * The smallest amount of a coin that can be asked for or paid out: one unit of its amount
 * decimals, or on UTXO chains the dust limit (a smaller output is not relayed, so an invoice
 * for less could never be paid and a payout for less never sent).
 */
export function minimumAmount(currency: CryptoCurrency): Decimal {
  const unit = new Decimal(10).pow(-currency.amountDecimals);
  if (currency.dustLimitBaseUnits === undefined) return unit;
  return Decimal.max(unit, new Decimal(currency.dustLimitBaseUnits).div(new Decimal(10).pow(currency.baseUnitDecimals)));
}

/**
 * Looks up an untrusted fiat code, in any letter case (`"eur"` is EUR: the value carries the
 * canonical upper-case code). Unsupported codes are refused with a reason naming the supported
 * ones, e.g. `unsupported currency "XYZ"; supported: USD, EUR, …`.
 */
export function findFiatCurrency(code: unknown): Parsed<FiatCurrency> {
  const canonical = upperCased(code);
  return isFiatCode(canonical) ? { ok: true, value: FIAT[canonical] } : refused(unsupported(code, FIAT_CODES));
}

/** Looks up an untrusted crypto code, in any letter case; see `findFiatCurrency`. */
export function findCryptoCurrency(code: unknown): Parsed<CryptoCurrency> {
  const canonical = upperCased(code);
  return isCryptoCode(canonical) ? { ok: true, value: CRYPTO[canonical] } : refused(unsupported(code, CRYPTO_CODES));
}

function upperCased(code: unknown): unknown {
  return typeof code === 'string' ? code.toUpperCase() : code;
}

function unsupported(code: unknown, supported: readonly string[]): string {
  const shown = typeof code === 'string' ? `"${code.length > 16 ? `${code.slice(0, 16)}…` : code}"` : `of type ${typeof code}`;
  return `unsupported currency ${shown}; supported: ${supported.join(', ')}`;
}

/**
 * The wallet payment URI for the checkout QR code.
 * - BTC/LTC: BIP21 `bitcoin:<address>?amount=<BTC>` (`litecoin:` likewise).
 * - ETH: EIP-681 `ethereum:<address>[@chainId]?value=<wei>`.
 * - ERC-20: EIP-681 `ethereum:<tokenContract>[@chainId]/transfer?address=<address>&uint256=<token base units>`.
 * - TRX: `tron:<address>?amount=<TRX>`.
 * The chain id is written for testnet only: without one a wallet uses its current chain, which for
 * mainnet is the common case, while a Sepolia payment must never be sent on mainnet.
 * `amount` must have at most the coin's `amountDecimals` (quotes guarantee it).
 */
export function paymentUri(currency: CryptoCurrency, network: Network, address: string, amount: Decimal): string {
  switch (currency.uriScheme) {
    case 'bitcoin':
    case 'litecoin':
    case 'tron':
      toBaseUnits(amount, currency.baseUnitDecimals); // asserts the amount is payable on chain
      return `${currency.uriScheme}:${address}?amount=${formatPlain(amount)}`;
    case 'ethereum': {
      const chain = network === 'testnet' ? `@${EVM_CHAIN_ID.testnet}` : '';
      const baseUnits = toBaseUnits(amount, currency.baseUnitDecimals).toString();
      if (currency.token) {
        return `ethereum:${currency.token.contract[network]}${chain}/transfer?address=${address}&uint256=${baseUnits}`;
      }
      return `ethereum:${address}${chain}?value=${baseUnits}`;
    }
  }
}
