/**
 * `npm start` says which chain watchers it started and which node each follows (never a secret of
 * the node's URL), and warns when live invoices are priced from the static rate table. The EVM
 * networks come from the registry (services/chains/src/evm/networks.ts): a node configured for
 * base starts `invoice watch base`, named watch-base in .data/system.json, with no launcher edit.
 */
import { isAlive, bootSystem, type BootedSystem } from '../support/system';
import { startAnvil, type Anvil } from '../support/anvil';

let anvil: Anvil;
let baseAnvil: Anvil;
let system: BootedSystem;

beforeAll(async () => {
  anvil = await startAnvil();
  baseAnvil = await startAnvil();
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: anvil.url,
      // The test nodes answer eth_chainId 31337: each watcher is told so (it refuses another id).
      CHAIN_ETHEREUM_CHAIN_ID: '31337',
      CHAIN_BASE_RPC_URL: baseAnvil.url,
      CHAIN_BASE_CHAIN_ID: '31337',
      // A source that never answers: its watcher runs all the same (and retries every poll).
      CHAIN_BITCOIN_ESPLORA_URL: 'http://esplora-user:s3cret-password@127.0.0.1:9/api?token=s3cret-token',
      WATCHER_REPLICAS: '2',
    },
    timeoutMs: 90_000,
  });
}, 120_000);

afterAll(async () => {
  await system?.stop();
  await anvil?.stop();
  await baseAnvil?.stop();
});

test('npm start lists each chain watcher it started with its node', () => {
  const output = system.output();
  expect(output).toContain(`watcher:  ethereum ← ${anvil.url} (CHAIN_ETHEREUM_RPC_URL; watch-ethereum, watch-ethereum-2; metrics http://127.0.0.1:`);
  expect(output).toContain('watcher:  bitcoin ← http://127.0.0.1:9/… (CHAIN_BITCOIN_ESPLORA_URL; watch-bitcoin, watch-bitcoin-2; metrics http://127.0.0.1:');
  expect(output).not.toContain('s3cret');
  expect(output).not.toContain('litecoin');
  expect(output).toContain(`watcher:  base ← ${baseAnvil.url} (CHAIN_BASE_RPC_URL; watch-base, watch-base-2; metrics http://127.0.0.1:`);
  // Networks without a node are not watched: no process, no line.
  for (const chain of ['arbitrum', 'optimism', 'polygon', 'bsc', 'tron']) expect(output).not.toContain(`watcher:  ${chain}`);
  // Listed before it says it is ready.
  expect(output.indexOf('watcher:  ethereum')).toBeLessThan(output.indexOf('coinvoice is ready at'));
  const metricsUrl = /watcher: {2}ethereum .*; metrics (http:\S+\/metrics)\)/.exec(output)?.[1];
  expect(metricsUrl).toBe(`${system.current()['watch-ethereum']!.adminUrl}/metrics`);
});

test('npm start warns that live invoices are priced from the static table, with its date', () => {
  expect(system.output()).toMatch(/WARNING: {2}rates come from the static table of 2025-06-01 \(RATES_SOURCE=static, the development default\): live invoices are priced from it, not from the market/);
});

test('npm start runs one watcher per configured network, named in .data/system.json', async () => {
  const watchers = Object.keys(system.current()).filter((name) => name.startsWith('watch-')).sort();
  expect(watchers).toEqual(['watch-base', 'watch-base-2', 'watch-bitcoin', 'watch-bitcoin-2', 'watch-ethereum', 'watch-ethereum-2']);
  const base = system.current()['watch-base']!;
  expect(isAlive(base.pid)).toBe(true);
  // It is the base watcher (active or standby): its metrics name the chain it follows.
  const named = /watcher_payments\{chain="base",status="seen"\} \d+/;
  let metrics = '';
  for (let i = 0; i < 100 && !named.test(metrics); i++) {
    metrics = await fetch(`${base.adminUrl}/metrics`).then((r) => r.text()).catch(() => '');
    if (!named.test(metrics)) await new Promise((r) => setTimeout(r, 200));
  }
  expect(metrics).toMatch(named);
  expect(metrics).not.toMatch(/chain="ethereum"/);
});
