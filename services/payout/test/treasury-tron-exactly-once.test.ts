/**
 * Issue 25, the Tron treasury exactly once (docs/treasury.md#tron): the real processor
 * (`main.js process tron`) SIGKILLed after signing (its broadcast held by the stand-in), after the
 * broadcast reached the node (taken, never answered) and while waiting for confirmations; and a
 * transaction that expires unmined (the node answered "accepted" and lost it) is replaced once.
 * Each time: one transfer reaches the payout address, the payout completes once.
 */
import { waitFor } from './support/harness';
import { broadcast, startTronWorld, type TronWorld } from './support/tron';
import type { ProcessorProcess } from './support/treasury';

let world: TronWorld;
let processor: ProcessorProcess | undefined;

beforeAll(async () => {
  world = await startTronWorld();
}, 90_000);

afterEach(async () => {
  await processor?.kill();
  processor = undefined;
  world.tron.broadcastFault = 'none';
});

afterAll(async () => {
  await world?.dispose();
});

async function expectPaidOnce(payout: { id: string; address: string }, sun: bigint) {
  const stop = world.tron.mineEvery(100);
  try {
    const done = await world.waitForStatus(payout.id, 'Completed');
    const payments = world.tron.paymentsTo(payout.address);
    expect(payments).toHaveLength(1);
    expect(world.tron.balanceOf(payout.address)).toBe(sun);
    expect(done.transaction_hash).toBe(payments[0]!.txID);
    // More rounds: nothing may follow.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect(world.tron.paymentsTo(payout.address)).toHaveLength(1);
    expect(await world.events(payout.id, 'payout.completed')).toBe(1);
    return payments[0]!.txID;
  } finally {
    stop();
  }
}

test('(a) killed after signing, before the broadcast reached the node: the stored bytes are broadcast after the restart', async () => {
  world.tron.broadcastFault = 'hold';
  const held = world.tron.heldBroadcasts;
  processor = await world.startProcessor();
  const payout = await world.payout('TRX', '1.5', { network: 'tron' });
  await waitFor('the broadcast held', async () => world.tron.heldBroadcasts > held);
  await processor.kill();
  const [row] = await world.transactions(payout.id);
  expect(row).toMatchObject({ status: 'signed' });
  expect(world.tron.pendingCount).toBe(0);

  world.tron.broadcastFault = 'none';
  processor = await world.startProcessor();
  expect(await expectPaidOnce(payout, 1_500_000n)).toBe(row!.txid);
  expect(await world.signatures(payout.id)).toEqual([row!.txid]);
});

test('(b) killed after the broadcast reached the node, before it was recorded: nothing is sent twice', async () => {
  world.tron.broadcastFault = 'accept_no_answer';
  const held = world.tron.heldBroadcasts;
  processor = await world.startProcessor();
  const payout = await world.payout('USDT', '40', { network: 'tron' });
  await waitFor('the broadcast taken and its answer held', async () => world.tron.heldBroadcasts > held);
  world.tron.mine([]);
  expect(world.tron.paymentsTo(payout.address)).toHaveLength(1);
  await processor.kill();
  expect((await world.transactions(payout.id))[0]).toMatchObject({ status: 'signed' });

  world.tron.broadcastFault = 'none';
  processor = await world.startProcessor();
  const stop = world.tron.mineEvery(100);
  try {
    await world.waitForStatus(payout.id, 'Completed');
  } finally {
    stop();
  }
  expect(world.tron.paymentsTo(payout.address)).toHaveLength(1);
  expect(world.tron.tokenBalanceOf(world.usdt, payout.address)).toBe(40_000_000n);
  expect(await world.events(payout.id, 'payout.completed')).toBe(1);
  expect(await world.signatures(payout.id)).toHaveLength(1);
});

