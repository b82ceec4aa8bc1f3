/**
 * Issue 25, docs/treasury.md#utxo: Litecoin payouts arrive exactly — the same processor as Bitcoin
 * (`main.js process litecoin`), its own keys (m/84'/2'/0'), addresses (ltc1…), dust limit and
 * confirmation count, against the Esplora stand-in on Litecoin's parameters (a stand-in, not a node).
 */
import { sleep, waitFor } from './support/harness';
import { activeProcessor, metricsOf, type ProcessorProcess } from './support/treasury';
import { accountAddress, outputsOf, setFeeEstimates, startUtxoTreasuryWorld, waitForBroadcast, type UtxoTreasuryWorld } from './support/utxo-treasury';

let world: UtxoTreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startUtxoTreasuryWorld('litecoin', { processorEnv: { CHAIN_LITECOIN_CONFIRMATIONS: '3', PAYOUT_MAX_FEE_RATE_LTC: '20' } });
}, 120_000);

afterAll(async () => {
  await processor?.kill();
  await world?.dispose();
});

test('two Litecoin payouts arrive exactly, in one transaction, completed at the network\'s confirmation count', async () => {
  setFeeEstimates(world, { 1: 4.5, 6: 1.25 });
  const first = await world.deposit(3_000_000n);
  const second = await world.deposit(2_500_000n);
  const payouts = [await world.payout('LTC', '0.04321', { network: 'litecoin' }), await world.payout('LTC', '0.00098765')];
  processor = await world.startProcessor();
  await activeProcessor(processor);
  const txid = await waitForBroadcast(world);
  expect(payouts.every((p) => p.address.startsWith('ltc1'))).toBe(true);

  world.esplora.mine();
  world.esplora.mine();
  await waitFor('two confirmations', async () => (await world.payoutRow(payouts[0]!.id)).confirmations === 2);
  expect(await world.payoutRow(payouts[0]!.id)).toMatchObject({ status: 'Pending' });
  world.esplora.mine();
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed');
  await sleep(800);

  const mined = world.transaction(txid)!;
  const paid = outputsOf('litecoin', mined);
  expect(paid.get(payouts[0]!.address)).toBe(4_321_000n);
  expect(paid.get(payouts[1]!.address)).toBe(98_765n);
  // Fewest inputs: 4,419,765 litoshi plus the fee need both deposits.
  expect(mined.prevouts.map((p) => p.txid).sort()).toEqual([first.txid, second.txid].sort());
  const change = paid.get(accountAddress('litecoin', 1, 1))!;
  const fee = 5_500_000n - 4_321_000n - 98_765n - change;
  expect(fee * 1000n).toBeLessThanOrEqual(20_000n * BigInt(mined.tx.virtualSize()));
  expect(fee * 1000n).toBeGreaterThanOrEqual(1_250n * BigInt(mined.tx.virtualSize()));
  for (const p of payouts) {
    expect(world.minedPaying(p.address)).toHaveLength(1);
    expect(await world.events(p.id, 'payout.completed')).toBe(1);
    expect(await world.payoutRow(p.id)).toMatchObject({ transaction_hash: txid, confirmations: 3 });
  }
  expect(await metricsOf(processor)).toContain(`treasury_balance_base_units{network="litecoin",asset="LTC"} ${change}`);
});
