/**
 * Issue 25, docs/treasury.md#exactly-once and #utxo: a batch of Bitcoin payouts leaves exactly
 * once whatever moment the processor (`main.js process bitcoin`) is SIGKILLed at. No fault hooks in
 * the processor: a TCP proxy holds the signer's answer (signed, never delivered), an HTTP proxy in
 * front of the Esplora stand-in holds `POST /tx` (never forwarded, or forwarded with the answer
 * lost); the stand-in's reorg drops a mined version from the chain.
 */
import { sleep, waitFor } from './support/harness';
import { activeProcessor, metricsOf, type ProcessorProcess } from './support/treasury';
import { outputsOf, setFeeEstimates, startUtxoTreasuryWorld, waitForBroadcast, type UtxoTreasuryWorld } from './support/utxo-treasury';

let world: UtxoTreasuryWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startUtxoTreasuryWorld('bitcoin', { processorEnv: { PAYOUT_BATCH_WAIT: '300ms' } });
  setFeeEstimates(world, { 1: 8, 6: 4 });
}, 120_000);

afterEach(async () => {
  await processor?.kill();
  processor = undefined;
  world.esploraProxy.postTxFault = 'none';
  world.signerLink.release();
});

afterAll(async () => {
  await world?.dispose();
});

async function start(env: NodeJS.ProcessEnv = {}): Promise<ProcessorProcess> {
  processor = await world.startProcessor(env);
  await activeProcessor(processor);
  return processor;
}

type Paid = { id: string; address: string; sat: bigint };

/** Two payouts funded by a fresh deposit, approved in one statement: one batch, however slow their requests. */
async function twoPayouts(): Promise<Paid[]> {
  await world.deposit(400_000n);
  const payouts = [
    { ...(await world.payout('BTC', '0.0007', { approve: false })), sat: 70_000n },
    { ...(await world.payout('BTC', '0.00123', { approve: false })), sat: 123_000n },
  ];
  await world.h.sql`update payouts set approved_at = now(), approved_by = 'test-operator' where id in ${world.h.sql(payouts.map((p) => p.id))}`;
  return payouts;
}

/** The batch's stored versions (its payouts' batch). */
async function versionsOf(payout: Paid) {
  const [batch] = await world.h.sql<{ batch_id: string }[]>`select batch_id::text from utxo_batch_payouts where payout_id = ${payout.id}`;
  return (await world.versions()).filter((v) => v.batch_id === batch?.batch_id);
}

/** Until the batch's first fee replacement (PAYOUT_REPLACE_AFTER) is in the mempool. */
async function waitForReplacement(payout: Paid): Promise<void> {
  await waitFor('a replacement in the mempool', async () => {
    const versions = await versionsOf(payout);
    return versions.length >= 2 && versions[1]!.txid !== null && world.esplora.mempool.has(versions[1]!.txid);
  }, 30_000);
}

/** Mines until every payout completed; then: one transaction on chain paying each exactly, each completed once. */
async function expectPaidOnce(payouts: Paid[]): Promise<string> {
  await waitFor('every payout completed', async () => {
    if ((await world.payoutRow(payouts[0]!.id)).status !== 'Completed') world.esplora.mine();
    const rows = await Promise.all(payouts.map((p) => world.payoutRow(p.id)));
    return rows.every((r) => r.status === 'Completed');
  }, 30_000);
  await sleep(1_000); // more rounds: nothing may follow
  const versions = await versionsOf(payouts[0]!);
  const confirmed = versions.filter((v) => v.status === 'confirmed');
  expect(confirmed).toHaveLength(1);
  expect(versions.filter((v) => v.status !== 'confirmed').every((v) => v.status === 'replaced')).toBe(true);
  const txid = confirmed[0]!.txid!;
  for (const p of payouts) {
    const mined = world.minedPaying(p.address);
    expect(mined.map((t) => t.txid)).toEqual([txid]);
    expect(outputsOf('bitcoin', mined[0]!).get(p.address)).toBe(p.sat);
    expect(await world.events(p.id, 'payout.completed')).toBe(1);
    expect(await world.payoutRow(p.id)).toMatchObject({ transaction_hash: txid });
  }
  expect(await world.events(payouts[0]!.id, 'payout.rejected')).toBe(0);
  return txid;
}

