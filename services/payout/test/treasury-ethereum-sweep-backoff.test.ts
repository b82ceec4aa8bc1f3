/**
 * Rule (docs/treasury.md#sweep-tasks, services/payout/README.md "Processor"): a sweep group whose
 * step fails — here a token transfer the node will not estimate — is logged, counted
 * (payout_processor_item_errors_total{step="sweep"}) and left alone for a minute; the other groups
 * are swept in the same round and the gauges still update. With the real USDT the trigger is Tether
 * blacklisting a deposit address (its transfer checks the SENDER); the test token blacklists
 * recipients only, so the test blacklists the treasury for the token, which makes the same
 * estimate revert.
 */
import { parseEther } from 'viem';
import { tokenUnits } from '../../../test/support/anvil';
import { waitFor } from './support/harness';
import { activeProcessor, depositAddress, fundDeposit, insertSweepTask, metricsOf, setBlacklisted, startTreasuryWorld, type ProcessorProcess, type TreasuryWorld } from './support/treasury';

let world: TreasuryWorld;
let processor: ProcessorProcess;

beforeAll(async () => {
  world = await startTreasuryWorld();
}, 120_000);

afterAll(async () => {
  await world?.dispose();
});

test('one token deposit that cannot be swept does not stop the sweeps of every later deposit', async () => {
  await fundDeposit(world, 'USDT', depositAddress(21), '75');
  await insertSweepTask(world, { asset: 'USDT', index: 21, amount: tokenUnits('75') });
  await setBlacklisted(world, world.tokens.usdt, world.treasury);
  await fundDeposit(world, 'ETH', depositAddress(22), '0.8');
  const eth = await insertSweepTask(world, { asset: 'ETH', index: 22, amount: parseEther('0.8') });
  processor = await world.startProcessor();
  await activeProcessor(processor);

  const swept = await waitFor('the ETH deposit swept', async () => {
    const [row] = await world.h.sql<{ status: string }[]>`select status from sweep_tasks where id = ${eth}`;
    return row!.status === 'sent' || row!.status === 'confirmed' ? row : undefined;
  }, 15_000).catch(() => undefined);
  expect(swept).toBeDefined();
  expect(processor.logs.filter((l) => l.includes('processor round failed'))).toEqual([]);
  expect(processor.logs.filter((l) => l.includes('processor sweep step failed for one item')).length).toBe(1);
  expect(await metricsOf(processor)).toMatch(/payout_processor_item_errors_total\{network="ethereum",step="sweep"\} 1\b/);
  // The gauges still update: the ETH task counted as sent or confirmed.
  await waitFor('the sweep gauges', async () => /sweep_tasks\{network="ethereum",status="(sent|confirmed)"\} 1\b/.test(await metricsOf(processor)));
  const [usdt] = await world.h.sql<{ status: string }[]>`select status from sweep_tasks where asset = 'USDT'`;
  expect(usdt!.status).toBe('pending');
}, 90_000);
