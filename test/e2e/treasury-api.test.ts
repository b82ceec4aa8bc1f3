/**
 * Issue 23 through the gateway, against the whole system as real processes (real Postgres, NATS,
 * an SMTP server in this process for the codes): GET /api/payout/{id} and the Payout additions,
 * the operators' Approve, a project's auto-sweep configuration confirmed by the emailed code and
 * its trigger (live swept, sandbox ignored), the sweep-task list, the Treasury page and
 * pause/resume — each with its authentication failures. Rows the processor owns (sweep_tasks,
 * treasury_networks, a payout's hash and confirmations) are written with SQL.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import { createAddressDeriver, generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Network } from '@coinvoice/domain/project-network';
import postgres from 'postgres';
import { mailText, SmtpInbox } from '../../services/notifier/test/support/smtp';
import { eventually } from '../../services/notifier/test/support/receiver';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { markEmailVerified } from '../support/accounts';
import { grantOperator } from '../support/operators';
import { publishLivePayment } from '../support/events';
import { smtpMailbox } from '../support/mail';

let system: BootedSystem;
let api: GatewayClient;
let inbox: SmtpInbox;
let db: postgres.Sql;
let admin: MerchantFixture;

beforeAll(async () => {
  inbox = await new SmtpInbox().start();
  system = await bootSystem({
    mail: smtpMailbox(inbox),
    env: {
      SMTP_URL: inbox.url,
      EMAIL_FROM: 'coinvoice <no-reply@coinvoice.test>',
      PASSWORD_HASH_MEMORY_KIB: '1024',
      PAYOUT_AUTO_MAX_USDT: '10',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  db = postgres(system.database.url, { max: 2, onnotice: () => undefined });
  admin = await grantOperator(system, api, `ops-${randomUUID().slice(0, 8)}@coinvoice.test`, 'operator-password-1');
}, 180_000);

afterAll(async () => {
  await db?.end();
  await system?.stop();
  await inbox?.stop();
});

const derivers = new Map<string, { addressAt(i: number): string }>();
let nextAddress = 0;

function addressFor(currency: CryptoCode, network: Network): string {
  let deriver = derivers.get(`${currency}/${network}`);
  if (!deriver) {
    const created = createAddressDeriver(generateDevelopmentKeyPair(currency, network).xpub, currency, network);
    if (!created.ok) throw new Error(created.reason);
    deriver = created.value;
    derivers.set(`${currency}/${network}`, deriver);
  }
  return deriver.addressAt(nextAddress++);
}

interface Shop {
  merchant: MerchantFixture;
  project: ProjectFixture;
}

async function balanceReaches(key: string, currency: string, available: string): Promise<void> {
  await eventually(
    async () => {
      const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(key) });
      const item = (res.body.balances as Array<{ currency: string; availableDecimal: string }>).find((b) => b.currency === currency);
      return (item?.availableDecimal ?? '0') === available ? true : undefined;
    },
    15_000,
    `${currency} available = ${available}`,
  );
}

async function liveShop(currency: string, amount: string): Promise<Shop> {
  const merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  const project = await createProjectWithKey(api, merchant, 'live');
  await publishLivePayment(system, { projectId: project.id, currency, amount });
  await balanceReaches(project.key, currency, amount);
  return { merchant, project };
}

/** The 6-digit code of the newest email to `email` whose text contains `marker`. */
async function emailedCode(email: string, marker: string, after = 0): Promise<string> {
  const mail = await inbox.waitFor((m) => m.to.includes(email) && mailText(m.raw).includes(marker) && inbox.messages.indexOf(m) >= after, 15_000);
  const match = /^\s+(\d{6})\s*$/m.exec(mailText(mail.raw));
  if (!match?.[1]) throw new Error(`no code in the email to ${email}`);
  return match[1];
}

/** A verified (Pending) live payout of `amount` USDT. */
async function pendingPayout(shop: Shop, amount: number): Promise<string> {
  const requested = await api.post('/api/payout/request', { amount, currency: 'USDT', address: addressFor('USDT', 'mainnet') }, { headers: apiKeyHeader(shop.project.key) });
  expect(requested.status).toBe(201);
  const code = await emailedCode(shop.merchant.email, requested.body.id);
  const verified = await api.post('/api/payout/verify', { payoutId: requested.body.id, code }, { headers: apiKeyHeader(shop.project.key) });
  expect(verified.status).toBe(200);
  return requested.body.id as string;
}

const wrongCode = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, '0');