test('killed after the signer signed, before the signed bytes were stored: the restart asks again with the stored PSBT, the same transaction', async () => {
  await start();
  await waitFor('the treasury from the signer', async () => processor!.logs.some((l) => l.includes('treasury address and account key from the signer')));
  world.signerLink.holding = true;
  const payouts = await twoPayouts();
  await waitFor('the signer to sign (its answer held)', async () => (await signatures(payouts[0]!.id)) >= 1);
  await processor!.kill();
  const [built] = await versionsOf(payouts[0]!);
  expect(built).toMatchObject({ status: 'built', txid: null });
  for (const p of payouts) expect(await world.payoutRow(p.id)).toMatchObject({ status: 'Pending', claimed_by: 'processor:bitcoin', transaction_hash: null });
  expect(world.esplora.mempool.size).toBe(0);

  world.signerLink.release();
  await start();
  const txid = await expectPaidOnce(payouts);
  expect((await versionsOf(payouts[0]!)).map((v) => v.psbt)).toEqual([built!.psbt]);
  expect(await signatures(payouts[0]!.id)).toBeGreaterThanOrEqual(2);
  expect(txid).toBe((await versionsOf(payouts[0]!))[0]!.txid);
});

test('killed after storing the signed bytes, before the broadcast reached the node: the stored bytes are broadcast after the restart', async () => {
  await start();
  world.esploraProxy.postTxFault = 'hold';
  const held = world.esploraProxy.heldPosts.length;
  const payouts = await twoPayouts();
  await waitFor('the broadcast to be held', async () => world.esploraProxy.heldPosts.length > held);
  await processor!.kill();
  const [signed] = await versionsOf(payouts[0]!);
  expect(signed).toMatchObject({ status: 'signed' });
  expect(world.esplora.mempool.has(signed!.txid!)).toBe(false);
  for (const p of payouts) expect(await world.payoutRow(p.id)).toMatchObject({ status: 'Pending', transaction_hash: signed!.txid });

  world.esploraProxy.postTxFault = 'none';
  await start();
  expect(await expectPaidOnce(payouts)).toBe(signed!.txid);
  expect(await signatures(payouts[0]!.id)).toBe(1);
});

test('killed after the broadcast reached the node, before it was recorded: the node already has it, nothing is sent twice', async () => {
  await start();
  world.esploraProxy.postTxFault = 'forward_no_answer';
  const held = world.esploraProxy.heldPosts.length;
  const payouts = await twoPayouts();
  await waitFor('the broadcast forwarded, its answer held', async () => world.esploraProxy.heldPosts.length > held);
  const [signed] = await versionsOf(payouts[0]!);
  await waitFor('in the mempool', async () => world.esplora.mempool.has(signed!.txid!));
  await processor!.kill();
  expect((await versionsOf(payouts[0]!))[0]).toMatchObject({ status: 'signed' });

  world.esploraProxy.postTxFault = 'none';
  await start();
  await waitFor('recorded as broadcast', async () => (await versionsOf(payouts[0]!))[0]!.status === 'broadcast');
  expect(await expectPaidOnce(payouts)).toBe(signed!.txid);
});

test('killed while waiting for confirmations: the restarted processor counts on and completes each payout once', async () => {
  const env = { CHAIN_BITCOIN_CONFIRMATIONS: '3' };
  await start(env);
  const payouts = await twoPayouts();
  await waitForBroadcast(world);
  world.esplora.mine();
  await waitFor('one confirmation', async () => (await world.payoutRow(payouts[0]!.id)).confirmations === 1);
  await processor!.kill();
  world.esplora.mine();

  await start(env);
  await waitFor('two confirmations', async () => (await world.payoutRow(payouts[1]!.id)).confirmations === 2);
  expect(await world.payoutRow(payouts[0]!.id)).toMatchObject({ status: 'Pending' });
  expect(await world.events(payouts[0]!.id, 'payout.completed')).toBe(0);
  await expectPaidOnce(payouts);
});

