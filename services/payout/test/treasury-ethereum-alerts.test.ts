/**
 * The processor's alert gauges (deploy/k8s/monitoring/prometheus-rules.yaml): the treasury below
 * TREASURY_MIN_BALANCE_<ASSET> (CoinvoiceTreasuryBelowMinimum) and payouts in flight longer than
 * PAYOUT_STUCK_AFTER (CoinvoicePayoutStuck), on a real node with the real signer.
 */
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