test('GET /api/payout/{id}: with the API key or the merchant JWT; another project’s payout is 404; no credentials 401', async () => {
  const shop = await liveShop('USDT', '100');
  const other = await liveShop('USDT', '1');
  const id = await pendingPayout(shop, 20);

  const byKey = await api.get(`/api/payout/${id}`, { headers: apiKeyHeader(shop.project.key) });
  expect(byKey.status).toBe(200);
  expect(byKey.body).toMatchObject({ id, status: 'Pending', amount: 20, currency: 'USDT', transactionHash: null, confirmations: null, origin: 'merchant', approvedAt: null, processing: false });
  const byJwt = await api.get(`/api/payout/${id}?projectId=${shop.project.id}`, { headers: bearer(shop.merchant.token) });
  expect(byJwt.status).toBe(200);
  expect(byJwt.body).toEqual(byKey.body);

  // In flight (the processor's fields, written here): the hash while Pending, and its confirmations.
  const hash = `0x${randomBytes(32).toString('hex')}`;
  await db`update payout.payouts set claimed_at = now(), claimed_by = 'processor:ethereum', transaction_hash = ${hash}, confirmations = 4 where id = ${id}`;
  expect((await api.get(`/api/payout/${id}`, { headers: apiKeyHeader(shop.project.key) })).body).toMatchObject({ status: 'Pending', processing: true, transactionHash: hash, confirmations: 4 });

  expectProblem(await api.get(`/api/payout/${id}`, { headers: apiKeyHeader(other.project.key) }), 404, 'not_found');
  expectProblem(await api.get(`/api/payout/${randomUUID()}`, { headers: apiKeyHeader(shop.project.key) }), 404, 'not_found');
  expectProblem(await api.get(`/api/payout/${id}?projectId=${shop.project.id}`, { headers: bearer(other.merchant.token) }), 404, 'not_found');
  expectProblem(await api.get(`/api/payout/${id}`, { headers: bearer(shop.merchant.token) }), 400, 'validation_failed');
  expectProblem(await api.get(`/api/payout/${id}`), 401);
  expectProblem(await api.get('/api/payout/not-a-uuid', { headers: apiKeyHeader(shop.project.key) }), 400, 'validation_failed');
}, 120_000);

test('Approve: operators only; a verified live Pending payout; again answers the same payout; otherwise 409 payout_not_pending', async () => {
  const shop = await liveShop('USDT', '100');
  const id = await pendingPayout(shop, 30);
  expectProblem(await api.post(`/api/admin/payouts/${id}/approve`, undefined), 401);
  expectProblem(await api.post(`/api/admin/payouts/${id}/approve`, undefined, { headers: bearer(shop.merchant.token) }), 403, 'forbidden');
  expectProblem(await api.post(`/api/admin/payouts/${id}/approve`, undefined, { headers: apiKeyHeader(shop.project.key) }), 401);

  const approved = await api.post(`/api/admin/payouts/${id}/approve`, undefined, { headers: bearer(admin.token) });
  expect(approved.status).toBe(200);
  expect(approved.body).toMatchObject({ id, status: 'Pending', approvedAt: expect.any(String) });
  const again = await api.post(`/api/admin/payouts/${id}/approve`, undefined, { headers: bearer(admin.token) });
  expect(again.status).toBe(200);
  expect(again.body.approvedAt).toBe(approved.body.approvedAt);
  expect((await api.get(`/api/payout/${id}`, { headers: apiKeyHeader(shop.project.key) })).body.approvedAt).toBe(approved.body.approvedAt);

  const awaiting = await api.post('/api/payout/request', { amount: 1, currency: 'USDT', address: addressFor('USDT', 'mainnet') }, { headers: apiKeyHeader(shop.project.key) });
  expectProblem(await api.post(`/api/admin/payouts/${awaiting.body.id}/approve`, undefined, { headers: bearer(admin.token) }), 409, 'payout_not_pending');
  expectProblem(await api.post(`/api/admin/payouts/${randomUUID()}/approve`, undefined, { headers: bearer(admin.token) }), 404, 'not_found');
}, 120_000);