test('a mined version that leaves the chain (reorg) is followed again, never completed early', async () => {
  const env = { CHAIN_BITCOIN_CONFIRMATIONS: '3' };
  await start(env);
  const payouts = await twoPayouts();
  const txid = await waitForBroadcast(world);
  world.esplora.mine();
  await waitFor('one confirmation', async () => (await world.payoutRow(payouts[0]!.id)).confirmations === 1);
  // The block holding it is replaced by an empty one: the transaction is back in the mempool.
  world.esplora.reorg(1, []);
  await waitFor('the reorg noticed', async () => processor!.logs.some((l) => l.includes('left the chain (reorg)')));
  expect(await world.payoutRow(payouts[0]!.id)).toMatchObject({ status: 'Pending', confirmations: 0 });
  expect(await expectPaidOnce(payouts)).toBe(txid);
});

test('a replacement mined instead of the original by a reorg: followed, completed once with its txid, its change a coin; never taken for a stranger\'s spend', async () => {
  await start({ CHAIN_BITCOIN_CONFIRMATIONS: '3', PAYOUT_REPLACE_AFTER: '1s' });
  const payouts = await twoPayouts();
  await waitForReplacement(payouts[0]!);
  // Stop further replacements: the original is mined at once, one block deep.
  const [original, replacement] = await versionsOf(payouts[0]!);
  // The original left the mempool when its replacement came: mined from what the stand-in was sent.
  const originalTx = world.esplora.everSeen(original!.txid!)!;
  const replacementTx = world.esplora.everSeen(replacement!.txid!)!;
  world.esplora.mine([originalTx]);
  await waitFor('the original recorded mined', async () => (await versionsOf(payouts[0]!))[0]!.status === 'mined');
  // The replacement is still followed: one block deep, nothing is final.
  expect((await versionsOf(payouts[0]!))[1]!.status).toBe('broadcast');
  // A one-block reorg whose block holds the replacement, then the depth to be final.
  world.esplora.reorg(1, [replacementTx]);
  world.esplora.mine();
  world.esplora.mine();
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed');
  const versions = await versionsOf(payouts[0]!);
  expect(versions.map((v) => [v.txid, v.status])).toEqual([
    [original!.txid, 'replaced'],
    [replacement!.txid, 'confirmed'],
    ...versions.slice(2).map((v) => [v.txid, 'replaced']),
  ]);
  for (const p of payouts) {
    expect(world.minedPaying(p.address).map((t) => t.txid)).toEqual([replacement!.txid]);
    expect(await world.payoutRow(p.id)).toMatchObject({ transaction_hash: replacement!.txid });
    expect(await world.events(p.id, 'payout.completed')).toBe(1);
    expect(await world.events(p.id, 'payout.rejected')).toBe(0);
  }
  // The replacement's change is the treasury's coin (its amount, not the original's).
  const change = outputsOf('bitcoin', replacementTx);
  const [coin] = await world.h.sql<{ amount: string; spent: boolean }[]>`select amount::text, spent from utxo_coins where txid = ${replacement!.txid!} and branch = 1`;
  expect(coin).toEqual({ amount: String(replacement!.change_amount), spent: false });
  expect([...change.values()]).toContain(BigInt(replacement!.change_amount!));
  expect(await world.h.sql`select status from utxo_batches where confirmed_txid = ${replacement!.txid!}`).toEqual([{ status: 'confirmed' }]);
});

test('a confirmed batch a reorg deeper than the confirmation count takes off the chain: an incident, its stored bytes sent again, each payee paid once (docs/treasury.md#deep-reorgs)', async () => {
  const env = { CHAIN_BITCOIN_CONFIRMATIONS: '2' };
  await start(env);
  const payouts = await twoPayouts();
  const txid = await waitForBroadcast(world);
  world.esplora.mine();
  world.esplora.mine();
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed');
  const stored = () => world.h.sql<{ status: string; raw_transaction: string }[]>`select status, raw_transaction from utxo_transactions where txid = ${txid}`;
  const [before] = await stored();
  // Both blocks replaced by empty ones, and the node's mempool loses the transaction (a restart, an eviction).
  world.esplora.reorg(2, []);
  world.esplora.drop(txid);
  expect(world.minedPaying(payouts[0]!.address)).toEqual([]);
  await waitFor('the incident', async () => processor!.logs.some((l) => l.includes('INCIDENT: a batch transaction recorded confirmed is no longer in a block')));
  // The same bytes, in the mempool again: nothing new was signed.
  await waitFor('the lost transaction sent again', async () => world.esplora.mempool.has(txid));
  expect(await stored()).toEqual([{ status: 'confirmed', raw_transaction: before!.raw_transaction }]);
  expect(world.transaction(txid)!.hex).toBe(before!.raw_transaction);
  expect(await metricsOf(processor!)).toContain('payout_processor_lost_rebroadcasts_total{network="bitcoin"} 1');
  world.esplora.mine();
  await sleep(1_000); // more rounds and tips: the incident is raised once, nothing else is sent
  expect(processor!.logs.filter((l) => l.includes('INCIDENT: a batch transaction recorded confirmed'))).toHaveLength(1);
  // Mined again: each payee paid exactly once by the one transaction, each payout completed once.
  expect(await expectPaidOnce(payouts)).toBe(txid);
});

