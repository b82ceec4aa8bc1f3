/**
 * VerifyPayout over gRPC against real Postgres: the right code moves the payout to Pending once;
 * wrong codes use up 5 attempts and the last one cancels the payout and releases its hold; a
 * malformed code costs nothing; an expired code cancels the payout (reason code_expired) even
 * before the sweeper gets to it. The sweeper is slowed down here so that expiry is decided by the
 * verification itself (service-expiry.test.ts covers the sweeper).
 */
import { randomUUID } from 'node:crypto';
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
  type FakeProject,
  type Harness,
} from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness({ PAYOUT_SWEEP_INTERVAL_MS: '3600000' });
});

afterAll(async () => {
  await h?.dispose();
});

async function fundedPayout(amount = '0.25', credit = '1'): Promise<{ project: FakeProject; payoutId: string; code: string }> {
  // Live: a verified sandbox payout would complete at once (service-settle tests that).
  const project = h.auth.addProject('live');
  await h.credit(project, 'BTC', credit);
  const { payout } = await h.client.requestPayout(payoutRequest(project, { amount }));
  return { project, payoutId: payout!.id, code: await codeOf(h, payout!.id) };
}

async function eventsOf(payoutId: string) {
  return h.sql<{ event_type: string; payload: Record<string, unknown> }[]>`
    select event_type, payload from outbox where event_key = ${payoutId} order by seq`;
}

test('the right code moves the payout to Pending, emits payout.verified and clears the stored code; the hold stays', async () => {
  const { project, payoutId, code } = await fundedPayout();
  const { payout } = await h.client.verifyPayout({ projectId: project.id, payoutId, code });
  expect(payout).toMatchObject({ id: payoutId, status: PayoutStatus.PENDING, amount: '0.25' });
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.75', pending: '0.25', total: '1' });

  const events = await eventsOf(payoutId);
  expect(events.map((e) => e.event_type)).toEqual(['payout.requested', 'payout.verified']);
  expect(events[1]!.payload).toMatchObject({ payoutId, projectId: project.id, environment: 'live', amount: '0.25', currency: 'BTC', status: 'Pending', verifiedAt: expect.any(String) });
  const [row] = await h.sql`select code_hash, code_salt, verified_at from payouts where id = ${payoutId}`;
  expect(row).toMatchObject({ code_hash: null, code_salt: null, verified_at: expect.any(Date) });

  // Once Pending, the code is spent.
  expect(await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code }))).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'payout_not_verifiable',
    message: 'payout is Pending; only a payout in AwaitingVerification can be verified',
  });
});

test('wrong codes count down 4, 3, 2, 1; the 5th cancels the payout (attempts_exhausted) and releases the hold', async () => {
  const { project, payoutId, code } = await fundedPayout('0.4');
  const wrong = wrongCode(code);
  for (const left of [4, 3, 2, 1]) {
    const err = await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code: wrong }));
    expect(err).toMatchObject({
      connectCode: Code.InvalidArgument,
      code: 'invalid_verification_code',
      violations: [{ field: 'code', message: `is wrong; ${left === 1 ? '1 attempt' : `${left} attempts`} left` }],
    });
    expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.6', pending: '0.4', total: '1' });
  }
  const last = await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code: wrong }));
  expect(last).toMatchObject({ code: 'invalid_verification_code', violations: [{ field: 'code', message: 'is wrong; no attempts left, the payout was cancelled' }] });
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  expect(await ledgerSums(h, project.id, 'BTC')).toEqual({ available: '1', pending: '0' });

  const events = await eventsOf(payoutId);
  expect(events.map((e) => e.event_type)).toEqual(['payout.requested', 'payout.cancelled']);
  expect(events[1]!.payload).toMatchObject({ status: 'Cancelled', reason: 'attempts_exhausted', amount: '0.4' });
  // Even the right code is too late now.
  expect(await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code }))).toMatchObject({ code: 'payout_not_verifiable' });
  const [row] = await h.sql`select status, cancel_reason, code_attempts_left from payouts where id = ${payoutId}`;
  expect(row).toEqual({ status: 'Cancelled', cancel_reason: 'attempts_exhausted', code_attempts_left: 0 });
});

