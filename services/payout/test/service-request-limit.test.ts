/**
 * RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT counts new requests only: an outside review retried one
 * request with its Idempotency-Key and, after 21 replays, got 429 for an hour — a client recovering
 * from a lost answer could not learn its payout's id, and the replays spent the project's budget.
 * A later review sent the retries while the first was still in flight: they were counted (the key
 * not yet stored) and some answered 429 (docs/accounting.md#payout-requests).
 */
import { createRpcClient } from '@coinvoice/runtime';
import { PayoutService, PayoutStatus } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import { startTestService } from '../../../test/support/service';
import { payoutService } from '../src/server';
import { awayFromWindowEdge } from '../../../test/support/async';
import { addressFor, balanceOf, FAST_SWEEP, payoutRequest, rejection, startPayoutHarness, waitFor, type Harness } from './support/harness';

let h: Harness;

beforeAll(async () => {
  h = await startPayoutHarness({ RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT: '2/1h' });
});

afterAll(async () => {
  await h?.dispose();
});

// Each test counts requests up to the limit of one hour's window: never across two.
beforeEach(() => awayFromWindowEdge(3600), 70_000);

test('replays of an answered request are answered whatever the limit, and do not count; new requests do', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '0.05');
  const request = payoutRequest(project, { amount: '0.001', address: addressFor('BTC'), idempotencyKey: 'order-77' });
  const first = await h.client.requestPayout(request);
  expect(first.payout!.status).toBe(PayoutStatus.AWAITING_VERIFICATION);
  for (let i = 0; i < 5; i++) {
    const again = await h.client.requestPayout(request);
    expect(again).toMatchObject({ idempotentReplay: true, payout: { id: first.payout!.id } });
  }
  // The same key with another body is refused as before, and costs nothing either.
  expect(await rejection(h.client.requestPayout({ ...request, amount: '0.002' }))).toMatchObject({ code: 'idempotency_key_reused' });
  // One request of the two counted so far: a second new one passes, a third is limited.
  expect((await h.client.requestPayout(payoutRequest(project, { amount: '0.001', address: addressFor('BTC') }))).payout).toBeDefined();
  expect(await rejection(h.client.requestPayout(payoutRequest(project, { amount: '0.001', address: addressFor('BTC') })))).toMatchObject({ code: 'rate_limited' });
  // The retry still gets its payout.
  expect((await h.client.requestPayout(request)).payout!.id).toBe(first.payout!.id);
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.048', pending: '0.002', total: '0.05' });
});

test('an answered request replays after PAYOUT_MIN_<COIN> was raised above its amount (the service restarted with the new rule); a new one that small is refused', async () => {
  const project = h.auth.addProject('live');
  await h.credit(project, 'ETH', '1');
  const request = payoutRequest(project, { currency: 'ETH', amount: '0.002', address: addressFor('ETH', 'live'), idempotencyKey: 'before-the-raise' });
  const first = await h.client.requestPayout(request);
  // The same database, a payout service started with a minimum of 0.01 ETH.
  const raised = await startTestService(payoutService, {
    database: h.svc.database,
    namespace: h.svc.namespace,
    env: { ...FAST_SWEEP, AUTH_URL: h.auth.url, NOTIFIER_URL: h.notifier.url, INVOICE_URL: h.invoice.url, PAYOUT_MIN_ETH: '0.01' },
  });
  try {
    const client = createRpcClient(PayoutService, raised.url, { timeoutMs: 20_000 });
    expect(await client.requestPayout(request)).toMatchObject({ idempotentReplay: true, payout: { id: first.payout!.id, amount: '0.002' } });
    expect(await rejection(client.requestPayout({ ...request, idempotencyKey: 'after-the-raise' }))).toMatchObject({
      code: 'validation_failed',
      violations: [{ field: 'amount', message: expect.stringContaining('must be at least 0.01 ETH for a live payout') }],
    });
  } finally {
    await raised.dispose();
  }
});

test('retries sent while the first request with their key is in flight are its replays: none answers 429, none spends the limit', async () => {
  const project = h.auth.addProject('sandbox');
  await h.credit(project, 'BTC', '0.05');
  const request = payoutRequest(project, { amount: '0.003', address: addressFor('BTC'), idempotencyKey: 'in-flight-retries' });
  const calls = h.notifier.payoutEmailCalls;
  let answerEmails = () => undefined as void;
  h.notifier.payoutEmailsWaitFor = new Promise<void>((resolve) => (answerEmails = resolve));
  let outcomes: PromiseSettledResult<Awaited<ReturnType<typeof h.client.requestPayout>>>[];
  try {
    const first = h.client.requestPayout(request);
    await waitFor('the first request at its email', async () => h.notifier.payoutEmailCalls > calls);
    // Eight retries while the first waits on its email: the limit (2 per hour) counts them before
    // the first's key is stored.
    const retries = Array.from({ length: 8 }, () => h.client.requestPayout(request));
    await new Promise((resolve) => setTimeout(resolve, 500));
    h.notifier.payoutEmailsWaitFor = undefined;
    answerEmails();
    outcomes = await Promise.allSettled([first, ...retries]);
  } finally {
    h.notifier.payoutEmailsWaitFor = undefined;
    answerEmails();
  }
  const answered = outcomes.map((o) => (o.status === 'fulfilled' ? { id: o.value.payout!.id, replay: o.value.idempotentReplay } : { error: o.reason instanceof Error ? o.reason.message : String(o.reason) }));
  const id = (answered[0] as { id: string }).id;
  expect(answered).toEqual([{ id, replay: false }, ...Array.from({ length: 8 }, () => ({ id, replay: true }))]);
  expect(await h.sql`select 1 from payouts where project_id = ${project.id}`).toHaveLength(1);
  expect(await balanceOf(h, project, 'BTC')).toEqual({ available: '0.047', pending: '0.003', total: '0.05' });
  // Only the first counted: one more new request passes, the next is limited.
  expect((await h.client.requestPayout(payoutRequest(project, { amount: '0.001', address: addressFor('BTC') }))).payout).toBeDefined();
  expect(await rejection(h.client.requestPayout(payoutRequest(project, { amount: '0.001', address: addressFor('BTC') })))).toMatchObject({ code: 'rate_limited' });
});
