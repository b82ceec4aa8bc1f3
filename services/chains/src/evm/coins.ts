/**
 * The EVM family's coins, one registry entry per (asset, network) of the network registry
 * (networks.ts): each network's native coin and the stablecoins it carries.
 */
import type { Network } from '@coinvoice/domain/project-network';
import type { CryptoCurrency } from '../coin';
import { EVM_CHAINS, EVM_NETWORKS, type EvmChain, type EvmNetworkEntry } from './networks';

function nativeCoin(network: EvmNetworkEntry): CryptoCurrency {
  return {
    kind: 'crypto',
    code: network.native.code,
    name: network.native.name,
    chain: network.chain,
    keyCurrency: network.native.code,
    baseUnitDecimals: 18,
    amountDecimals: 8,
    addressFormat: 'eip55',
    bip44CoinType: 60,
    derivationPurpose: 44,
    uriScheme: 'ethereum',
  };
}

function tokenCoins(network: EvmNetworkEntry): CryptoCurrency[] {
  return (Object.entries(network.tokens) as Array<[keyof typeof network.tokens, NonNullable<EvmNetworkEntry['tokens']['USDT']>]>).map(([code, token]) => ({
    kind: 'crypto',
    code,
    name: token.name,
    chain: network.chain,
    keyCurrency: code,
    baseUnitDecimals: token.decimals,
    // Invoice and payout amounts keep 6 decimals (a millionth of a dollar) on every network, so an
    // amount means the same on each; 18-decimal tokens receive it as a whole number of base units.
    amountDecimals: 6,
    addressFormat: 'eip55',
    bip44CoinType: 60,
    derivationPurpose: 44,
    uriScheme: 'ethereum',
    token: { standard: 'erc20', contract: { mainnet: token.mainnet, testnet: token.testnet } },
  }));
}

/** Every EVM (asset, network) entry, network by network in registry order. */
export const EVM_PAY_METHODS: readonly CryptoCurrency[] = EVM_CHAINS.flatMap((chain) => {
  const network: EvmNetworkEntry = EVM_NETWORKS[chain];
  return [nativeCoin(network), ...tokenCoins(network)];
});

function entry(code: string, chain: EvmChain): CryptoCurrency {
  const found = EVM_PAY_METHODS.find((c) => c.code === code && c.chain === chain);
  if (!found) throw new Error(`no ${code} on ${chain}`);
  return found;
}

/** The assets on their default EVM network (today's ETH, USDT, USDC on ethereum; POL on polygon; BNB on bsc). */
export const ETH = entry('ETH', 'ethereum');
export const USDT = entry('USDT', 'ethereum');
export const USDC = entry('USDC', 'ethereum');
export const POL = entry('POL', 'polygon');
export const BNB = entry('BNB', 'bsc');

/** The Ethereum network's coins by code (the Ethereum treasury and its checks read these). */
export const EVM_COINS = { ETH, USDT, USDC } as const;

/** EIP-155 chain id of an EVM network on a project's network (mainnet, or the test chain for sandbox). */
export function evmChainId(chain: EvmChain, network: Network): number {
  const ids = EVM_NETWORKS[chain].chainId;
  return network === 'mainnet' ? ids.mainnet : ids.testnet;
}
