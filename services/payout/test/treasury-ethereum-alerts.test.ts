/**
 * The processor's alert gauges (deploy/k8s/monitoring/prometheus-rules.yaml): the treasury below
 * TREASURY_MIN_BALANCE_<ASSET> (CoinvoiceTreasuryBelowMinimum), payouts in flight longer than
 * PAYOUT_STUCK_AFTER (CoinvoicePayoutStuck) and rounds that no longer succeed
 * (CoinvoiceProcessorRoundsFailing), on a real node with the real signer.
 */
import { parseEther } from 'viem';
import { activeProcessor, metricsOf, mineBlocks, startTreasuryWorld, type ProcessorProcess, type TreasuryWorld } from './support/treasury';
import { sleep, waitFor } from './support/harness';

let world: TreasuryWorld;
let processor: ProcessorProcess;

beforeAll(async () => {
  world = await startTreasuryWorld();
  processor = await world.startProcessor({ TREASURY_MIN_BALANCE_ETH: '1000000', PAYOUT_STUCK_AFTER: '1s' });
  await activeProcessor(processor);
}, 120_000);

afterAll(async () => {
  await world?.anvil.testClient.setAutomine(true).catch(() => undefined);
  await world?.dispose();
});

test('the treasury below its minimum, and a payout in flight past PAYOUT_STUCK_AFTER, each raise their gauge; both fall back', async () => {
  const below = await waitFor('the minimum gauges', async () => {
    const text = await metricsOf(processor);
    return text.includes('treasury_balance_below_minimum{network="ethereum",asset="ETH"} 1') ? text : undefined;
  });
  // No minimum set for USDT: never an alert.
  expect(below).toContain('treasury_balance_below_minimum{network="ethereum",asset="USDT"} 0');
  expect(below).toContain('payouts_stuck{network="ethereum"} 0');

  // Nothing is mined: the payout stays in flight past PAYOUT_STUCK_AFTER.
  await world.anvil.testClient.setAutomine(false);
  const payout = await world.payout('ETH', '0.5');
  await waitFor('the payout broadcast', async () => (await world.chainTransactions(payout.id)).some((t) => t.status === 'broadcast'));
  await sleep(1_200);
  await waitFor('the stuck gauge', async () => (await metricsOf(processor)).includes('payouts_stuck{network="ethereum"} 1'));

  await world.anvil.testClient.setAutomine(true);
  await waitFor('the payout completed', async () => {
    await mineBlocks(world, 1);
    return (await world.payoutRow(payout.id)).status === 'Completed';
  });
  await waitFor('the stuck gauge back to 0', async () => (await metricsOf(processor)).includes('payouts_stuck{network="ethereum"} 0'));
}, 90_000);

test('while the signer is down every round fails and the last-success stamp stands still, though nothing is claimed (docs/treasury.md#processor); it moves on once the signer is back', async () => {
  const stamp = async () => Number(/payout_processor_last_round_success_timestamp_seconds\{network="ethereum"\} (\S+)/.exec(await metricsOf(processor))?.[1] ?? 'NaN');
  const errors = async () => Number(/payout_processor_round_errors_total\{network="ethereum"\} (\S+)/.exec(await metricsOf(processor))?.[1] ?? '0');
  // Stamped by every round that ends without error.
  const before = await stamp();
  expect(before).toBeGreaterThan(Date.now() / 1_000 - 60);
  await waitFor('a later round stamped', async () => (await stamp()) > before);

  await world.signer.kill();
  let payout: { id: string } | undefined;
  try {
    payout = await world.payout('ETH', '0.1');
    const errorsAtStart = await errors();
    await waitFor('failed rounds counted', async () => (await errors()) >= errorsAtStart + 2);
    const frozen = await stamp();
    await waitFor('more failed rounds', async () => (await errors()) >= errorsAtStart + 5);
    expect(await stamp()).toBe(frozen);
    // Nothing claimed: payouts_stuck cannot see this.
    expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: null });
    expect(await metricsOf(processor)).toContain('payouts_stuck{network="ethereum"} 0');
    expect(await metricsOf(processor)).toContain('payout_processor_active{network="ethereum"} 1');
  } finally {
    await world.signer.restart();
  }
  const frozen = await stamp();
  await waitFor('a round stamped again', async () => (await stamp()) > frozen);
  await world.waitForStatus(payout!.id, 'Completed', 30_000);
}, 90_000);

test('a payout the treasury cannot cover raises payouts_claimable_oldest_seconds, round after round; once funded and sent it falls to 0 (CoinvoicePayoutsWaitingForTreasury)', async () => {
  const gauge = async () => Number(/^payouts_claimable_oldest_seconds\{network="ethereum"\} (\S+)/m.exec(await metricsOf(processor))?.[1] ?? 'NaN');
  await waitFor('the gauge at 0 with nothing waiting', async () => (await gauge()) === 0);
  const balance = await world.anvil.publicClient.getBalance({ address: world.treasury });
  await world.anvil.testClient.setBalance({ address: world.treasury, value: parseEther('1') });
  let payout: { id: string } | undefined;
  try {
    payout = await world.payout('ETH', '2');
    const first = await waitFor('the wait counted', async () => {
      const seconds = await gauge();
      return seconds > 0 ? seconds : undefined;
    });
    await waitFor('the wait growing', async () => (await gauge()) >= first + 1);
    expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: null });
  } finally {
    await world.anvil.testClient.setBalance({ address: world.treasury, value: balance });
  }
  await world.waitForStatus(payout!.id, 'Completed', 30_000);
  await waitFor('the gauge back to 0', async () => (await gauge()) === 0);
}, 90_000);

test('a processor started while the signer is down follows a payout in flight to Completed with the treasury the signer answered before (it waited for the signer before anything)', async () => {
  await world.anvil.testClient.setAutomine(false);
  let payout: { id: string } | undefined;
  try {
    payout = await world.payout('ETH', '0.1');
    const id = payout.id;
    await waitFor('the payout broadcast', async () => (await world.chainTransactions(id)).some((t) => t.status === 'broadcast'));
    await world.signer.kill();
    await processor.kill();
    processor = await world.startProcessor();
    await activeProcessor(processor);
    await waitFor('the processor says it goes on without the signer', async () => processor.logs.some((line) => line.includes('the signer cannot be reached')));
    await world.anvil.testClient.setAutomine(true);
    await waitFor('the payout completed without the signer', async () => {
      await mineBlocks(world, 1);
      return (await world.payoutRow(id)).status === 'Completed';
    }, 60_000);
  } finally {
    await world.anvil.testClient.setAutomine(true);
    await world.signer.restart();
  }
  // With the signer back, the next payout goes as ever.
  const next = await world.payout('ETH', '0.1');
  await world.waitForStatus(next.id, 'Completed', 30_000);
}, 150_000);