test('(c) killed while waiting for confirmations: the restarted processor counts on and completes once', async () => {
  processor = await world.startProcessor({ CHAIN_TRON_CONFIRMATIONS: '3' });
  const payout = await world.payout('TRX', '2.25', { network: 'tron' });
  await waitFor('the transaction broadcast', async () => (await world.transactions(payout.id))[0]?.status === 'broadcast');
  world.tron.mine([]);
  await waitFor('one confirmation', async () => (await world.payoutRow(payout.id)).confirmations === 1);
  await processor.kill();
  world.tron.mine([]);
  world.tron.mine([]);
  processor = await world.startProcessor({ CHAIN_TRON_CONFIRMATIONS: '3' });
  await world.waitForStatus(payout.id, 'Completed');
  expect(world.tron.paymentsTo(payout.address)).toHaveLength(1);
  expect(world.tron.balanceOf(payout.address)).toBe(2_250_000n);
  expect(await world.events(payout.id, 'payout.completed')).toBe(1);
  expect(await world.signatures(payout.id)).toHaveLength(1);
});

test("the signer's answer lost mid-request and the processor killed: the restart asks for the same bytes (the same txID) once more, one transfer", async () => {
  processor = await world.startProcessor();
  await waitFor('the treasury from the signer', async () => processor!.logs.some((l) => l.includes('treasury address from the signer')));
  world.signerLink.holding = true;
  const payout = await world.payout('TRX', '1.75', { network: 'tron' });
  await waitFor('the signer to sign (its answer held)', async () => (await world.signatures(payout.id)).length === 1);
  await processor.kill();
  world.signerLink.release();
  expect(await world.transactions(payout.id)).toEqual([]);
  expect(await world.payoutRow(payout.id)).toMatchObject({ status: 'Pending', claimed_by: null });

  processor = await world.startProcessor();
  const txid = await expectPaidOnce(payout, 1_750_000n);
  const signatures = await world.signatures(payout.id);
  expect(signatures.length).toBeGreaterThanOrEqual(2);
  expect(new Set(signatures)).toEqual(new Set([txid]));
  // No refusal: the signer was asked for the same transaction, not for a second one.
  const [refusals] = await world.h.sql<{ n: number }[]>`select count(*)::int as n from signer.audit_log where payout_id = ${payout.id} and outcome = 'refused'`;
  expect(refusals!.n).toBe(0);
});

test('an expired, never-mined transaction is replaced once (after a final block past its expiration) and the payout completes once', async () => {
  world.tron.broadcastFault = 'drop';
  const stop = world.tron.mineEvery(200);
  try {
    processor = await world.startProcessor({ PAYOUT_TRON_LIFETIME: '10s', CHAIN_TRON_CONFIRMATIONS: '2' });
    const payout = await world.payout('TRX', '3', { network: 'tron' });
    const expired = await waitFor('the first transaction expired', async () => (await world.transactions(payout.id)).find((t) => t.status === 'expired'), 30_000);
    expect(world.tron.paymentsTo(payout.address)).toHaveLength(0);
    world.tron.broadcastFault = 'none';
    await world.waitForStatus(payout.id, 'Completed', 30_000);
    const rows = await world.transactions(payout.id);
    expect(rows.map((r) => r.status)).toEqual(['expired', 'confirmed']);
    expect(rows[1]!.txid).not.toBe(expired.txid);
    expect(await world.signatures(payout.id)).toEqual([expired.txid, rows[1]!.txid]);
    expect(world.tron.paymentsTo(payout.address).map((p) => p.txID)).toEqual([rows[1]!.txid]);
    // The expired one can never come back: the node refuses its stored bytes.
    const [old] = await world.h.sql<{ raw_data: Record<string, unknown>; raw_data_hex: string; signature: string }[]>`
      select raw_data, raw_data_hex, signature from tron_transactions where txid = ${expired.txid}`;
    expect(await broadcast(world.tron.url, { txID: expired.txid, raw_data: old!.raw_data, raw_data_hex: old!.raw_data_hex }, old!.signature)).toMatchObject({
      code: 'TRANSACTION_EXPIRATION_ERROR',
    });
    expect(world.tron.balanceOf(payout.address)).toBe(3_000_000n);
    expect(await world.events(payout.id, 'payout.completed')).toBe(1);
  } finally {
    stop();
  }
}, 60_000);
