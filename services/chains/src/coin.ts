/**
 * What a coin is to the rest of the repository: its code, its chain, and the registry entry every
 * family module fills in for its coins (currencies.ts assembles them).
 */
import type { FiatCurrency } from '@coinvoice/domain/fiat';
import type { Network } from '@coinvoice/domain/project-network';
import { EVM_CHAINS } from './evm/networks';

/** Every coin the service takes and pays out (registry order: the order APIs list them in). */
export const CRYPTO_CODES = ['BTC', 'LTC', 'ETH', 'USDT', 'USDC', 'TRX', 'POL', 'BNB'] as const;
export type CryptoCode = (typeof CRYPTO_CODES)[number];

/**
 * The networks an asset is paid on: the public `payNetwork` (docs/networks.md); the EVM ones come
 * from the EVM network registry (evm/networks.ts). Registry order: the
 * order APIs list them in. In code a network is a `Chain`: "network" already names a project's
 * mainnet/testnet (domain/project-network.ts).
 */
export const PAY_NETWORKS = ['bitcoin', 'litecoin', ...EVM_CHAINS, 'tron'] as const;
export type Chain = (typeof PAY_NETWORKS)[number];

/**
 * How a coin's addresses look. `p2wpkh`: native segwit v0 key hash, bech32 (BIP173/BIP84);
 * `eip55`: 0x + 40 hex with the EIP-55 mixed-case checksum; `tron-base58check`: base58check of
 * 0x41 + the 20-byte Ethereum-style key hash, "T…".
 */
export type AddressFormat = 'p2wpkh' | 'eip55' | 'tron-base58check';

export interface TokenContract {
  /** ERC-20 on EVM networks, TRC-20 on Tron: a Transfer(from, to, value) event per movement. */
  readonly standard: 'erc20' | 'trc20';
  /**
   * The issuer's contract: EIP-55 on EVM networks, base58check on Tron. `testnet` is the network's
   * test chain (Sepolia, Base Sepolia, Amoy, Nile…), null where the issuer has none there.
   */
  readonly contract: { readonly mainnet: string; readonly testnet: string | null };
}

/**
 * One registry entry: an asset AS PAID ON ONE NETWORK (USDT on bsc is not USDT on ethereum: another
 * contract, 18 decimals, other confirmations). `cryptoCurrency(code)` is the asset on its default
 * network; `payMethod(code, chain)` any pair (currencies.ts).
 */
export interface CryptoCurrency {
  readonly kind: 'crypto';
  readonly code: CryptoCode;
  readonly name: string;
  /** The network this entry is paid on (the public `payNetwork`). */
  readonly chain: Chain;
  /**
   * The coin whose account key (INVOICE_XPUB_<COIN>) derives this entry's addresses: the asset
   * itself on EVM networks (USDT on bsc shares USDT's key and counter with USDT on ethereum: one
   * EVM key, one address space), TRX for Tron's TRC-20 tokens (a Tron account holds them).
   */
  readonly keyCurrency: CryptoCode;
  /** Decimals of the smallest on-chain unit: satoshi 8, wei 18, USDT/USDC token units 6 (18 on bsc), sun 6. */
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
  readonly token?: TokenContract;
  /**
   * UTXO chains: the smallest P2WPKH output, in base units, that nodes relay. Below it an output is
   * "dust" and a standard wallet cannot send it: Bitcoin Core's dust threshold at its default
   * dust relay fee of 3,000 sat/kvB is 294 sat; Litecoin Core's fee is ten times that (30,000).
   */
  readonly dustLimitBaseUnits?: number;
}

export type Currency = FiatCurrency | CryptoCurrency;
