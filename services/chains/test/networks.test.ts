/**
 * The EVM network registry's facts (services/chains/src/evm/networks.ts, docs/networks.md): every
 * contract is written in its EIP-55 form (a typo in one character breaks the checksum), the
 * Binance-Peg tokens on bsc have 18 decimals, every default confirmation count names its source,
 * and the settings generated for each network are exactly the ones its entry implies.
 */
import { loadConfig } from '@coinvoice/runtime';
import { eip55 } from '../../invoice/test/support/independent-codecs';
import { EVM_CHAINS, EVM_NETWORKS, type EvmNetworkEntry, type EvmTokenCode } from '../src/evm/networks';
import { evmWatcherConfig } from '../src/evm/family';
import { chainSources, chainWatcherSettings, WATCHED_CHAINS } from '../src/watchers';
import { USDC_TRON, USDT_TRON } from '../src/tron/coins';

const entries = (): EvmNetworkEntry[] => EVM_CHAINS.map((chain) => EVM_NETWORKS[chain]);
const tokensOf = (entry: EvmNetworkEntry) => Object.entries(entry.tokens) as Array<[EvmTokenCode, NonNullable<EvmNetworkEntry['tokens']['USDT']>]>;

describe('the EVM network registry', () => {
  it('writes every contract, main and test chain, in its EIP-55 checksummed form', () => {
    const written: string[] = [];
    for (const entry of entries()) {
      for (const [, token] of tokensOf(entry)) {
        for (const contract of [token.mainnet, token.testnet]) {
          if (contract === null) continue;
          written.push(contract);
          expect(`${entry.chain}: ${contract}`).toBe(`${entry.chain}: ${eip55(contract.slice(2).toLowerCase())}`);
        }
      }
    }
    // Twelve mainnet contracts (USDC only on base) and the test-chain ones that exist.
    expect(written.length).toBeGreaterThanOrEqual(11);
  });

  it('holds the issuers\' contracts, never the bridged USDC.e / USDbC ones', () => {
    const usdc = Object.fromEntries(entries().map((e) => [e.chain, e.tokens.USDC?.mainnet]));
    expect(usdc).toEqual({
      ethereum: '0xA0b86991c6218b36c1d19D4a2e9Eb0cE3606eB48',
      base: '0x833589fCD6eDb6E08f4c7C32D4f71b54bdA02913',
      arbitrum: '0xaf88d065e77c8cC2239327C5EDb3A432268e5831',
      optimism: '0x0b2C639c533813f4Aa9D7837CAf62653d097Ff85',
      polygon: '0x3c499c542cEF5E3811e1192ce70d8cC03d5c3359',
      bsc: '0x8AC76a51cc950d9822D68b83fE1Ad97B32Cd580d',
    });
    const bridged = ['0x2791Bca1f2de4661ED88A30C99A7a9449Aa84174', '0xd9aAEc86B65D86f6A7B5B1b0c42FFA531710b6CA', '0xFF970A61A04b1cA14834A43f5dE4533eBDDB5CC8', '0x7F5c764cBc14f9669B88837ca1490cCa17c31607'];
    const all = entries().flatMap((e) => tokensOf(e).map(([, t]) => t.mainnet.toLowerCase()));
    for (const address of bridged) expect(all).not.toContain(address.toLowerCase());
    expect(Object.fromEntries(entries().map((e) => [e.chain, e.tokens.USDT?.mainnet ?? null]))).toEqual({
      ethereum: '0xdAC17F958D2ee523a2206206994597C13D831ec7',
      base: null,
      arbitrum: '0xFd086bC7CD5C481DCC9C85ebE478A1C0b69FCbb9',
      optimism: '0x94b008aA00579c1307B0EF2c499aD98a8ce58e58',
      polygon: '0xc2132D05D31c914a87C6611C10748AEb04B58e8F',
      bsc: '0x55d398326f99059fF775485246999027B3197955',
    });
    expect(USDT_TRON.token?.contract.mainnet).toBe('TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t');
    expect(USDC_TRON.token?.contract.mainnet).toBe('TEkxiTehnzSmSe2XqrBj4w32RUN966rdz8');
  });

  it('gives the Binance-Peg tokens on bsc 18 decimals and every other stablecoin 6', () => {
    for (const entry of entries()) {
      for (const [code, token] of tokensOf(entry)) expect(`${entry.chain} ${code} ${token.decimals}`).toBe(`${entry.chain} ${code} ${entry.chain === 'bsc' ? 18 : 6}`);
    }
  });

  it('cites a source for every default confirmation count (none left to verify)', () => {
    for (const entry of entries()) {
      expect(entry.confirmationsSource).not.toMatch(/TO VERIFY/i);
      expect(entry.confirmationsSource.length).toBeGreaterThan(20);
      expect(entry.confirmationsSource).toContain(String(entry.confirmations));
      expect(Number.isInteger(entry.confirmations) && entry.confirmations >= 1).toBe(true);
    }
    expect(Object.fromEntries(entries().map((e) => [e.chain, e.confirmations]))).toEqual({ ethereum: 12, base: 10, arbitrum: 30, optimism: 10, polygon: 127, bsc: 15 });
  });

  it('generates each network\'s settings from its entry, and only those', () => {
    const names = Object.keys(chainWatcherSettings);
    for (const entry of entries()) {
      const prefix = `CHAIN_${entry.chain.toUpperCase()}_`;
      const own = names.filter((n) => n.startsWith(prefix)).sort();
      const tokens = tokensOf(entry).map(([code]) => `${prefix}${code}_CONTRACT`);
      expect(own).toEqual([...['RPC_URL', 'RPC_TIMEOUT_MS', 'CHAIN_ID', 'CONFIRMATIONS', 'POLL_MS', 'BATCH_BLOCKS'].map((s) => `${prefix}${s}`), ...tokens].sort());
    }
    expect(names).toContain('CHAIN_BASE_RPC_URL');
    expect(names).toContain('CHAIN_BASE_USDC_CONTRACT');
    expect(names).not.toContain('CHAIN_BASE_USDT_CONTRACT');
    expect(names).toContain('CHAIN_BSC_USDT_CONTRACT');
  });

  it('reads each network\'s defaults out of an empty environment: not watched, the registry\'s chain id, confirmations and contracts', () => {
    const config = loadConfig(chainWatcherSettings, {});
    const sources = chainSources(config);
    for (const entry of entries()) {
      const node = evmWatcherConfig(config, entry.chain);
      expect(node.rpcUrl).toBe('');
      expect(node.chainId).toBe(entry.chainId.mainnet);
      expect(node.confirmations).toBe(entry.confirmations);
      expect(node.tokens).toEqual(Object.fromEntries(tokensOf(entry).map(([code, t]) => [code, t.mainnet])));
      expect(sources[entry.chain]?.sourceVariable).toBe(`CHAIN_${entry.chain.toUpperCase()}_RPC_URL`);
      expect(sources[entry.chain]?.adapter()).toBeNull();
      expect(WATCHED_CHAINS).toContain(entry.chain);
    }
    const base = evmWatcherConfig(loadConfig(chainWatcherSettings, { CHAIN_BASE_RPC_URL: 'http://127.0.0.1:9/', CHAIN_BASE_CONFIRMATIONS: '3' }), 'base');
    expect([base.rpcUrl, base.confirmations]).toEqual(['http://127.0.0.1:9/', 3]);
  });
});
