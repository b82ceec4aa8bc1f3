/**
 * Issue 15's additions to the dashboard API, through the gateway against the whole system: the
 * operators' payout queue (operator JWT only, filters, oldest first, keyset paging), a merchant's
 * invoice by id, invoice search by order id, the delivery log of one invoice, and the signed test
 * event of the Webhooks page.
 */
import { randomUUID } from 'node:crypto';
import { Webhook } from 'standardwebhooks';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { markEmailVerified } from '../support/accounts';
import { grantOperator, operatorBootEnv } from '../support/operators';
import { bootSystem, type BootedSystem } from '../support/system';
import { addressFor, creditLiveBalance, deleteStreams, emailedCode, eventually, Receiver } from './dashboard.support';

const OPERATOR_EMAIL = `ops-${randomUUID().slice(0, 8)}@coinvoice.test`;
let system: BootedSystem;
let api: GatewayClient;
let operator: MerchantFixture;
let merchant: MerchantFixture;
let sandbox: ProjectFixture;
let live: ProjectFixture;
const receiver = new Receiver();

beforeAll(async () => {
  await receiver.start();
  system = await bootSystem({ env: { ...operatorBootEnv(OPERATOR_EMAIL), PASSWORD_HASH_MEMORY_KIB: '1024', WEBHOOK_RETRY_SCHEDULE: '200ms,300ms' } });
  api = new GatewayClient(system.gatewayUrl);
  operator = await grantOperator(system, api, OPERATOR_EMAIL, 'operator-password-1');
  merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId); // live keys need a verified email (issue 12)
  [sandbox, live] = await Promise.all([
    createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url }),
    createProjectWithKey(api, merchant, 'live'),
  ]);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver.stop();
});

async function createInvoice(key: string, orderId: string) {
  const res = await api.post(
    '/api/invoice',
    { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', orderId, successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(key) },
  );
  expect(res.status).toBe(201);
  return res.body as { id: string; amountExpected: number };
}

async function balanceOf(project: ProjectFixture): Promise<number> {
  const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(project.key) });
  return (res.body.balances as Array<{ currency: string; available: number }>).find((b) => b.currency === 'BTC')?.available ?? 0;
}

/** A payout requested and verified through the API: Pending when live; a sandbox one completes by itself. */
async function pendingPayout(project: ProjectFixture, network: 'mainnet' | 'testnet', amount: number): Promise<string> {
  const requested = await api.post('/api/payout/request', { amount, currency: 'BTC', address: addressFor('BTC', network) }, { headers: apiKeyHeader(project.key) });
  expect(requested.status).toBe(201);
  const code = await emailedCode(system, requested.body.id);
  const verified = await api.post('/api/payout/verify', { payoutId: requested.body.id, code }, { headers: apiKeyHeader(project.key) });
  expect(verified.body.status).toBe(network === 'mainnet' ? 'Pending' : 'Completed');
  return requested.body.id as string;
}

