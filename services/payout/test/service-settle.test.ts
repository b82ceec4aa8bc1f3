/**
 * Cancel, complete and reject over gRPC against real Postgres: each follows the transition table,
 * moves the ledger as it says (cancel/reject release, complete debits) and emits its event;
 * anything else answers the table's 409. Completing the same payout twice, also concurrently,
 * debits once. (The claim before completing: service-claim.test.ts.)
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { Code } from '@coinvoice/runtime';
import { PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import {
  balanceOf,
  codeOf,
  ledgerSums,
  payoutRequest,
  rejection,
  startPayoutHarness,
  wrongCode,
  OPERATOR_TOKEN,
  type FakeProject,
  type Harness,
} from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness();
});

afterAll(async () => {
  await h?.dispose();
});

// A transaction completes one payout only: every completion names a transaction of its own.
const btcTx = () => randomBytes(32).toString('hex');
const ethTx = () => `0x${randomBytes(32).toString('hex')}`;

/** A live payout in `stage`; Sending is a Pending payout an operator claimed (Complete needs it). */
async function payoutIn(stage: 'AwaitingVerification' | 'Pending' | 'Sending', options: { currency?: 'BTC' | 'ETH'; amount?: string } = {}) {
  const currency = options.currency ?? 'BTC';
  // Live: only live payouts wait for an operator (sandbox ones complete when verified).
  const project = h.auth.addProject('live');
  await h.credit(project, currency, '1');
  const { payout } = await h.client.requestPayout(payoutRequest(project, { currency, amount: options.amount ?? '0.25' }));
  if (stage !== 'AwaitingVerification') await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  if (stage === 'Sending') await h.client.claimPayout({ payoutId: payout!.id, operatorToken: OPERATOR_TOKEN });
  return { project, payoutId: payout!.id };
}

async function lastEvent(payoutId: string) {
  const [row] = await h.sql<{ event_type: string; payload: Record<string, unknown> }[]>`
    select event_type, payload from outbox where event_key = ${payoutId} order by seq desc limit 1`;
  return row;
}

async function settlements(payoutId: string) {
  return (await h.sql<{ kind: string }[]>`select kind from ledger_entries where payout_id = ${payoutId} order by id`).map((r) => r.kind);
}

