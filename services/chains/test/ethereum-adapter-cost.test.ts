/**
 * The Ethereum adapter against a real node (anvil) with real ERC-20 tokens compiled by solc: a
 * block's scan costs one eth_getLogs however many addresses are watched (docs/watcher.md, "Cost
 * per block"); token transfers and ETH are matched in memory, to watched addresses only, exactly.
 */
import { randomBytes } from 'node:crypto';
import { getAddress } from 'viem';
import { deployTokens, payTwo, sendEth, startAnvil, type Anvil, type Tokens } from '../../../test/support/anvil';
import { RpcFaultProxy } from '../../../test/support/rpc-fault-proxy';
import type { WatchedAddresses } from '../src/chain-adapter';
import { EthereumAdapter } from '../src/evm/ethereum-adapter';

let anvil: Anvil;
let tokens: Tokens;
let proxy: RpcFaultProxy;
let adapter: EthereumAdapter;

beforeAll(async () => {
  anvil = await startAnvil();
  tokens = await deployTokens(anvil);
  proxy = await new RpcFaultProxy(anvil.url).start();
  adapter = new EthereumAdapter({ chain: 'ethereum', rpcUrl: proxy.url, timeoutMs: 5_000, tokens: { USDT: tokens.usdt, USDC: tokens.usdc } });
}, 60_000);

afterAll(async () => {
  await proxy?.stop();
  await anvil?.stop();
});

const randomAddress = () => getAddress(`0x${randomBytes(20).toString('hex')}`);

function watching(addresses: readonly string[]): WatchedAddresses {
  const byLower = new Map(addresses.map((a) => [a.toLowerCase(), a]));
  return { size: addresses.length, all: addresses, lookup: (a) => byLower.get(a.toLowerCase()) };
}

test('20,000 watched addresses: one eth_getLogs for the block; the watched token transfer and ETH found exactly, a stranger ignored', async () => {
  const [ours, alsoOurs, stranger] = [randomAddress(), randomAddress(), randomAddress()];
  const watched = watching([...Array.from({ length: 19_998 }, randomAddress), ours, alsoOurs]);
  // One transaction moving USDT to a watched address and to a stranger, then ETH to another watched one.
  const tokenTx = await payTwo(anvil, tokens, tokens.usdt, ours, '12.345678', stranger, '1');
  const tokenBlock = await adapter.blockAt(Number((await anvil.publicClient.getTransactionReceipt({ hash: tokenTx })).blockNumber));
  const ethTx = await sendEth(anvil, alsoOurs.toLowerCase(), '0.000000000000000001');
  const ethBlock = await adapter.blockAt(Number((await anvil.publicClient.getTransactionReceipt({ hash: ethTx })).blockNumber));

  const from = proxy.methods.length;
  const tokenTransfers = await adapter.scanBlock(tokenBlock!, watched);
  expect(proxy.methods.slice(from).filter((m) => m === 'eth_getLogs')).toHaveLength(1);
  expect(tokenTransfers.map((t) => [t.transactionHash, t.address, t.asset, t.amount.toFixed()])).toEqual([[tokenTx, ours, 'USDT', '12.345678']]);

  const before = proxy.methods.length;
  const ethTransfers = await adapter.scanBlock(ethBlock!, watched);
  expect(proxy.methods.slice(before).filter((m) => m === 'eth_getLogs')).toHaveLength(1);
  expect(ethTransfers.map((t) => [t.transactionHash, t.address, t.asset, t.amount.toFixed()])).toEqual([[ethTx, alsoOurs, 'ETH', '0.000000000000000001']]);
}, 60_000);

test('a reverted transaction to a watched address is no payment (it moved no value); a successful one beside it is', async () => {
  const [reverting, paid] = [randomAddress(), randomAddress()];
  // Code that reverts whatever it is sent (PUSH0 PUSH0 REVERT): an address with code — an EIP-7702
  // delegation, say — can refuse what it is sent; the block still lists the transaction's value.
  await anvil.testClient.setCode({ address: reverting, bytecode: '0x60006000fd' });
  const refused = await anvil.wallet.sendTransaction({ to: reverting, value: 10n ** 15n, gas: 100_000n });
  const refusedReceipt = await anvil.publicClient.waitForTransactionReceipt({ hash: refused, pollingInterval: 50 });
  expect(refusedReceipt.status).toBe('reverted');
  expect(await anvil.publicClient.getBalance({ address: reverting })).toBe(0n);
  const accepted = await sendEth(anvil, paid, '0.001');

  const watched = watching([reverting, paid]);
  const refusedBlock = await adapter.blockAt(Number(refusedReceipt.blockNumber));
  expect(await adapter.scanBlock(refusedBlock!, watched)).toEqual([]);
  const acceptedBlock = await adapter.blockAt(Number((await anvil.publicClient.getTransactionReceipt({ hash: accepted })).blockNumber));
  expect((await adapter.scanBlock(acceptedBlock!, watched)).map((t) => [t.transactionHash, t.address, t.amount.toFixed()])).toEqual([[accepted, paid, '0.001']]);
}, 60_000);
