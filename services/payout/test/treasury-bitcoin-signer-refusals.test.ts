/**
 * docs/treasury.md#signer-refusals, UTXO: a batch the signer refuses before signing any version of
 * it (a payout above SIGNER_MAX_PAYOUT_BTC batched with others) is dissolved — nothing was signed,
 * nothing can be on chain — so the payouts it held are no hostages: each is asked again alone, the
 * innocent one is paid, the refused one is unclaimed with the refusal on the Treasury page, where
 * an operator rejects it. An outside review had both held by the processor for good (the merchant's
 * cancel 409 payout_in_flight, the operator's reject 409, nothing on the Treasury page).
 * Against the Esplora stand-in, the real signer and the real processor (support/utxo-treasury.ts).
 */
import { OPERATOR_TOKEN, waitFor } from './support/harness';
import { activeProcessor, metricsOf, type ProcessorProcess } from './support/treasury';
import { setFeeEstimates, startUtxoTreasuryWorld, type UtxoTreasuryWorld } from './support/utxo-treasury';

let world: UtxoTreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startUtxoTreasuryWorld('bitcoin', {
    processorEnv: { PAYOUT_BATCH_WAIT: '300ms', CHAIN_BITCOIN_CONFIRMATIONS: '1' },
    signerEnv: { SIGNER_MAX_PAYOUT_BTC: '0.002', SIGNER_DAILY_LIMIT_BTC: '1' },
  });
  setFeeEstimates(world, { 1: 8, 6: 4 });
}, 120_000);

afterAll(async () => {
  await processor?.kill();
  await world?.dispose();
});

test('a payout above the signer\'s limit batched with another: the batch is dissolved, the other paid alone, the refused one unclaimed and listed for the operator', async () => {
  await world.deposit(1_000_000n);
  const small = await world.payout('BTC', '0.001', { approve: false });
  const big = await world.payout('BTC', '0.005', { approve: false });
  // Approved in one statement: one batch holds both.
  await world.h.sql`update payouts set approved_at = now(), approved_by = 'test-operator' where id in ${world.h.sql([small.id, big.id])}`;
  processor = await world.startProcessor();
  await activeProcessor(processor);

  await waitFor('the batch dissolved', async () => processor!.logs.some((l) => l.includes('the signer refused a batch: dissolved')));
  const [first] = await world.h.sql<{ id: string; status: string; failure_reason: string }[]>`select id::text, status, failure_reason from utxo_batches order by utxo_batches.id limit 1`;
  expect(first).toMatchObject({ status: 'abandoned', failure_reason: expect.stringContaining('SIGNER_MAX_PAYOUT_BTC') });
  expect(await world.h.sql`select status, txid from utxo_transactions where batch_id = ${first!.id}`).toEqual([{ status: 'failed', txid: null }]);

  // The innocent payout goes alone and is paid, exactly.
  await waitFor('the small payout completed', async () => {
    if ((await world.payoutRow(small.id)).transaction_hash) world.esplora.mine();
    return (await world.payoutRow(small.id)).status === 'Completed';
  }, 30_000);
  const paid = world.minedPaying(small.address);
  expect(paid).toHaveLength(1);
  expect(await world.events(small.id, 'payout.completed')).toBe(1);
  expect(await world.h.sql`select signer_refusal from payouts where id = ${small.id}`).toEqual([{ signer_refusal: null }]);

  // The refused one is Pending, unclaimed, its refusal recorded and listed on the Treasury page.
  await waitFor('the big payout refused alone', async () => processor!.logs.some((l) => l.includes('the signer refused a payout: unclaimed')));
  expect(await world.h.sql`select status, claimed_by, transaction_hash, signer_refusal from payouts where id = ${big.id}`).toEqual([{ status: "Pending", claimed_by: null, transaction_hash: null, signer_refusal: expect.stringContaining("SIGNER_MAX_PAYOUT_BTC") }]);
  expect(world.minedPaying(big.address)).toEqual([]);
  const { networks } = await world.h.client.getTreasury({ operatorToken: OPERATOR_TOKEN });
  expect(networks.find((n) => n.network === 'bitcoin')!.refusedBySigner.map((p) => p.id)).toEqual([big.id]);
  // No coin stays reserved by a dissolved batch.
  expect(await world.h.sql`select 1 from utxo_coins c join utxo_batches b on b.id = c.batch_id where b.status = 'abandoned'`).toEqual([]);
  // A dissolved batch gives its change index back (no transaction paid it): retries use up no fresh
  // change address each (a wallet restored from the seed stops looking past 20 unused).
  const batches = await world.h.sql<{ status: string; change_index: number }[]>`select status, change_index from utxo_batches order by id`;
  expect(batches.filter((b) => b.status === 'abandoned').length).toBeGreaterThanOrEqual(2);
  const signed = batches.filter((b) => b.status !== 'abandoned');
  expect(new Set(batches.map((b) => b.change_index)).size).toBeLessThanOrEqual(signed.length + 1);
  // The operator rejects it: the hold is released, payout.rejected sent.
  const { payout } = await world.h.client.rejectPayout({ payoutId: big.id, adminNote: 'above the signer limit', operatorToken: OPERATOR_TOKEN });
  expect(payout).toMatchObject({ id: big.id });
  expect(await world.payoutRow(big.id)).toMatchObject({ status: 'Rejected' });
  expect(await world.events(big.id, 'payout.rejected')).toBe(1);
});

test('one batch whose version cannot be signed (its stored PSBT unreadable) is left for later; the round goes on and another payout is paid', async () => {
  processor ??= await world.startProcessor();
  await activeProcessor(processor);
  const [broken] = await world.h.sql<{ id: string }[]>`insert into utxo_batches (network) values ('bitcoin') returning id::text`;
  await world.h.sql`
    insert into utxo_transactions (batch_id, network, psbt, fee, fee_rate) values (${broken!.id}, 'bitcoin', ${Buffer.from('not a psbt').toString('base64')}, 1000, 1000)`;
  await world.deposit(300_000n);
  const payout = await world.payout('BTC', '0.0015');
  await waitFor('the other payout completed', async () => {
    if ((await world.payoutRow(payout.id)).transaction_hash) world.esplora.mine();
    return (await world.payoutRow(payout.id)).status === 'Completed';
  }, 30_000);
  expect(world.minedPaying(payout.address)).toHaveLength(1);
  expect(await metricsOf(processor)).toMatch(/payout_processor_item_errors_total\{network="bitcoin",step="sign"\} [1-9]/);
  expect(processor.logs.filter((l) => l.includes('processor sign step failed for one item')).length).toBe(1); // logged once, not every round
  await world.h.sql`update utxo_batches set status = 'abandoned', failure_reason = 'test: unreadable' where id = ${broken!.id}`;
});
