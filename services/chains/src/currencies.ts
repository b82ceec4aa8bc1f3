/**
 * The crypto currency registry (docs/architecture.md#money): the coins the service takes and pays out, with what
 * the rest of the domain needs to know about each (the fiat price currencies: domain/fiat.ts).
 */
import { upperCased, unsupportedCurrency } from '@coinvoice/domain/fiat';
import { Decimal, refused, type Parsed } from '@coinvoice/domain/money';
import type { Network } from '@coinvoice/domain/project-network';
import { CRYPTO_CODES, type Chain, type CryptoCode, type CryptoCurrency } from './coin';
import { evmFamily } from './evm/family';
import { tronFamily } from './tron/family';
import { utxoFamily } from './utxo/family';

/**
 * The chain families, one module each (family.ts). Adding a family is adding its module here; its
 * coins, addresses, URIs, watcher and confirmation policy come with it.
 */
export const CHAIN_FAMILIES = [utxoFamily, evmFamily, tronFamily] as const;

export type AnyChainFamily = (typeof CHAIN_FAMILIES)[number];

const CRYPTO = Object.fromEntries(CHAIN_FAMILIES.flatMap((family) => family.currencies.map((coin) => [coin.code, coin]))) as Readonly<Record<CryptoCode, CryptoCurrency>>;
for (const code of CRYPTO_CODES) {
  const entries = CHAIN_FAMILIES.flatMap((family) => family.currencies).filter((coin) => coin.code === code);
  if (entries.length !== 1) throw new Error(`${code} must have one registry entry in one chain family, has ${entries.length}`);
}
const FAMILY_OF_CHAIN = new Map<Chain, AnyChainFamily>(
  CHAIN_FAMILIES.flatMap((family) => family.currencies.map((coin) => [coin.chain, family] as const)),
);

/** The family module of a chain. */
export function familyOf(chain: Chain): AnyChainFamily {
  const family = FAMILY_OF_CHAIN.get(chain);
  if (!family) throw new Error(`no chain family has ${chain}`);
  return family;
}

export const SUPPORTED_CRYPTO: readonly CryptoCurrency[] = CRYPTO_CODES.map((code) => CRYPTO[code]);

export function isCryptoCode(code: unknown): code is CryptoCode {
  return typeof code === 'string' && (CRYPTO_CODES as readonly string[]).includes(code);
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

/** Looks up an untrusted crypto code, in any letter case; see `findFiatCurrency`. */
export function findCryptoCurrency(code: unknown): Parsed<CryptoCurrency> {
  const canonical = upperCased(code);
  return isCryptoCode(canonical) ? { ok: true, value: CRYPTO[canonical] } : refused(unsupportedCurrency(code, CRYPTO_CODES));
}

/**
 * The wallet payment URI for the checkout QR code, written by the coin's family: BIP21 for
 * BTC/LTC, EIP-681 for ETH and ERC-20 tokens, `tron:` for TRX. `amount` must have at most the
 * coin's `amountDecimals` (quotes guarantee it).
 */
export function paymentUri(currency: CryptoCurrency, network: Network, address: string, amount: Decimal): string {
  return familyOf(currency.chain).paymentUri(currency, network, address, amount);
}
