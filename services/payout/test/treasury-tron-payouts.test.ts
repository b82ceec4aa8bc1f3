/**
 * Issue 25, the Tron treasury end to end (docs/treasury.md#tron): payouts requested and verified
 * through the payout service, the real signer (`main.js sign`) and the real processor
 * (`main.js process tron`) against the Tron stand-in, which verifies every signature. A TRX payout
 * arrives exactly (sun), a TRC-20 USDT payout exactly (token units, its Transfer log), and a
 * transfer that fails on chain (OUT_OF_ENERGY under a low fee_limit) rejects the payout with the
 * reason, its hold released.
 */
import { tronHex } from '../../invoice/test/support/tron-stand-in';
import { OPERATOR_TOKEN } from './support/harness';
import { startTronWorld, TEST_TRON_TREASURY, type TronWorld } from './support/tron';
import type { ProcessorProcess } from './support/treasury';
import { waitFor } from './support/harness';
import { formatPlain, fromBaseUnits } from '@coinvoice/domain/money';

let world: TronWorld;
let processor: ProcessorProcess | undefined;
let stopMining: () => void;

beforeAll(async () => {
  world = await startTronWorld({ signerEnv: { PAYOUT_AUTO_MAX_TRX: '5' } });
  stopMining = world.tron.mineEvery(100);
}, 90_000);

afterEach(async () => {
  await processor?.kill();
  processor = undefined;
  world.tron.broadcastFault = 'none';
});

afterAll(async () => {
  stopMining?.();
  await world?.dispose();
});

test('a TRX payout arrives exactly, in sun, and completes once with the txID as its transaction hash', async () => {
  processor = await world.startProcessor();
  const payout = await world.payout('TRX', '123.456789', { network: 'tron' });
  const done = await world.waitForStatus(payout.id, 'Completed');
  expect(world.tron.balanceOf(payout.address)).toBe(123_456_789n);
  const [payment] = world.tron.paymentsTo(payout.address);
  expect(done.transaction_hash).toBe(payment!.txID);
  expect(payment!.signed!.owner).toBe(tronHex(TEST_TRON_TREASURY));
  expect(await world.events(payout.id, 'payout.completed')).toBe(1);
  expect(await world.transactions(payout.id)).toEqual([expect.objectContaining({ txid: payment!.txID, status: 'confirmed' })]);
  expect(await world.signatures(payout.id)).toEqual([payment!.txID]);
});

test('a TRC-20 USDT payout arrives exactly, in token units: one Transfer log to the payout address', async () => {
  processor = await world.startProcessor();
  const payout = await world.payout('USDT', '75.25', { network: 'tron' });
  const done = await world.waitForStatus(payout.id, 'Completed');
  expect(world.tron.tokenBalanceOf(world.usdt, payout.address)).toBe(75_250_000n);
  const payments = world.tron.paymentsTo(payout.address);
  expect(payments).toHaveLength(1);
  expect(payments[0]!.logs).toHaveLength(1);
  expect(BigInt(`0x${payments[0]!.logs![0]!.data}`)).toBe(75_250_000n);
  expect(done.transaction_hash).toBe(payments[0]!.txID);
  expect(await world.events(payout.id, 'payout.completed')).toBe(1);
});

test('a TRC-20 transfer that runs out of energy rejects the payout with the reason; the hold is released', async () => {
  // 1 TRX of fee_limit buys ~4,761 energy at 210 sun: far from a transfer's 64,285.
  processor = await world.startProcessor({ SIGNER_MAX_FEE_LIMIT_SUN: '1000000' });
  const payout = await world.payout('USDT', '10', { network: 'tron' });
  const rejected = await world.waitForStatus(payout.id, 'Rejected');
  expect(world.tron.tokenBalanceOf(world.usdt, payout.address)).toBe(0n);
  expect(await world.transactions(payout.id)).toEqual([expect.objectContaining({ status: 'failed', failure_reason: expect.stringContaining('OUT_OF_ENERGY') })]);
  expect(rejected.transaction_hash).toBe(world.tron.paymentsTo(payout.address)[0]!.txID);
  expect(await world.events(payout.id, 'payout.rejected')).toBe(1);
  expect(await world.events(payout.id, 'payout.completed')).toBe(0);
});

test('a payout above PAYOUT_AUTO_MAX_TRX waits for an approval; one within it goes by itself', async () => {
  processor = await world.startProcessor({ PAYOUT_AUTO_MAX_TRX: '5' });
  const small = await world.payout('TRX', '5', { network: 'tron', approve: false });
  const large = await world.payout('TRX', '5.000001', { network: 'tron', approve: false });
  await world.waitForStatus(small.id, 'Completed');
  expect((await world.payoutRow(large.id)).claimed_by).toBeNull();
  await world.approve(large.id);
  await world.waitForStatus(large.id, 'Completed');
  expect(world.tron.balanceOf(large.address)).toBe(5_000_001n);
});

test('the Treasury page shows the Tron treasury: its address, TRX and USDT balances from the node, a payout in flight', async () => {
  world.tron.broadcastFault = 'drop';
  processor = await world.startProcessor();
  const payout = await world.payout('TRX', '7', { network: 'tron' });
  await waitFor('the payout in flight', async () => (await world.payoutRow(payout.id)).claimed_by === 'processor:tron');
  const tron = (await world.h.client.getTreasury({ operatorToken: OPERATOR_TOKEN })).networks.find((n) => n.network === 'tron')!;
  world.tron.broadcastFault = 'none';
  expect(tron.address).toBe(TEST_TRON_TREASURY);
  const balances = Object.fromEntries(tron.balances.map((b) => [b.asset, b.amount ?? b.unavailableReason]));
  expect(balances.TRX).toBe(formatPlain(fromBaseUnits(world.tron.balanceOf(TEST_TRON_TREASURY), 6)));
  expect(balances.USDT).toBe(formatPlain(fromBaseUnits(world.tron.tokenBalanceOf(world.usdt, TEST_TRON_TREASURY), 6)));
  expect(Object.keys(balances)).toEqual(['TRX', 'USDT']);
  expect(tron.inFlight.map((p) => p.id)).toEqual([payout.id]);
  await world.waitForStatus(payout.id, 'Completed', 30_000);
}, 60_000);

test('a round\'s page of payouts the treasury cannot cover does not hold back the payout after them (docs/treasury.md#payouts-that-cannot-go-yet)', async () => {
  // 50 (a round's page) approved TRX payouts of all the treasury holds (1,000,000 TRX: not its fee reserve besides), the oldest.
  const uncovered = [];
  for (let i = 0; i < 50; i++) uncovered.push(await world.payout('TRX', '1000000', { network: 'tron', approve: false }));
  await world.h.sql`update payouts set approved_at = now(), approved_by = 'test-operator' where id in ${world.h.sql(uncovered.map((p) => p.id))}`;
  try {
    processor = await world.startProcessor();
    const coverable = await world.payout('TRX', '7.5', { network: 'tron' });
    await world.waitForStatus(coverable.id, 'Completed', 30_000);
    expect(world.tron.balanceOf(coverable.address)).toBe(7_500_000n);
    for (const { id } of uncovered) expect(await world.payoutRow(id)).toMatchObject({ status: 'Pending', claimed_by: null, transaction_hash: null });
  } finally {
    for (const { id, projectId } of uncovered) await world.h.client.cancelPayout({ projectId, payoutId: id });
  }
});
