/**
 * The crypto currency registry (docs/architecture.md#money): the coins the service takes and pays out, with what
 * the rest of the domain needs to know about each (the fiat price currencies: domain/fiat.ts).
 */
import { upperCased, unsupportedCurrency } from '@coinvoice/domain/fiat';
import { Decimal, refused, type Parsed } from '@coinvoice/domain/money';
import type { Network } from '@coinvoice/domain/project-network';
import { CRYPTO_CODES, PAY_NETWORKS, type Chain, type CryptoCode, type CryptoCurrency } from './coin';
import { evmChainId } from './evm/coins';
import { evmFamily } from './evm/family';
import type { PaymentTarget } from './family';
import { EVM_NETWORKS, isEvmChain } from './evm/networks';
import { tronFamily } from './tron/family';
import { utxoFamily } from './utxo/family';

/**
 * The chain families, one module each (family.ts). Adding a family is adding its module here; its
 * coins, addresses, URIs, watcher and confirmation policy come with it.
 */
export const CHAIN_FAMILIES = [utxoFamily, evmFamily, tronFamily] as const;

export type AnyChainFamily = (typeof CHAIN_FAMILIES)[number];

/**
 * Every (asset, network) the service knows, family by family (docs/networks.md). Whether one is
 * enabled is configuration (the invoice service's PAY_NETWORKS and the families' settings).
 */
export const PAY_METHODS: readonly CryptoCurrency[] = CHAIN_FAMILIES.flatMap((family) => family.currencies);

/**
 * Each asset's default network: where `payNetwork` left out sends it, which keeps the behaviour
 * from before networks (BTC→bitcoin, ETH/USDT/USDC→ethereum, TRX→tron, POL→polygon, BNB→bsc).
 */
export const DEFAULT_NETWORK: Readonly<Record<CryptoCode, Chain>> = {
  BTC: 'bitcoin',
  LTC: 'litecoin',
  ETH: 'ethereum',
  USDT: 'ethereum',
  USDC: 'ethereum',
  TRX: 'tron',
  POL: 'polygon',
  BNB: 'bsc',
};

const PAY_METHOD_BY_KEY = new Map<string, CryptoCurrency>();
for (const method of PAY_METHODS) {
  const key = `${method.code}@${method.chain}`;
  if (PAY_METHOD_BY_KEY.has(key)) throw new Error(`${key} has two registry entries`);
  PAY_METHOD_BY_KEY.set(key, method);
}
const CRYPTO = Object.fromEntries(
  CRYPTO_CODES.map((code) => {
    const entry = PAY_METHOD_BY_KEY.get(`${code}@${DEFAULT_NETWORK[code]}`);
    if (!entry) throw new Error(`${code} has no registry entry on its default network ${DEFAULT_NETWORK[code]}`);
    return [code, entry];
  }),
) as Readonly<Record<CryptoCode, CryptoCurrency>>;
const FAMILY_OF_CHAIN = new Map<Chain, AnyChainFamily>(
  CHAIN_FAMILIES.flatMap((family) => family.currencies.map((coin) => [coin.chain, family] as const)),
);
for (const chain of PAY_NETWORKS) if (!FAMILY_OF_CHAIN.has(chain)) throw new Error(`network ${chain} has no chain family`);

export function isPayNetwork(value: unknown): value is Chain {
  return typeof value === 'string' && (PAY_NETWORKS as readonly string[]).includes(value);
}

/** The registry entry of `code` paid on `chain`, or undefined when that network does not carry it. */
export function payMethod(code: CryptoCode, chain: Chain): CryptoCurrency | undefined {
  return PAY_METHOD_BY_KEY.get(`${code}@${chain}`);
}

/** A network as customers know it: "Bitcoin", "Base", "BNB Smart Chain", "Tron"… */
export function networkLabel(chain: Chain): string {
  if (isEvmChain(chain)) return EVM_NETWORKS[chain].label;
  return { bitcoin: 'Bitcoin', litecoin: 'Litecoin', tron: 'Tron' }[chain];
}

/** The networks that carry `code`, in registry order. */
export function networksCarrying(code: CryptoCode): Chain[] {
  return PAY_NETWORKS.filter((chain) => PAY_METHOD_BY_KEY.has(`${code}@${chain}`));
}

/** The family module of a chain. */
export function familyOf(chain: Chain): AnyChainFamily {
  const family = FAMILY_OF_CHAIN.get(chain);
  if (!family) throw new Error(`no chain family has ${chain}`);
  return family;
}

/** One entry per asset: each on its default network. */
export const SUPPORTED_CRYPTO: readonly CryptoCurrency[] = CRYPTO_CODES.map((code) => CRYPTO[code]);

export function isCryptoCode(code: unknown): code is CryptoCode {
  return typeof code === 'string' && (CRYPTO_CODES as readonly string[]).includes(code);
}

/** The registry entry of a known crypto code on its default network (DEFAULT_NETWORK). */
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
 * coin's `amountDecimals` (quotes guarantee it). `target` names the contract and chain id: the
 * caller's, so that a live invoice's URI names what its watcher watches (family.ts PaymentTarget).
 */
export function paymentUri(currency: CryptoCurrency, address: string, amount: Decimal, target: PaymentTarget): string {
  return familyOf(currency.chain).paymentUri(currency, address, amount, target);
}

/**
 * The registry's contract and chain id of `currency` on `network` (mainnet, or the network's test
 * chain): what a sandbox invoice's URI names, since its test chain is the registry's. A live
 * invoice's come from the deployment's configuration instead (invoice domain/pay-methods.ts).
 */
export function registryPaymentTarget(currency: CryptoCurrency, network: Network): PaymentTarget {
  const contract = currency.token ? (network === 'mainnet' ? currency.token.contract.mainnet : currency.token.contract.testnet) : null;
  return { contract, chainId: isEvmChain(currency.chain) ? evmChainId(currency.chain, network) : undefined };
}