test('auto-sweep: a destination confirmed by the emailed code; the live balance reaching the threshold is paid out once; auth and validation', async () => {
  const shop = await liveShop('USDT', '5');
  const path = `/api/merchant/projects/${shop.project.id}/auto-sweep`;
  const stranger = await registerMerchant(api);
  const destination = addressFor('USDT', 'mainnet');

  const empty = await api.get(path, { headers: bearer(shop.merchant.token) });
  expect(empty.status).toBe(200);
  expect(empty.body).toEqual({ projectId: shop.project.id, environment: 'live', entries: [], pendingChange: null });
  expectProblem(await api.get(path), 401);
  expectProblem(await api.get(path, { headers: apiKeyHeader(shop.project.key) }), 401);
  expectProblem(await api.get(path, { headers: bearer(stranger.token) }), 404, 'not_found');

  // A testnet address for a live project (EVM addresses look alike on every network: BTC's do not).
  const invalid = await api.put(path, { entries: [{ currency: 'BTC', address: addressFor('BTC', 'testnet'), threshold: '0' }] }, { headers: bearer(shop.merchant.token) });
  expect(expectProblem(invalid, 400, 'validation_failed').errors.map((e: { field: string }) => e.field)).toEqual(['entries[0].address', 'entries[0].threshold']);
  expectProblem(await api.put(path, { entries: [] }, { headers: bearer(stranger.token) }), 404, 'not_found');

  const mails = inbox.messages.length;
  const put = await api.put(path, { entries: [{ currency: 'USDT', address: destination, threshold: 12.5 }] }, { headers: bearer(shop.merchant.token) });
  expect(put.status).toBe(202);
  expect(put.body).toMatchObject({ entries: [], pendingChange: { entries: [{ currency: 'USDT', address: destination, threshold: '12.5' }], attemptsLeft: 5 } });
  const code = await emailedCode(shop.merchant.email, destination, mails);
  const wrong = await api.post(`${path}/verify`, { code: wrongCode(code) }, { headers: bearer(shop.merchant.token) });
  expect(expectProblem(wrong, 400, 'invalid_verification_code').errors).toEqual([{ field: 'code', message: 'is wrong; 4 attempts left' }]);
  const verified = await api.post(`${path}/verify`, { code }, { headers: bearer(shop.merchant.token) });
  expect(verified.status).toBe(200);
  expect(verified.body).toEqual({ projectId: shop.project.id, environment: 'live', entries: [{ currency: 'USDT', network: 'ethereum', address: destination, threshold: '12.5' }], pendingChange: null });
  expectProblem(await api.post(`${path}/verify`, { code }, { headers: bearer(shop.merchant.token) }), 409, 'auto_sweep_change_not_pending');

  // 5 + 10 = 15 ≥ 12.5: one payout of the whole balance, created verified.
  await publishLivePayment(system, { projectId: shop.project.id, currency: 'USDT', amount: '10' });
  const sweep = await eventually(
    async () => {
      const res = await api.get('/api/payout/history', { headers: apiKeyHeader(shop.project.key) });
      return (res.body.items as Array<Record<string, unknown>>).find((p) => p.origin === 'auto_sweep');
    },
    15_000,
    'the auto-sweep payout',
  );
  expect(sweep).toMatchObject({ amount: 15, currency: 'USDT', network: 'ethereum', address: destination, status: 'Pending', note: 'auto-sweep', approvedAt: null });
  expect((await api.get(`/api/payout/${sweep.id}`, { headers: apiKeyHeader(shop.project.key) })).body).toEqual(sweep);
  const balance = await api.get('/api/payout/balance', { headers: apiKeyHeader(shop.project.key) });
  expect(balance.body.balances).toMatchObject([{ currency: 'USDT', availableDecimal: '0', pendingDecimal: '15' }]);

  // Removing needs no code.
  const removed = await api.put(path, { entries: [] }, { headers: bearer(shop.merchant.token) });
  expect(removed.status).toBe(200);
  expect(removed.body.entries).toEqual([]);
}, 120_000);

test('auto-sweep: a sandbox project accepts the configuration and is never swept', async () => {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox');
  const path = `/api/merchant/projects/${project.id}/auto-sweep`;
  const destination = addressFor('BTC', 'testnet');
  const mails = inbox.messages.length;
  const put = await api.put(path, { entries: [{ currency: 'BTC', address: destination, threshold: '0.001' }] }, { headers: bearer(merchant.token) });
  expect(put.status).toBe(202);
  const verified = await api.post(`${path}/verify`, { code: await emailedCode(merchant.email, destination, mails) }, { headers: bearer(merchant.token) });
  expect(verified.body).toMatchObject({ environment: 'sandbox', entries: [{ currency: 'BTC', threshold: '0.001' }] });

  const created = await api.post(
    '/api/invoice',
    { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(project.key) },
  );
  expect(created.status).toBe(201);
  const paid = await api.post(`/api/invoice/${created.body.id}/sandbox/pay`, { amountReceived: 0.01 }, { headers: apiKeyHeader(project.key) });
  expect(paid.status).toBe(200);
  await balanceReaches(project.key, 'BTC', '0.01');
  const history = await api.get('/api/payout/history', { headers: apiKeyHeader(project.key) });
  expect(history.body.items).toEqual([]);
  expect(await db`select 1 from payout.payouts where project_id = ${project.id}`).toHaveLength(0);
}, 120_000);

