/** The EVM family's coins: Ether and the ERC-20 stablecoins USDT and USDC on Ethereum. */
import type { Network } from '@coinvoice/domain/project-network';
import type { CryptoCurrency } from '../coin';

export const ETH: CryptoCurrency = {
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
};

export const USDT: CryptoCurrency = {
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
};

export const USDC: CryptoCurrency = {
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
};

/** The family's coins by code (the watcher's adapter reads decimals and contracts from here). */
export const EVM_COINS = { ETH, USDT, USDC } as const;

/** Chain ids for EIP-681 URIs: Ethereum mainnet and Sepolia. */
export const EVM_CHAIN_ID: Readonly<Record<Network, number>> = { mainnet: 1, testnet: 11155111 };
