/**
 * Adversarial review of issue 24 (networks): the EVM start-up check (verifyEvmNode,
 * docs/networks.md#configuration) against a real node — anvil answering bsc's MAINNET chain id 56.
 *
 * The check lets a configured token address with no contract through ("a development node without
 * the issuers' contracts"). On a node that says it is the main chain that is never a development
 * node: it is a wrong setting (the Ethereum USDT address pasted into CHAIN_BSC_USDT_CONTRACT, a
 * typo) or a node still syncing. The watcher then reads Transfer logs of an address that emits none,
 * while checkout's EIP-681 URI names the registry's contract (evm/family.ts paymentUri): every USDT
 * payment on bsc goes unseen and its invoice expires, with nothing refused at start.
 */
import { loadConfig } from '@coinvoice/runtime';
import { evmNodeConfig, evmNodeSettings, verifyEvmNode } from '../src/evm/family';
import { EVM_NETWORKS } from '../src/evm/networks';
import { deployTokens, sendTokenUnits, startAnvil, type Anvil, type Tokens } from '../../../test/support/anvil';
import { EthereumAdapter } from '../src/evm/ethereum-adapter';
import type { WatchedAddresses } from '../src/chain-adapter';

let bsc: Anvil;
let tokens: Tokens;
beforeAll(async () => {
  bsc = await startAnvil({ chainId: EVM_NETWORKS.bsc.chainId.mainnet });
  tokens = await deployTokens(bsc, { decimals: 18 });
}, 60_000);
afterAll(async () => {
  await bsc?.stop();
});

const config = (env: Record<string, string>) => evmNodeConfig(loadConfig(evmNodeSettings, env), 'bsc');

describe('review-networks: the start-up check on a main-chain node', () => {
  it("a node answering bsc's main chain id passes the start-up check with CHAIN_BSC_USDT_CONTRACT set to an address with no contract (here Ethereum's USDT address), so `watch bsc` starts watching a token that can never pay", async () => {
    const ethereumUsdt = EVM_NETWORKS.ethereum.tokens.USDT.mainnet;
    expect(await bsc.publicClient.getCode({ address: ethereumUsdt })).toBeUndefined();
    await expect(
      verifyEvmNode(config({ CHAIN_BSC_RPC_URL: bsc.url, CHAIN_BSC_USDT_CONTRACT: ethereumUsdt, CHAIN_BSC_USDC_CONTRACT: tokens.usdc })),
    ).rejects.toThrow(/CHAIN_BSC_USDT_CONTRACT/);
  });

  it('one contract configured as both CHAIN_BSC_USDT_CONTRACT and CHAIN_BSC_USDC_CONTRACT (a copy-paste) passes the start-up check, and the watcher then reports every USDT transfer as USDC (another asset: a USDT invoice paid in full is never credited)', async () => {
    const both = { CHAIN_BSC_RPC_URL: bsc.url, CHAIN_BSC_USDT_CONTRACT: tokens.usdt, CHAIN_BSC_USDC_CONTRACT: tokens.usdt };
    const node = config(both);
    const payee = '0x00000000000000000000000000000000000000a1';
    await sendTokenUnits(bsc, tokens.usdt, payee, 5n * 10n ** 18n);
    // What the watcher reports of that USDT transfer (here: USDC, the second setting wins in the adapter's map).
    let reported: unknown;
    try {
      const adapter = new EthereumAdapter(node);
      const head = await adapter.head();
      const watching: WatchedAddresses = { size: 1, all: [payee], lookup: (a) => (a.toLowerCase() === payee ? payee : undefined) };
      reported = (await adapter.scanBlock(head, watching)).map((t) => t.asset);
    } catch (err) {
      reported = `the adapter refused: ${String(err)}`;
    }
    const refusedAtStart = await verifyEvmNode(node).then(() => false, () => true);
    expect({ refusedAtStart, reported }).toEqual({ refusedAtStart: true, reported });
    await expect(verifyEvmNode(node)).rejects.toThrow('CHAIN_BSC_USDT_CONTRACT and CHAIN_BSC_USDC_CONTRACT are one contract');
    expect(() => new EthereumAdapter(node)).toThrow('CHAIN_BSC_USDT_CONTRACT and CHAIN_BSC_USDC_CONTRACT are one contract');
  });

  it('a development node (another chain id than the main one, here anvil 31337) passes without the issuers\' contracts, with one warning line per missing token', async () => {
    const dev = await startAnvil();
    try {
      const warnings: string[] = [];
      await verifyEvmNode(config({ CHAIN_BSC_RPC_URL: dev.url, CHAIN_BSC_CHAIN_ID: String(dev.chainId) }), (line) => warnings.push(line));
      expect(warnings).toEqual([
        `no contract at the USDT contract ${EVM_NETWORKS.bsc.tokens.USDT.mainnet} (CHAIN_BSC_USDT_CONTRACT) on the node at CHAIN_BSC_RPC_URL (chain 31337, not bsc's main chain): no USDT payment can be seen`,
        `no contract at the USDC contract ${EVM_NETWORKS.bsc.tokens.USDC.mainnet} (CHAIN_BSC_USDC_CONTRACT) on the node at CHAIN_BSC_RPC_URL (chain 31337, not bsc's main chain): no USDC payment can be seen`,
      ]);
    } finally {
      await dev.stop();
    }
  });
});