test('a deep reorg mines the replaced version instead of the confirmed one: the incident says the payees ARE paid, and nothing is sent again', async () => {
  await start({ CHAIN_BITCOIN_CONFIRMATIONS: '2', PAYOUT_REPLACE_AFTER: '1s' });
  const payouts = await twoPayouts();
  await waitForReplacement(payouts[0]!);
  const [original] = await versionsOf(payouts[0]!);
  const originalTx = world.esplora.everSeen(original!.txid!)!;
  world.esplora.mine();
  world.esplora.mine();
  for (const p of payouts) await world.waitForStatus(p.id, 'Completed');
  const confirmed = (await versionsOf(payouts[0]!)).find((v) => v.status === 'confirmed')!;
  expect(confirmed.txid).not.toBe(original!.txid);
  // Both blocks replaced; the first new one holds the original version.
  world.esplora.reorg(2, [originalTx]);
  world.esplora.mine();
  await waitFor('the incident', async () => processor!.logs.some((l) => l.includes('another version of the same batch is mined instead: its payees ARE paid')));
  await sleep(1_000);
  expect(processor!.logs.some((l) => l.includes('an operator must pay its payees'))).toBe(false);
  expect(world.esplora.mempool.has(confirmed.txid!)).toBe(false);
  for (const p of payouts) expect(world.minedPaying(p.address).map((t) => t.txid)).toEqual([original!.txid]);
});

test('an input spent by a transaction the processor did not make: once that spend is final, no version can be mined; the batch is abandoned, its payouts rejected (holds released), alerted', async () => {
  await start();
  // The smallest coin that covers the payout (every earlier change is larger): the batch spends it.
  const deposit = await world.deposit(110_000n);
  const payout = { ...(await world.payout('BTC', '0.001')), sat: 100_000n };
  const txid = await waitForBroadcast(world);
  // An operator's transfer with the seed spends the same deposit output and is mined: our version leaves the mempool.
  world.spendElsewhere(deposit);
  expect(world.esplora.mempool.has(txid)).toBe(false);
  await sleep(1_000); // one block deep only (confirmations 2): not yet provably lost
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: 'processor:bitcoin' });
  world.esplora.mine();
  const rejected = await world.waitForStatus(payout.id, 'Rejected');
  expect(rejected.admin_note).toMatch(/never sent: input [0-9a-f]{64}:0 was spent by [0-9a-f]{64}, a transaction the processor did not make/);
  expect(await world.events(payout.id, 'payout.rejected')).toBe(1);
  expect(await world.events(payout.id, 'payout.completed')).toBe(0);
  expect(world.minedPaying(payout.address)).toEqual([]);
  expect((await versionsOf(payout)).map((v) => v.status)).toEqual(['failed']);
  const [coin] = await world.h.sql<{ spent: boolean }[]>`select spent from utxo_coins where txid = ${deposit.txid}`;
  expect(coin!.spent).toBe(true);
  expect(await metricsOf(processor!)).toContain('payout_processor_batches_abandoned_total{network="bitcoin"} 1');
});

/** The signer's signatures of transactions paying the payout (signer.audit_log: a batch names all its payouts). */
async function signatures(payoutId: string): Promise<number> {
  const [row] = await world.h.sql<{ n: number }[]>`select count(*)::int as n from signer.audit_log where ${payoutId}::uuid = any(payout_ids) and outcome = 'signed'`;
  return row?.n ?? 0;
}