test('the operator queue: operators only, Pending live payouts oldest first with their project, keyset paging', async () => {
  // Balances: a sandbox invoice paid through Simulate, and a live payment for the live project.
  const invoice = await createInvoice(sandbox.key, 'queue-1');
  expect((await api.post(`/api/merchant/invoices/${invoice.id}/simulate`, undefined, { headers: bearer(merchant.token) })).status).toBe(200);
  await eventually(async () => ((await balanceOf(sandbox)) > 0 ? true : undefined), 15_000, 'the sandbox balance');
  await creditLiveBalance(system, live.id, '0.5');
  await eventually(async () => ((await balanceOf(live)) === 0.5 ? true : undefined), 15_000, 'the live balance');

  const livePayouts = [];
  for (const amount of [0.01, 0.02, 0.03]) livePayouts.push(await pendingPayout(live, 'mainnet', amount));
  const sandboxPayout = await pendingPayout(sandbox, 'testnet', 0.00001);
  const awaiting = await api.post('/api/payout/request', { amount: 0.04, currency: 'BTC', address: addressFor('BTC', 'mainnet') }, { headers: apiKeyHeader(live.key) });
  expect(awaiting.status).toBe(201);

  // Not for merchants, not for API keys.
  expectProblem(await api.get('/api/admin/payouts', { headers: bearer(merchant.token) }), 403, 'forbidden');
  expectProblem(await api.get('/api/admin/payouts', { headers: apiKeyHeader(live.key) }), 401);
  expectProblem(await api.get('/api/admin/payouts'), 401);

  const queue = await api.get('/api/admin/payouts?status=Pending&environment=live', { headers: bearer(operator.token) });
  expect(queue.status).toBe(200);
  const ours = (queue.body.items as Array<Record<string, unknown>>).filter((p) => p.projectId === live.id);
  expect(ours.map((p) => p.id)).toEqual(livePayouts);
  expect(ours[0]).toMatchObject({ amount: 0.01, currency: 'BTC', status: 'Pending', projectId: live.id, transactionHash: null, adminNote: null });
  expect((queue.body.items as Array<{ id: string }>).some((p) => p.id === sandboxPayout || p.id === awaiting.body.id)).toBe(false);
  expect(queue.body.nextCursor).toBeNull();

  // Other filters: a sandbox payout never waits for an operator (it completed by itself, issue 12);
  // AwaitingVerification under its status.
  const sandboxQueue = await api.get('/api/admin/payouts?status=Pending&environment=sandbox', { headers: bearer(operator.token) });
  expect((sandboxQueue.body.items as Array<{ id: string }>).map((p) => p.id)).toEqual([]);
  const sandboxDone = await api.get('/api/admin/payouts?status=Completed&environment=sandbox', { headers: bearer(operator.token) });
  expect((sandboxDone.body.items as Array<{ id: string }>).map((p) => p.id)).toEqual([sandboxPayout]);
  const awaitingQueue = await api.get('/api/admin/payouts?status=AwaitingVerification', { headers: bearer(operator.token) });
  expect((awaitingQueue.body.items as Array<{ id: string }>).map((p) => p.id)).toEqual([awaiting.body.id]);

  // One at a time, each page after the last: the same order, no repeats, then the end.
  const walked: string[] = [];
  let cursor: string | null = '';
  while (cursor !== null) {
    const page: { status: number; body: { items: Array<{ id: string }>; nextCursor: string | null } } = await api.get(
      `/api/admin/payouts?status=Pending&environment=live&limit=1${cursor ? `&cursor=${cursor}` : ''}`,
      { headers: bearer(operator.token) },
    );
    expect(page.status).toBe(200);
    expect(page.body.items.length).toBeLessThanOrEqual(1);
    walked.push(...page.body.items.map((p) => p.id));
    cursor = page.body.nextCursor;
  }
  expect(walked).toEqual(livePayouts);

  // A completed payout leaves the queue (claimed first: Start sending, then Complete).
  const claimed = await api.post(`/api/admin/payouts/${livePayouts[0]}/claim`, undefined, { headers: bearer(operator.token) });
  expect(claimed.body).toMatchObject({ status: 'Pending', processing: true });
  const completed = await api.post(`/api/admin/payouts/${livePayouts[0]}/complete`, { transactionHash: 'ab'.repeat(32) }, { headers: bearer(operator.token) });
  expect(completed.status).toBe(200);
  const after = await api.get('/api/admin/payouts?status=Pending&environment=live', { headers: bearer(operator.token) });
  expect((after.body.items as Array<{ id: string }>).map((p) => p.id)).toEqual(livePayouts.slice(1));

  // Bad input is a 400 naming the field.
  for (const q of ['status=Paid', 'environment=test', 'limit=0', 'cursor=not-a-cursor', 'other=1']) {
    expectProblem(await api.get(`/api/admin/payouts?${q}`, { headers: bearer(operator.token) }), 400, 'validation_failed');
  }
});

