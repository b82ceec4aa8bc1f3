/**
 * `npm start` says which chain watchers it started and which node each follows (never a secret of
 * the node's URL), and warns when live invoices are priced from the static rate table.
 */
import { startAnvil, type Anvil } from '../support/anvil';
import { bootSystem, type BootedSystem } from '../support/system';

let anvil: Anvil;
let system: BootedSystem;

beforeAll(async () => {
  anvil = await startAnvil();
  system = await bootSystem({
    env: {
      CHAIN_ETHEREUM_RPC_URL: anvil.url,
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
});

test('npm start lists each chain watcher it started with its node', () => {
  const output = system.output();
  expect(output).toContain(`watcher:  ethereum ← ${anvil.url} (CHAIN_ETHEREUM_RPC_URL; watch-ethereum, watch-ethereum-2; metrics http://127.0.0.1:`);
  expect(output).toContain('watcher:  bitcoin ← http://127.0.0.1:9/… (CHAIN_BITCOIN_ESPLORA_URL; watch-bitcoin, watch-bitcoin-2; metrics http://127.0.0.1:');
  expect(output).not.toContain('s3cret');
  expect(output).not.toContain('litecoin');
  // Listed before it says it is ready.
  expect(output.indexOf('watcher:  ethereum')).toBeLessThan(output.indexOf('coinvoice is ready at'));
  const metricsUrl = /watcher: {2}ethereum .*; metrics (http:\S+\/metrics)\)/.exec(output)?.[1];
  expect(metricsUrl).toBe(`${system.current()['watch-ethereum']!.adminUrl}/metrics`);
});

test('npm start warns that live invoices are priced from the static table, with its date', () => {
  expect(system.output()).toMatch(/WARNING: {2}rates come from the static table of 2025-06-01 \(RATES_SOURCE=static, the development default\): live invoices are priced from it, not from the market/);
});