test('a wrong code then the right one verifies', async () => {
  const { project, payoutId, code } = await fundedPayout();
  await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code: wrongCode(code) }));
  await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code: wrongCode(wrongCode(code)) }));
  expect((await h.client.verifyPayout({ projectId: project.id, payoutId, code })).payout!.status).toBe(PayoutStatus.PENDING);
});

test.each(['12345', '1234567', 'abcdef', ' 12345', '１２３４５６'])('a malformed code %j is refused without using an attempt', async (bad) => {
  const { project, payoutId } = await fundedPayout();
  expect(await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code: bad }))).toMatchObject({
    code: 'validation_failed',
    violations: [{ field: 'code', message: 'must be the 6-digit code from the email' }],
  });
  const [row] = await h.sql`select code_attempts_left from payouts where id = ${payoutId}`;
  expect(row!.code_attempts_left).toBe(5);
});

test("another project's payout and an unknown one are not_found, and cost the payout nothing", async () => {
  const { project, payoutId, code } = await fundedPayout();
  const other = h.auth.addProject('sandbox');
  expect(await rejection(h.client.verifyPayout({ projectId: other.id, payoutId, code }))).toMatchObject({ connectCode: Code.NotFound, code: 'not_found' });
  expect(await rejection(h.client.verifyPayout({ projectId: project.id, payoutId: randomUUID(), code }))).toMatchObject({ code: 'not_found' });
  expect((await h.client.verifyPayout({ projectId: project.id, payoutId, code })).payout!.status).toBe(PayoutStatus.PENDING);
});

test('10 concurrent verifications with the right code: one succeeds, the rest payout_not_verifiable, one payout.verified', async () => {
  const { project, payoutId, code } = await fundedPayout();
  const outcomes = await Promise.allSettled(Array.from({ length: 10 }, () => h.client.verifyPayout({ projectId: project.id, payoutId, code })));
  expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
  for (const o of outcomes) if (o.status === 'rejected') expect(await rejection(Promise.reject(o.reason))).toMatchObject({ code: 'payout_not_verifiable' });
  expect((await eventsOf(payoutId)).filter((e) => e.event_type === 'payout.verified')).toHaveLength(1);
});

test('10 concurrent wrong codes: 4 with attempts left, 1 cancels, 5 find it cancelled; released once', async () => {
  const { project, payoutId, code } = await fundedPayout('0.3');
  const outcomes = await Promise.all(
    Array.from({ length: 10 }, () => rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code: wrongCode(code) }))),
  );
  const messages = outcomes.map((o) => (o.code === 'invalid_verification_code' ? o.violations[0]?.message : o.code)).sort();
  expect(messages).toEqual([
    'is wrong; 1 attempt left',
    'is wrong; 2 attempts left',
    'is wrong; 3 attempts left',
    'is wrong; 4 attempts left',
    'is wrong; no attempts left, the payout was cancelled',
    ...Array(5).fill('payout_not_verifiable'),
  ].sort());
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  const [releases] = await h.sql<{ n: number }[]>`select count(*)::int as n from ledger_entries where payout_id = ${payoutId} and kind = 'release'`;
  expect(releases!.n).toBe(1);
});

test('an expired code cancels the payout (code_expired) and releases the hold, even before the sweeper runs', async () => {
  const { project, payoutId, code } = await fundedPayout('0.5');
  await h.sql`update payouts set code_expires_at = now() - interval '1 second' where id = ${payoutId}`;
  expect(await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code }))).toMatchObject({
    connectCode: Code.FailedPrecondition,
    code: 'verification_code_expired',
  });
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  const events = await eventsOf(payoutId);
  expect(events.at(-1)).toMatchObject({ event_type: 'payout.cancelled', payload: { reason: 'code_expired', status: 'Cancelled' } });
  expect(await rejection(h.client.verifyPayout({ projectId: project.id, payoutId, code }))).toMatchObject({ code: 'payout_not_verifiable' });
});