test('a merchant reads an invoice of theirs by id, finds invoices by order id, and sees the webhooks of one invoice', async () => {
  const first = await createInvoice(sandbox.key, `find-${randomUUID().slice(0, 6)}`);
  const second = await createInvoice(sandbox.key, 'shared-order');
  const third = await createInvoice(sandbox.key, 'shared-order');

  const own = await api.get(`/api/merchant/invoices/${first.id}`, { headers: bearer(merchant.token) });
  expect(own.status).toBe(200);
  // The public invoice, plus how it was priced (the static table's rate, source and date here).
  const { pricing, ...publicPart } = own.body;
  expect(publicPart).toEqual((await api.get(`/api/invoice/${first.id}`, { headers: apiKeyHeader(sandbox.key) })).body);
  expect(pricing).toEqual({ rate: 105000, rateSources: ['static'], rateQuotedAt: '2025-06-01T00:00:00.000Z' });
  const stranger = await registerMerchant(api);
  // Another merchant's invoice is told apart from a missing one by nothing: same status, code and words.
  const missing = await api.get(`/api/merchant/invoices/${randomUUID()}`, { headers: bearer(merchant.token) });
  expectProblem(missing, 404, 'not_found');
  for (const asked of [
    await api.get(`/api/merchant/invoices/${first.id}`, { headers: bearer(stranger.token) }),
    await api.post(`/api/merchant/invoices/${first.id}/simulate`, undefined, { headers: bearer(stranger.token) }),
    await api.post(`/api/merchant/invoices/${randomUUID()}/simulate`, undefined, { headers: bearer(stranger.token) }),
  ]) {
    expectProblem(asked, 404, 'not_found');
    expect(asked.body.detail).toBe(missing.body.detail);
  }
  expectProblem(await api.get(`/api/merchant/invoices/${first.id}`, { headers: apiKeyHeader(sandbox.key) }), 401);

  const byOrder = await api.get(`/api/merchant/projects/${sandbox.id}/invoices?orderId=shared-order`, { headers: bearer(merchant.token) });
  expect((byOrder.body.items as Array<{ id: string }>).map((i) => i.id)).toEqual([third.id, second.id]);
  const paged = await api.get(`/api/merchant/projects/${sandbox.id}/invoices?orderId=shared-order&limit=1`, { headers: bearer(merchant.token) });
  expect((paged.body.items as Array<{ id: string }>).map((i) => i.id)).toEqual([third.id]);
  const next = await api.get(`/api/merchant/projects/${sandbox.id}/invoices?orderId=shared-order&limit=1&cursor=${paged.body.nextCursor}`, { headers: bearer(merchant.token) });
  expect((next.body.items as Array<{ id: string }>).map((i) => i.id)).toEqual([second.id]);
  expectProblem(await api.get(`/api/merchant/projects/${sandbox.id}/invoices?orderId=`, { headers: bearer(merchant.token) }), 400, 'validation_failed');

  // Two paid invoices: the log of one shows only its own delivery.
  for (const invoice of [second, third]) {
    expect((await api.post(`/api/merchant/invoices/${invoice.id}/simulate`, undefined, { headers: bearer(merchant.token) })).status).toBe(200);
  }
  const log = (invoiceId: string) => api.get(`/api/merchant/projects/${sandbox.id}/webhook-deliveries?invoiceId=${invoiceId}`, { headers: bearer(merchant.token) });
  const deliveries = await eventually(async () => {
    const res = await log(second.id);
    return res.body.items.length > 0 ? (res.body.items as Array<{ payload: string; eventType: string }>) : undefined;
  }, 15_000, 'the delivery of the second invoice');
  expect(deliveries).toHaveLength(1);
  expect(deliveries[0]!.eventType).toBe('invoice.paid');
  expect(JSON.parse(deliveries[0]!.payload).invoiceId).toBe(second.id);
  expect((await log(first.id)).body.items).toEqual([]);
  expectProblem(await log('not-a-uuid'), 400, 'validation_failed');
});

