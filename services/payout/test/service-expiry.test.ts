/**
 * The code-expiry sweeper, with a short PAYOUT_CODE_TTL_MS: a payout left unverified is cancelled
 * by itself (reason code_expired) and its hold released, so nothing stays stuck in
 * AwaitingVerification; with two replicas sweeping the same database each payout is cancelled
 * exactly once.
 */
import { createRpcClient } from '@coinvoice/runtime';
import { PayoutService, PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { startTestService, type TestService } from '../../../test/support/service';
import { payoutService } from '../src/server';
import { balanceOf, codeOf, ledgerSums, mapLimit, payoutRequest, rejection, startPayoutHarness, waitFor, type Harness } from './support/harness';

const TTL_MS = 1_500;
let h: Harness;
let replica: TestService;

beforeAll(async () => {
  h = await startPayoutHarness({ PAYOUT_CODE_TTL_MS: String(TTL_MS), PAYOUT_SWEEP_INTERVAL_MS: '50', PAYOUT_SWEEP_BATCH_SIZE: '7' });
  // A second replica on the same database and namespace: both sweep.
  replica = await startTestService(payoutService, { database: h.svc.database, namespace: h.svc.namespace, env: h.svc.env });
});

afterAll(async () => {
  await replica?.stop();
  await h?.dispose();
});

test('a payout left unverified past its code lifetime is cancelled by itself and its hold released', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '1');
  const { payout } = await h.client.requestPayout(payoutRequest(project, { amount: '0.6' }));
  const code = await codeOf(h, payout!.id);
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.4', pending: '0.6', total: '1' });

  const cancelled = await waitFor('the sweeper to cancel the payout', async () => {
    const [row] = await h.sql`select status, cancel_reason, cancelled_at, code_expires_at from payouts where id = ${payout!.id}`;
    return row?.status === 'Cancelled' ? row : undefined;
  }, 10_000);
  expect(cancelled.cancel_reason).toBe('code_expired');
  expect((cancelled.cancelled_at as Date).getTime()).toBeGreaterThanOrEqual((cancelled.code_expires_at as Date).getTime());
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '1', pending: '0', total: '1' });
  const [event] = await h.sql`select payload from outbox where event_key = ${payout!.id} and event_type = 'payout.cancelled'`;
  expect(event!.payload).toMatchObject({ status: 'Cancelled', reason: 'code_expired', amount: '0.6' });
  // The code no longer works.
  expect(await rejection(h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code }))).toMatchObject({ code: 'payout_not_verifiable' });
});

test('a payout verified in time is left alone by the sweeper', async () => {
  // Live: it stays Pending (a sandbox one would complete at once).
  const project = h.auth.addProject('live');
  await h.credit(project, 'BTC', '1');
  const { payout } = await h.client.requestPayout(payoutRequest(project, { amount: '0.2' }));
  await h.client.verifyPayout({ projectId: project.id, payoutId: payout!.id, code: await codeOf(h, payout!.id) });
  await new Promise((r) => setTimeout(r, TTL_MS + 300));
  const other = createRpcClient(PayoutService, replica.url);
  const listed = await other.listPayouts({ projectId: project.id });
  expect(listed.payouts.map((p) => p.status)).toEqual([PayoutStatus.PENDING]);
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.8', pending: '0.2', total: '1' });
});

test('40 payouts expiring at once across two sweeping replicas: each cancelled and released exactly once', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'ETH', '4');
  const ids = await mapLimit(40, 8, async () => (await h.client.requestPayout(payoutRequest(project, { currency: 'ETH', amount: '0.1' }))).payout!.id);
  await waitFor('every payout to be cancelled', async () => {
    const [row] = await h.sql<{ n: number }[]>`select count(*)::int as n from payouts where id in ${h.sql(ids)} and status = 'Cancelled'`;
    return row!.n === 40 || undefined;
  }, 15_000);
  const [events] = await h.sql<{ n: number; distinct: number }[]>`
    select count(*)::int as n, count(distinct event_key)::int as distinct from outbox where event_type = 'payout.cancelled' and event_key in ${h.sql(ids)}`;
  expect(events).toEqual({ n: 40, distinct: 40 });
  expect(await balanceOf(h, project, 'ETH')).toEqual({ available: '4', pending: '0', total: '4' });
  expect(await ledgerSums(h, project.id, 'ETH')).toEqual({ available: '4', pending: '0' });
});
