/**
 * Issue 25, docs/treasury.md#utxo: the Bitcoin treasury's fees. The rate is the Esplora stand-in's
 * `GET /fee-estimates` for PAYOUT_CONFIRM_TARGET; above PAYOUT_MAX_FEE_RATE_BTC payouts wait and
 * `payout_processor_fee_cap_waiting` is 1 (CoinvoiceUtxoTreasuryWaitingForFees); a version not mined
 * within PAYOUT_REPLACE_AFTER is replaced (BIP125) by one spending the same inputs, which the
 * stand-in accepts only as a replacement paying more.
 */
import { Transaction } from '@scure/btc-signer';
import { sleep, waitFor } from './support/harness';
import { activeProcessor, metricsOf, type ProcessorProcess } from './support/treasury';
import { outputsOf, setFeeEstimates, startUtxoTreasuryWorld, waitForBroadcast, type UtxoTreasuryWorld } from './support/utxo-treasury';

let world: UtxoTreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startUtxoTreasuryWorld('bitcoin', { processorEnv: { PAYOUT_MAX_FEE_RATE_BTC: '50', PAYOUT_CONFIRM_TARGET: '3', PAYOUT_BATCH_WAIT: '200ms' } });
}, 120_000);

afterEach(async () => {
  await processor?.kill();
  processor = undefined;
});

afterAll(async () => {
  await world?.dispose();
});

const CAP_LOG = 'the fee rate is above PAYOUT_MAX_FEE_RATE';

test('a fee spike above the cap holds the payouts and raises the alert gauge, logged once; when fees fall they go', async () => {
  // The 3-block target is above the cap; the 6-block one below it is not the configured target.
  setFeeEstimates(world, { 1: 120, 2: 95.5, 3: 50.001, 6: 20 });
  await world.deposit(300_000n);
  const payout = await world.payout('BTC', '0.0012');
  processor = await world.startProcessor();
  await activeProcessor(processor);
  await waitFor('the fee-cap gauge', async () => (await metricsOf(processor!)).includes('payout_processor_fee_cap_waiting{network="bitcoin"} 1'));
  await sleep(1_500); // rounds go by: nothing is built or broadcast
  expect(await world.versions()).toEqual([]);
  expect(world.esplora.mempool.size).toBe(0);
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: null });
  expect(processor.logs.filter((l) => l.includes(CAP_LOG))).toHaveLength(1);

  setFeeEstimates(world, { 1: 60, 2: 40, 3: 25, 6: 20 });
  const txid = await waitForBroadcast(world);
  expect((await metricsOf(processor)).includes('payout_processor_fee_cap_waiting{network="bitcoin"} 0')).toBe(true);
  const [version] = await world.versions();
  expect(version!.fee_rate).toBe('25000');
  const pending = world.transaction(txid)!;
  const fee = pending.prevouts.reduce((s, p) => s + BigInt(p.value), 0n) - pending.tx.outs.reduce((s, o) => s + BigInt(o.value), 0n);
  expect(fee).toBe(BigInt(version!.fee));
  expect(fee * 1000n).toBeGreaterThanOrEqual(25_000n * BigInt(pending.tx.virtualSize()));
  expect(fee * 1000n).toBeLessThanOrEqual(50_000n * BigInt(pending.tx.virtualSize()));
  world.esplora.mine();
  world.esplora.mine();
  await world.waitForStatus(payout.id, 'Completed');
  expect(processor.logs.filter((l) => l.includes(CAP_LOG))).toHaveLength(1);
});

test('RBF: a version not mined within PAYOUT_REPLACE_AFTER is replaced by one spending the SAME inputs with the same payout outputs and a higher fee; the payouts complete once', async () => {
  setFeeEstimates(world, { 3: 2 });
  await world.deposit(500_000n);
  const payouts = [await world.payout('BTC', '0.0011'), await world.payout('BTC', '0.0022')];
  processor = await world.startProcessor({ PAYOUT_REPLACE_AFTER: '1s' });
  await activeProcessor(processor);
  const first = await waitForBroadcast(world);
  setFeeEstimates(world, { 3: 9 });
  // Not mined: replaced after a second, by a version the stand-in accepts in its place.
  const replacement = await waitFor('a replacement in the mempool', async () => {
    const versions = await world.versions();
    const newest = versions.at(-1)!;
    return newest.txid !== first && newest.status === 'broadcast' && world.esplora.mempool.has(newest.txid!) ? newest : undefined;
  }, 20_000);
  expect(world.esplora.mempool.has(first)).toBe(false);
  world.esplora.mine();
  world.esplora.mine();
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed');
  await sleep(1_000);

  const versions = (await world.versions()).filter((v) => v.batch_id === replacement.batch_id);
  const [old] = versions;
  const confirmed = versions.filter((v) => v.status === 'confirmed');
  expect(confirmed).toHaveLength(1);
  const mined = confirmed[0]!;
  expect(mined.txid).not.toBe(first);
  expect(versions.filter((v) => v.status !== 'confirmed').every((v) => v.status === 'replaced')).toBe(true);
  // The same inputs in the same order, the same payout outputs; the fee out of the change.
  const oldTx = Transaction.fromPSBT(Buffer.from(old!.psbt, 'base64'));
  const newTx = Transaction.fromPSBT(Buffer.from(mined.psbt, 'base64'));
  const inputsOf = (tx: Transaction) => Array.from({ length: tx.inputsLength }, (_, i) => `${Buffer.from(tx.getInput(i).txid!).toString('hex')}:${tx.getInput(i).index}`);
  expect(inputsOf(newTx)).toEqual(inputsOf(oldTx));
  for (const i of [0, 1]) expect([newTx.getOutput(i).amount, Buffer.from(newTx.getOutput(i).script!).toString('hex')]).toEqual([oldTx.getOutput(i).amount, Buffer.from(oldTx.getOutput(i).script!).toString('hex')]);
  // BIP125 rule 4: a replacement pays at least the old fee plus 1 sat/vB on its own size.
  const vsize = BigInt(world.transaction(mined.txid!)!.tx.virtualSize());
  expect(BigInt(mined.fee)).toBeGreaterThanOrEqual(BigInt(old!.fee) + vsize);
  expect(BigInt(mined.change_amount!) + BigInt(mined.fee)).toBe(BigInt(old!.change_amount!) + BigInt(old!.fee));
  for (const [i, p] of payouts.entries()) {
    const paying = world.minedPaying(p.address);
    expect(paying.map((t) => t.txid)).toEqual([mined.txid]);
    expect(outputsOf('bitcoin', paying[0]!).get(p.address)).toBe([110_000n, 220_000n][i]);
    expect(await world.events(p.id, 'payout.completed')).toBe(1);
    expect(await world.payoutRow(p.id)).toMatchObject({ transaction_hash: mined.txid });
  }
  expect(await metricsOf(processor)).toMatch(/treasury_transactions_replaced_total\{network="bitcoin",purpose="payout"\} [1-9]/);
});