test('operators: sweep tasks by invoice, status and network with paging; the Treasury page; pause and resume', async () => {
  const invoiceId = randomUUID();
  const projectId = randomUUID();
  const ids: string[] = [];
  for (const [i, status] of (['pending', 'skipped_dust', 'pending'] as const).entries()) {
    const [row] = await db<{ id: string }[]>`
      insert into payout.sweep_tasks (payment_id, invoice_id, project_id, network, asset, deposit_address, address_index, amount, status, skip_reason)
      values (${`ethereum:0x${randomBytes(32).toString('hex')}:${i}`}, ${invoiceId}, ${projectId}, 'ethereum', 'USDC', ${addressFor('ETH', 'mainnet')}, ${i}, ${2_500_000 + i}, ${status},
              ${status === 'skipped_dust' ? 'worth less than its gas' : null})
      returning id::text as id`;
    ids.push(row!.id);
  }
  expectProblem(await api.get('/api/admin/sweep-tasks'), 401);
  const merchant = await registerMerchant(api);
  expectProblem(await api.get('/api/admin/sweep-tasks', { headers: bearer(merchant.token) }), 403, 'forbidden');
  const pending = await api.get(`/api/admin/sweep-tasks?invoiceId=${invoiceId}&status=pending&network=ethereum`, { headers: bearer(admin.token) });
  expect(pending.status).toBe(200);
  expect(pending.body.items.map((t: { id: string }) => t.id)).toEqual([ids[2], ids[0]]);
  expect(pending.body.items[1]).toMatchObject({ invoiceId, projectId, asset: 'USDC', amount: '2.5', status: 'pending', skipReason: null, transactionHash: null });
  const first = await api.get(`/api/admin/sweep-tasks?invoiceId=${invoiceId}&limit=2`, { headers: bearer(admin.token) });
  expect(first.body.items.map((t: { id: string }) => t.id)).toEqual([ids[2], ids[1]]);
  const second = await api.get(`/api/admin/sweep-tasks?invoiceId=${invoiceId}&limit=2&cursor=${first.body.nextCursor}`, { headers: bearer(admin.token) });
  expect(second.body).toMatchObject({ items: [{ id: ids[0] }], nextCursor: null });
  expectProblem(await api.get('/api/admin/sweep-tasks?status=lost', { headers: bearer(admin.token) }), 400, 'validation_failed');

  // The Treasury page: the processor's recorded address, the approval queue above PAYOUT_AUTO_MAX_USDT (10).
  const treasuryAddress = addressFor('ETH', 'mainnet');
  await db`insert into payout.treasury_networks (network, address) values ('ethereum', ${treasuryAddress}) on conflict (network) do nothing`;
  const shop = await liveShop('USDT', '100');
  const small = await pendingPayout(shop, 10);
  const large = await pendingPayout(shop, 10.5);
  expectProblem(await api.get('/api/admin/treasury', { headers: bearer(merchant.token) }), 403, 'forbidden');
  const page = await api.get('/api/admin/treasury', { headers: bearer(admin.token) });
  expect(page.status).toBe(200);
  const ethereum = page.body.networks.find((n: { network: string }) => n.network === 'ethereum');
  expect(ethereum).toMatchObject({ address: treasuryAddress, paused: false, pausedBy: null });
  // No node in this system: every balance says why it is missing.
  expect(ethereum.balances).toEqual(
    ['ETH', 'USDT', 'USDC'].map((asset) => ({ asset, amount: null, unavailableReason: expect.stringContaining('CHAIN_ETHEREUM_RPC_URL is not set') })),
  );
  expect(ethereum.pendingSweeps).toContainEqual({ asset: 'USDC', count: 2, amount: '5.000002' });
  const queue = ethereum.approvalQueue.map((p: { id: string }) => p.id);
  expect(queue).toContain(large);
  expect(queue).not.toContain(small);
  expect(ethereum.approvalQueue.find((p: { id: string }) => p.id === large)).toMatchObject({ projectId: shop.project.id, amount: 10.5 });

  expectProblem(await api.post('/api/admin/treasury/ethereum/pause', undefined, { headers: bearer(merchant.token) }), 403, 'forbidden');
  const paused = await api.post('/api/admin/treasury/ethereum/pause', undefined, { headers: bearer(admin.token) });
  expect(paused.status).toBe(200);
  expect(paused.body).toMatchObject({ network: 'ethereum', paused: true, pausedBy: admin.merchantId });
  expect(await db`select paused from payout.treasury_networks where network = 'ethereum'`).toEqual([{ paused: true }]);
  const resumed = await api.post('/api/admin/treasury/ethereum/resume', undefined, { headers: bearer(admin.token) });
  expect(resumed.body).toMatchObject({ paused: false, pausedBy: null });
  expectProblem(await api.post('/api/admin/treasury/dogecoin/pause', undefined, { headers: bearer(admin.token) }), 404, 'not_found');
}, 180_000);
