/**
 * What a coin is to the rest of the repository: its code, its chain, and the registry entry every
 * family module fills in for its coins (currencies.ts assembles them).
 */
import type { FiatCurrency } from '@coinvoice/domain/fiat';
import type { Network } from '@coinvoice/domain/project-network';

/** Every coin the service takes and pays out (registry order: the order APIs list them in). */
export const CRYPTO_CODES = ['BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX'] as const;
export type CryptoCode = (typeof CRYPTO_CODES)[number];

export type Chain = 'bitcoin' | 'litecoin' | 'ethereum' | 'tron';

/**
 * How a coin's addresses look. `p2wpkh`: native segwit v0 key hash, bech32 (BIP173/BIP84);
 * `eip55`: 0x + 40 hex with the EIP-55 mixed-case checksum; `tron-base58check`: base58check of
 * 0x41 + the 20-byte Ethereum-style key hash, "T…".
 */
export type AddressFormat = 'p2wpkh' | 'eip55' | 'tron-base58check';

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
   * Decimals of invoice and payout amounts: 8 (docs/architecture.md#invoices), or fewer when the coin's base unit is
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
