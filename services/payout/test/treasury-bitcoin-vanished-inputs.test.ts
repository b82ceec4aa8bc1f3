/**
 * docs/treasury.md#deep-reorgs, Bitcoin: a reorg deeper than the confirmation count in which the
 * customer's double-spend of a deposit is mined. The batch that spent the deposit is an incident
 * (its stored bytes refused: its input no longer exists), and its change — counted as a coin — is
 * gone too: the next batch spending it can never be mined. That batch is abandoned (its payout
 * rejected, hold released) once the change's transaction has stayed unknown to the node for the
 * confirmation count's worth of blocks, instead of being replaced and asked again for good (an
 * outside review's finding). Against the Esplora stand-in (a protocol stand-in, not a node).
 */
import { sleep, waitFor } from './support/harness';
import { activeProcessor, metricsOf, type ProcessorProcess } from './support/treasury';
import { setFeeEstimates, startUtxoTreasuryWorld, waitForBroadcast, type UtxoTreasuryWorld } from './support/utxo-treasury';

let world: UtxoTreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startUtxoTreasuryWorld('bitcoin', { processorEnv: { PAYOUT_BATCH_WAIT: '300ms', CHAIN_BITCOIN_CONFIRMATIONS: '2' } });
  setFeeEstimates(world, { 1: 8, 6: 4 });
}, 120_000);

afterAll(async () => {
  await processor?.kill();
  await world?.dispose();
});

test('a deposit double-spent in a deep reorg: the confirmed batch is an incident, and the batch spending its vanished change is abandoned, its payout rejected', async () => {
  processor = await world.startProcessor();
  await activeProcessor(processor);
  const deposit = await world.deposit(500_000n);
  const first = await world.payout('BTC', '0.001');
  const firstTxid = await waitForBroadcast(world);
  world.esplora.mine();
  world.esplora.mine();
  await world.waitForStatus(first.id, 'Completed');
  const [change] = await world.h.sql<{ id: string; txid: string }[]>`select id::text, txid from utxo_coins where branch = 1`;
  expect(change!.txid).toBe(firstTxid);

  // From the deposit's block on, the chain is replaced; the customer's double-spend is mined and
  // the node forgets the batch (its input is gone).
  const depositHeight = world.esplora.blocks.findIndex((b) => b.txs.some((t) => t.txid === deposit.txid));
  world.esplora.reorg(world.esplora.tip.height - depositHeight + 1, [deposit.doubleSpend()]);
  world.esplora.drop(firstTxid);
  world.esplora.mine();
  await waitFor('the lost batch refused', async () => processor!.logs.some((l) => l.includes('INCIDENT: the node refuses the lost batch transaction')));

  // The next payout's batch spends the change, the only coin: the node refuses it, and it is not mined.
  const second = await world.payout('BTC', '0.0002');
  await waitFor('the second batch signed', async () => (await world.h.sql`select 1 from utxo_transactions where txid is not null and txid <> ${firstTxid}`).length > 0);
  expect(await world.h.sql`select c.id::text from utxo_coins c join utxo_batch_payouts p on p.batch_id = c.batch_id where p.payout_id = ${second.id}`).toEqual([{ id: change!.id }]);
  const rejected = await waitFor('the second payout rejected', async () => {
    world.esplora.mine();
    await sleep(300);
    const row = await world.payoutRow(second.id);
    return row.status === 'Rejected' ? row : undefined;
  }, 30_000);
  expect(rejected.admin_note).toMatch(new RegExp(`never sent: input ${firstTxid}:\\d+ no longer exists: its transaction ${firstTxid} has been in no block and no mempool for \\d+ blocks`));
  expect(await world.events(second.id, 'payout.rejected')).toBe(1);
  expect(await world.events(second.id, 'payout.completed')).toBe(0);
  expect(world.minedPaying(second.address)).toEqual([]);
  expect(await world.h.sql`select spent, batch_id from utxo_coins where id = ${change!.id}`).toEqual([{ spent: true, batch_id: expect.anything() }]);
  expect(await metricsOf(processor)).toContain('payout_processor_batches_abandoned_total{network="bitcoin"} 1');
  // The first payout stays Completed: its loss is the incident an operator answers (docs/treasury.md#deep-reorgs).
  expect(await world.payoutRow(first.id)).toMatchObject({ status: 'Completed' });
});