test('projectName is the project\'s name now: an invoice made before a rename reads the new name (API key, dashboard, simulate)', async () => {
  const project = await createProjectWithKey(api, merchant, 'sandbox');
  const before = await createInvoice(project.key, `rename-${randomUUID().slice(0, 6)}`);
  const original = (await api.get(`/api/invoice/${before.id}`, { headers: apiKeyHeader(project.key) })).body.projectName as string;
  const renamed = `Renamed ${randomUUID().slice(0, 6)}`;
  expect((await api.patch(`/api/merchant/projects/${project.id}`, { name: renamed }, { headers: bearer(merchant.token) })).status).toBe(200);
  expect(renamed).not.toBe(original);
  // The dashboard asks the auth service: at once, for one invoice and in the list.
  expect((await api.get(`/api/merchant/invoices/${before.id}`, { headers: bearer(merchant.token) })).body.projectName).toBe(renamed);
  expect((await api.get(`/api/merchant/projects/${project.id}/invoices`, { headers: bearer(merchant.token) })).body.items).toEqual([expect.objectContaining({ id: before.id, projectName: renamed })]);
  // An API key's project is cached by the gateway; the rename's event drops it.
  await eventually(async () => ((await api.get(`/api/invoice/${before.id}`, { headers: apiKeyHeader(project.key) })).body.projectName === renamed ? true : undefined), 15_000, 'the new name on GET');
  const paid = await api.post(`/api/invoice/${before.id}/sandbox/pay`, undefined, { headers: apiKeyHeader(project.key) });
  expect(paid.body).toMatchObject({ status: 'Paid', projectName: renamed });
});

test('send a test event: a signed webhook.test reaches the endpoint and is logged; without a webhook URL it is not delivered; another merchant’s project a 404', async () => {
  const sent = await api.post(`/api/merchant/projects/${sandbox.id}/webhook-test`, undefined, { headers: bearer(merchant.token) });
  expect(sent.status).toBe(201);
  expect(sent.body.delivery).toMatchObject({ eventType: 'webhook.test', eventId: sent.body.eventId, status: 'pending', url: receiver.url, redeliveryOf: null });
  const [request] = await receiver.waitFor(1, 15_000, (r) => r.body.includes(sent.body.eventId));
  const body = new Webhook(sandbox.webhookSecret).verify(request!.body, request!.headers as Record<string, string>) as Record<string, unknown>;
  expect(body).toMatchObject({ eventId: sent.body.eventId, projectId: sandbox.id, message: expect.any(String) });
  expect(request!.body).toBe(sent.body.payload);
  expect(request!.headers['webhook-id']).toBe(sent.body.eventId);
  const logged = await eventually(async () => {
    const res = await api.get(`/api/merchant/projects/${sandbox.id}/webhook-deliveries/${sent.body.delivery.id}`, { headers: bearer(merchant.token) });
    return res.body.status === 'succeeded' ? res.body : undefined;
  }, 15_000, 'the test delivery to succeed');
  expect(logged.attempts[0]).toMatchObject({ responseStatus: 200, requestBody: request!.body });

  // No URL: the event goes to the project's event stream (`coinvoice listen`) only.
  const unsent = await api.post(`/api/merchant/projects/${live.id}/webhook-test`, undefined, { headers: bearer(merchant.token) });
  expect(unsent.status).toBe(201);
  expect(unsent.body).toMatchObject({ eventType: 'webhook.test', delivery: null });
  const stranger = await registerMerchant(api);
  expectProblem(await api.post(`/api/merchant/projects/${sandbox.id}/webhook-test`, undefined, { headers: bearer(stranger.token) }), 404, 'not_found');
});