describe('cancel', () => {
  test.each(['AwaitingVerification', 'Pending'] as const)('from %s: Cancelled, hold released, payout.cancelled reason user', async (from) => {
    const { project, payoutId } = await payoutIn(from);
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.75', pending: '0.25', total: '1' });
    const { payout } = await h.client.cancelPayout({ projectId: project.id, payoutId });
    expect(payout).toMatchObject({ id: payoutId, status: PayoutStatus.CANCELLED });
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
    expect(await settlements(payoutId)).toEqual(['hold', 'release']);
    expect(await lastEvent(payoutId)).toMatchObject({ event_type: 'payout.cancelled', payload: { status: 'Cancelled', reason: 'user', amount: '0.25', currency: 'BTC', environment: 'live' } });
    // Twice: 409, nothing moves.
    expect(await rejection(h.client.cancelPayout({ projectId: project.id, payoutId }))).toMatchObject({
      connectCode: Code.FailedPrecondition,
      code: 'payout_not_cancellable',
      message: 'payout is Cancelled; only a payout in AwaitingVerification or Pending can be cancelled',
    });
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  });

  test('a Completed or Rejected payout cannot be cancelled', async () => {
    const completed = await payoutIn('Sending');
    await h.client.completePayout({ payoutId: completed.payoutId, transactionHash: btcTx(), operatorToken: OPERATOR_TOKEN });
    expect(await rejection(h.client.cancelPayout({ projectId: completed.project.id, payoutId: completed.payoutId }))).toMatchObject({
      code: 'payout_not_cancellable',
      message: 'payout is Completed; only a payout in AwaitingVerification or Pending can be cancelled',
    });
    const rejected = await payoutIn('Pending');
    await h.client.rejectPayout({ payoutId: rejected.payoutId, adminNote: 'KYC pending', operatorToken: OPERATOR_TOKEN });
    expect(await rejection(h.client.cancelPayout({ projectId: rejected.project.id, payoutId: rejected.payoutId }))).toMatchObject({ code: 'payout_not_cancellable' });
    expect(await balanceOf(h, completed.project, 'BTC')).toEqual({ available: '0.75', pending: '0', total: '0.75' });
    expect(await balanceOf(h, rejected.project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  });

  test("another project's payout is not_found and stays as it was", async () => {
    const { project, payoutId } = await payoutIn('AwaitingVerification');
    expect(await rejection(h.client.cancelPayout({ projectId: randomUUID(), payoutId }))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
    expect((await h.client.listPayouts({ projectId: project.id })).payouts[0]!.status).toBe(PayoutStatus.AWAITING_VERIFICATION);
  });
});

describe('complete', () => {
  test('claimed Pending → Completed with the hash: pending and total decrease by the amount (debit), payout.completed', async () => {
    const { project, payoutId } = await payoutIn('Sending', { amount: '0.3' });
    const BTC_TX = btcTx();
    const { payout } = await h.client.completePayout({ payoutId, transactionHash: BTC_TX.toUpperCase(), operatorToken: OPERATOR_TOKEN });
    expect(payout).toMatchObject({ id: payoutId, status: PayoutStatus.COMPLETED, transactionHash: BTC_TX });
    expect(payout!.adminNote).toBeUndefined();
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.7', pending: '0', total: '0.7' });
    expect(await ledgerSums(h, project.id, 'BTC')).toEqual({ available: '0.7', pending: '0' });
    expect(await settlements(payoutId)).toEqual(['hold', 'debit']);
    expect(await lastEvent(payoutId)).toMatchObject({
      event_type: 'payout.completed',
      payload: { payoutId, projectId: project.id, status: 'Completed', amount: '0.3', currency: 'BTC', environment: 'live', transactionHash: BTC_TX, completedAt: expect.any(String) },
    });
  });

  test('completing the same payout concurrently 10 times debits once; the others answer payout_not_pending', async () => {
    const { project, payoutId } = await payoutIn('Sending', { currency: 'ETH', amount: '0.4' });
    const outcomes = await Promise.allSettled(
      Array.from({ length: 10 }, (_, i) => h.client.completePayout({ payoutId, transactionHash: `0x${String(i).repeat(64)}`, operatorToken: OPERATOR_TOKEN })),
    );
    const ok = outcomes.filter((o) => o.status === 'fulfilled');
    expect(ok).toHaveLength(1);
    for (const o of outcomes) {
      if (o.status === 'rejected') expect(await rejection(Promise.reject(o.reason))).toMatchObject({ connectCode: Code.FailedPrecondition, code: 'payout_not_pending' });
    }
    expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.6', pending: '0', total: '0.6' });
    expect(await settlements(payoutId)).toEqual(['hold', 'debit']);
    const [events] = await h.sql<{ n: number }[]>`select count(*)::int as n from outbox where event_key = ${payoutId} and event_type = 'payout.completed'`;
    expect(events!.n).toBe(1);
    // And once more, sequentially, with the winning hash: still 409.
    const winner = (ok[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof h.client.completePayout>>>).value.payout!;
    expect(await rejection(h.client.completePayout({ payoutId, transactionHash: winner.transactionHash!, operatorToken: OPERATOR_TOKEN }))).toMatchObject({
      code: 'payout_not_pending',
      message: 'payout is Completed; only a payout in Pending can be completed',
    });
  });

  test('an AwaitingVerification payout cannot be completed or rejected', async () => {
    const { project, payoutId } = await payoutIn('AwaitingVerification');
    expect(await rejection(h.client.completePayout({ payoutId, transactionHash: btcTx(), operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'payout_not_pending' });
    expect(await rejection(h.client.rejectPayout({ payoutId, adminNote: 'no', operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'payout_not_pending' });
    expect(await rejection(h.client.claimPayout({ payoutId, operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'payout_not_pending' });
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.75', pending: '0.25', total: '1' });
  });

  test.each([
    ['BTC', 'not-a-hash', 'must be a BTC transaction id: 64 hex digits'],
    ['BTC', `0x${'a'.repeat(64)}`, 'must be a BTC transaction id: 64 hex digits'],
    ['ETH', 'a'.repeat(64), 'must be a ETH transaction hash: "0x" followed by 64 hex digits'],
    ['BTC', '', 'is required'],
  ] as const)('a %s payout refuses the transaction hash %j', async (currency, transactionHash, message) => {
    const { project, payoutId } = await payoutIn('Sending', { currency });
    expect(await rejection(h.client.completePayout({ payoutId, transactionHash, operatorToken: OPERATOR_TOKEN }))).toMatchObject({
      code: 'validation_failed',
      violations: [{ field: 'transactionHash', message }],
    });
    expect(await balanceOf(h, project, currency)).toEqual({ available: '0.75', pending: '0.25', total: '1' });
    const ok = await h.client.completePayout({ payoutId, transactionHash: currency === 'ETH' ? ethTx() : btcTx(), operatorToken: OPERATOR_TOKEN });
    expect(ok.payout!.status).toBe(PayoutStatus.COMPLETED);
  });

  test('an unknown payout is not_found', async () => {
    expect(await rejection(h.client.completePayout({ payoutId: randomUUID(), transactionHash: btcTx(), operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'not_found' });
    expect(await rejection(h.client.claimPayout({ payoutId: randomUUID(), operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'not_found' });
    expect(await rejection(h.client.rejectPayout({ payoutId: randomUUID(), adminNote: 'x', operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'not_found' });
  });
});

describe('reject', () => {
  test('Pending → Rejected with the admin note: hold released, payout.rejected', async () => {
    const { project, payoutId } = await payoutIn('Pending', { amount: '0.5' });
    const { payout } = await h.client.rejectPayout({ payoutId, adminNote: 'Destination flagged by compliance', operatorToken: OPERATOR_TOKEN });
    expect(payout).toMatchObject({ status: PayoutStatus.REJECTED, adminNote: 'Destination flagged by compliance' });
    expect(payout!.transactionHash).toBeUndefined();
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
    expect(await settlements(payoutId)).toEqual(['hold', 'release']);
    expect(await lastEvent(payoutId)).toMatchObject({ event_type: 'payout.rejected', payload: { status: 'Rejected', adminNote: 'Destination flagged by compliance', amount: '0.5' } });
    expect(await rejection(h.client.rejectPayout({ payoutId, adminNote: 'again', operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'payout_not_pending' });
    expect(await rejection(h.client.completePayout({ payoutId, transactionHash: btcTx(), operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'payout_not_pending' });
  });

  test.each([['', 'is required'], ['   ', 'is required'], ['x'.repeat(501), 'must be at most 500 characters']])('an admin note %j is refused', async (adminNote, message) => {
    const { payoutId } = await payoutIn('Pending');
    expect(await rejection(h.client.rejectPayout({ payoutId, adminNote, operatorToken: OPERATOR_TOKEN }))).toMatchObject({ code: 'validation_failed', violations: [{ field: 'adminNote', message }] });
  });
});

test('a full life: request, a wrong code, verify, complete; the ledger explains the balance at every step', async () => {
  const project: FakeProject = h.auth.addProject('live');
  await h.credit(project, 'USDC', '100');
  await h.credit(project, 'USDC', '25.5');
  const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'USDC', amount: '120.25' }));
  expect(await balanceOf(h, project, 'USDC')).toEqual({ available: '5.25', pending: '120.25', total: '125.5' });
  const code = await codeOf(h, payout!.id);
  await rejection(h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: wrongCode(code) }));
  await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code });
  expect(await balanceOf(h, project, 'USDC')).toEqual({ available: '5.25', pending: '120.25', total: '125.5' });
  await h.client.claimPayout({ payoutId: payout!.id, operatorToken: OPERATOR_TOKEN });
  expect(await balanceOf(h, project, 'USDC')).toEqual({ available: '5.25', pending: '120.25', total: '125.5' });
  await h.client.completePayout({ payoutId: payout!.id, transactionHash: ethTx(), operatorToken: OPERATOR_TOKEN });
  expect(await balanceOf(h, project, 'USDC')).toEqual({ available: '5.25', pending: '0', total: '5.25' });
  expect(await ledgerSums(h, project.id, 'USDC')).toEqual({ available: '5.25', pending: '0' });
  const events = await h.sql<{ event_type: string }[]>`select event_type from outbox where event_key = ${payout!.id} order by seq`;
  expect(events.map((e) => e.event_type)).toEqual(['payout.requested', 'payout.verified', 'payout.completed']);
});

test('a sandbox payout completes by itself when verified, with a simulated hash, and never waits for an operator', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'ETH', '1');
  const { payout } = await h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount: '0.4' }));
  const verified = await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  expect(verified.payout).toMatchObject({ status: PayoutStatus.COMPLETED, transactionHash: expect.stringMatching(/^0x[0-9a-f]{64}$/) });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '0.6', pending: '0', total: '0.6' });
  expect(await settlements(payout!.id)).toEqual(['hold', 'debit']);
  const events = await h.sql<{ event_type: string }[]>`select event_type from outbox where event_key = ${payout!.id} order by seq`;
  expect(events.map((e) => e.event_type)).toEqual(['payout.requested', 'payout.verified', 'payout.completed']);
  const pending = await h.client.listPayouts({ projectId: project.id, status: PayoutStatus.PENDING });
  expect(pending.payouts).toEqual([]);
});

test('ClaimPayout, CompletePayout and RejectPayout need a valid operator session token, checked with auth', async () => {
  const { payoutId } = await payoutIn('Pending');
  for (const operatorToken of ['', 'a-merchant-token']) {
    expect(await rejection(h.client.claimPayout({ payoutId, operatorToken }))).toMatchObject({ connectCode: Code.Unauthenticated, code: 'invalid_token' });
    expect(await rejection(h.client.completePayout({ payoutId, transactionHash: btcTx(), operatorToken }))).toMatchObject({ connectCode: Code.Unauthenticated, code: 'invalid_token' });
    expect(await rejection(h.client.rejectPayout({ payoutId, adminNote: 'x', operatorToken }))).toMatchObject({ connectCode: Code.Unauthenticated, code: 'invalid_token' });
  }
  const [row] = await h.sql<{ status: string }[]>`select status from payouts where id = ${payoutId}`;
  expect(row!.status).toBe('Pending');
  await h.client.claimPayout({ payoutId, operatorToken: OPERATOR_TOKEN });
  expect((await h.client.completePayout({ payoutId, transactionHash: btcTx(), operatorToken: OPERATOR_TOKEN })).payout?.status).toBe(PayoutStatus.COMPLETED);
});
