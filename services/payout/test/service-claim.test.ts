/**
 * Issue 27 (6): a payout cannot be paid twice. Over gRPC against real Postgres: an operator claims a
 * verified payout before sending its coins; from then on the merchant's cancel answers 409
 * payout_in_flight and the hold stays; Complete requires the claim; a transaction hash completes
 * one payout only (also when two completions race); a claimed payout can still be rejected.
 */
import { randomBytes } from 'node:crypto';
import { Code } from '@coinvoice/runtime';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { balanceOf, codeOf, payoutRequest, rejection, startPayoutHarness, OPERATOR_TOKEN, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
});

afterAll(async () => {
  await h?.dispose();
});

const ethTx = () => `0x${randomBytes(32).toString('hex')}`;

/** A verified live ETH payout of `amount` from a balance of 1 ETH. */
async function pendingPayout(amount = '0.8') {
  const project = h.auth.addProject('live');
  await h.credit(project, 'ETH', '1');
  const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount }));
  await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  return { project, payoutId: payout!.id };
}

async function events(payoutId: string): Promise<string[]> {
  return (await h.sql<{ event_type: string }[]>`select event_type from outbox where event_key = ${payoutId} order by seq`).map((e) => e.event_type);
}

test('claimed, a payout stays Pending (claimedAt set) and the merchant can no longer cancel it: 409 payout_in_flight, balance unchanged', async () => {
  const { project, payoutId } = await pendingPayout('0.8');
  const { payout: claimed } = await h.client.claimPayout({ payoutId, operatorToken: OPERATOR_TOKEN });
  expect(claimed).toMatchObject({ id: payoutId, status: PayoutStatus.PENDING });
  expect(claimed!.claimedAt).toBeDefined();
  const [row] = await h.sql<{ claimed_by: string }[]>`select claimed_by from payouts where id = ${payoutId}`;
  expect(row!.claimed_by).toBe(h.auth.operatorTokens.get(OPERATOR_TOKEN));
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.2', pending: '0.8', total: '1' });

  // The operator is sending the coins; the merchant sees them arrive and cancels.
  expect(await rejection(h.client.cancelPayout({ projectId: project.id, payoutId }))).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'payout_in_flight',
  });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.2', pending: '0.8', total: '1' });
  // A second payout of the same money cannot be requested: nothing was released.
  expect(await rejection(h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount: '0.8' })))).toMatchObject({ code: 'insufficient_balance' });

  // A second operator does not send it again.
  expect(await rejection(h.client.claimPayout({ payoutId, operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'payout_already_claimed' });

  const { payout: completed } = await h.client.completePayout({ payoutId, transactionHash: ethTx(), operatorToken: OPERATOR_TOKEN });
  expect(completed!.status).toBe(PayoutStatus.COMPLETED);
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.2', pending: '0', total: '0.2' });
  // The claim is no event (no webhook); the rest are as before.
  expect(await events(payoutId)).toEqual(['payout.requested', 'payout.verified', 'payout.completed']);
});

test('Complete requires the claim: an unclaimed Pending payout answers 409 payout_not_claimed and nothing moves', async () => {
  const { project, payoutId } = await pendingPayout('0.5');
  expect(await rejection(h.client.completePayout({ payoutId, transactionHash: ethTx(), operatorToken: OPERATOR_TOKEN }))).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'payout_not_claimed',
  });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.5', pending: '0.5', total: '1' });
  // Unclaimed, the merchant may still cancel.
  expect((await h.client.cancelPayout({ projectId: project.id, payoutId })).payout!.status).toBe(PayoutStatus.CANCELLED);
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '1', pending: '0', total: '1' });
});

test('a claimed payout can be rejected (nothing was sent): released', async () => {
  const { project, payoutId } = await pendingPayout('0.3');
  await h.client.claimPayout({ payoutId, operatorToken: OPERATOR_TOKEN });
  const { payout } = await h.client.rejectPayout({ payoutId, adminNote: 'Could not send', operatorToken: OPERATOR_TOKEN });
  expect(payout).toMatchObject({ status: PayoutStatus.REJECTED, adminNote: 'Could not send' });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '1', pending: '0', total: '1' });
});

test('a transaction hash completes one payout only: another payout naming it answers 409 transaction_already_used and stays claimed', async () => {
  const first = await pendingPayout('0.8');
  const second = await pendingPayout('0.05');
  for (const p of [first, second]) await h.client.claimPayout({ payoutId: p.payoutId, operatorToken: OPERATOR_TOKEN });
  const hash = ethTx();
  await h.client.completePayout({ payoutId: first.payoutId, transactionHash: hash, operatorToken: OPERATOR_TOKEN });
  // The same hash, also in another spelling (upper case).
  for (const spelling of [hash, hash.toUpperCase().replace('0X', '0x')]) {
    expect(await rejection(h.client.completePayout({ payoutId: second.payoutId, transactionHash: spelling, operatorToken: OPERATOR_TOKEN }))).toMatchObject({
      connectCode: Code.FailedPrecondition,
      code: 'transaction_already_used',
    });
  }
  expect(await balanceOf(h, second.project, 'ETH')).toEqual({ available: '0.95', pending: '0.05', total: '1' });
  const [row] = await h.sql<{ status: string; transaction_hash: string | null }[]>`select status, transaction_hash from payouts where id = ${second.payoutId}`;
  expect(row).toEqual({ status: 'Pending', transaction_hash: null });
  expect((await h.client.completePayout({ payoutId: second.payoutId, transactionHash: ethTx(), operatorToken: OPERATOR_TOKEN })).payout!.status).toBe(PayoutStatus.COMPLETED);
});

test('two payouts completed concurrently with one hash: exactly one succeeds', async () => {
  const payouts = await Promise.all(Array.from({ length: 4 }, () => pendingPayout('0.1')));
  for (const p of payouts) await h.client.claimPayout({ payoutId: p.payoutId, operatorToken: OPERATOR_TOKEN });
  const hash = ethTx();
  const outcomes = await Promise.allSettled(payouts.map((p) => h.client.completePayout({ payoutId: p.payoutId, transactionHash: hash, operatorToken: OPERATOR_TOKEN })));
  expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
  for (const o of outcomes) if (o.status === 'rejected') expect(await rejection(Promise.reject(o.reason))).toMatchObject({ code: 'transaction_already_used' });
  const [n] = await h.sql<{ n: number }[]>`select count(*)::int as n from payouts where transaction_hash = ${hash}`;
  expect(n!.n).toBe(1);
});

test('the verification email names the destination address and the amount', async () => {
  const project = h.auth.addProject('live');
  await h.credit(project, 'ETH', '1');
  const request = payoutRequest(project, { currency: 'ETH', amount: '0.125' });
  const { payout } = await h.client.requestPayout(request);
  const email = h.notifier.payoutEmails.find((e) => e.payoutId === payout!.id);
  expect(email).toMatchObject({ address: request.address, amount: '0.125', currency: 'ETH' });
});
