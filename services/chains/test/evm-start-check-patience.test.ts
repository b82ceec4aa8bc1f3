/**
 * The EVM watcher's start-up check (verifyEvmNode, docs/networks.md#configuration) against a real
 * node behind a fault-injecting proxy: a node that gives no answer for a moment as the watcher
 * starts is asked again, so a slow start on a busy host is not a crash; a node that never answers
 * is refused after START_CHECK_ATTEMPTS asks; a wrong answer is refused at the first.
 */
import { loadConfig } from '@coinvoice/runtime';
import { evmNodeConfig, evmNodeSettings, START_CHECK_ATTEMPTS, verifyEvmNode } from '../src/evm/family';
import { startAnvil, type Anvil } from '../../../test/support/anvil';
import { RpcFaultProxy } from '../../../test/support/rpc-fault-proxy';

let anvil: Anvil;
let proxy: RpcFaultProxy;

beforeAll(async () => {
  anvil = await startAnvil();
}, 60_000);
afterAll(async () => {
  await anvil?.stop();
});
beforeEach(async () => {
  proxy = await new RpcFaultProxy(anvil.url).start();
});
afterEach(async () => {
  await proxy?.stop();
});

/** The ethereum watcher's settings for a node of anvil's chain id, through the proxy, giving up on a call after 300 ms. */
const node = (chainId: number = anvil.chainId) =>
  evmNodeConfig(loadConfig(evmNodeSettings, { CHAIN_ETHEREUM_RPC_URL: proxy.url, CHAIN_ETHEREUM_CHAIN_ID: String(chainId), CHAIN_ETHEREUM_RPC_TIMEOUT_MS: '300' }), 'ethereum');

const chainIdAsks = () => proxy.methods.filter((method) => method === 'eth_chainId').length;

test('a node that does not answer the first eth_chainId (it hangs past the timeout) but answers the next passes the check', async () => {
  proxy.fault = 'hang';
  const check = verifyEvmNode(node());
  while (proxy.injected.hang === 0) await new Promise((resolve) => setTimeout(resolve, 20));
  proxy.fault = 'none';
  await expect(check).resolves.toBeUndefined();
  expect(proxy.injected.hang).toBe(1);
  expect(chainIdAsks()).toBe(2);
});

test('a node answering JSON-RPC errors for a moment passes once it answers', async () => {
  proxy.fault = 'rpc_error';
  const check = verifyEvmNode(node());
  while (proxy.injected.rpc_error < 2) await new Promise((resolve) => setTimeout(resolve, 20));
  proxy.fault = 'none';
  await expect(check).resolves.toBeUndefined();
  expect(chainIdAsks()).toBe(3);
});

test(`a node that never answers is refused after ${START_CHECK_ATTEMPTS} asks, with one line naming the setting`, async () => {
  proxy.fault = 'hang';
  await expect(verifyEvmNode(node())).rejects.toThrow(/^the node at CHAIN_ETHEREUM_RPC_URL did not answer eth_chainId \(.*\); ethereum is chain 31337 \(CHAIN_ETHEREUM_CHAIN_ID\)$/);
  expect(proxy.injected.hang).toBe(START_CHECK_ATTEMPTS);
}, 15_000);

test('a node of another chain is refused at its first answer: an answer is not asked again', async () => {
  await expect(verifyEvmNode(node(anvil.chainId + 1))).rejects.toThrow(
    `the node at CHAIN_ETHEREUM_RPC_URL is chain ${anvil.chainId}, but ethereum is chain ${anvil.chainId + 1} (CHAIN_ETHEREUM_CHAIN_ID)`,
  );
  expect(chainIdAsks()).toBe(1);
});
