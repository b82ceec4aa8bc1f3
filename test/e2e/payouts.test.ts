/**
 * Issue 6, through the gateway, against the whole system as real processes (real Postgres and
 * NATS, a real SMTP server in this process for the verification email, a real webhook receiver):
 * the ledger fed by invoice.paid, request → emailed code → verify → operator completion, no
 * overdraft under concurrency, wrong and expired codes, cancel, bad input (a table and a property
 * over random bodies), history pagination under concurrent inserts, and completion exactly once.
 */
import { randomUUID } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { EventNamespace, connectNats } from '@coinvoice/runtime';
import { createAddressDeriver, generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import type { CryptoCode } from '@coinvoice/chains/coin';
import type { Network } from '@coinvoice/domain/project-network';
import fc from 'fast-check';
import postgres from 'postgres';
import { Webhook } from 'standardwebhooks';
import { mailText, SmtpInbox } from '../../services/notifier/test/support/smtp';
import { eventually, Receiver } from '../../services/notifier/test/support/receiver';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { copyHeaders, signInto, systemEventKeys } from '../support/event-keys';
import { testNatsUrl } from '../support/infra';
import { bootSystem, type BootedSystem } from '../support/system';
import { markEmailVerified } from '../support/accounts';
import { grantOperator } from '../support/operators';
import { publishLivePayment } from '../support/events';
import { smtpMailbox } from '../support/mail';

const CODE_TTL_MS = 10_000;

let system: BootedSystem;
let api: GatewayClient;
let inbox: SmtpInbox;
let db: postgres.Sql;
let admin: MerchantFixture;
const receivers: Receiver[] = [];

beforeAll(async () => {
  inbox = await new SmtpInbox().start();
  system = await bootSystem({
    mail: smtpMailbox(inbox),
    env: {
      // Tests 3 and 7 hold many payouts open at once.
      PAYOUT_MAX_OPEN_UNVERIFIED: '1000',
      SMTP_URL: inbox.url,
      EMAIL_FROM: 'coinvoice <no-reply@coinvoice.test>',
      PAYOUT_CODE_TTL_MS: String(CODE_TTL_MS),
      PAYOUT_SWEEP_INTERVAL_MS: '200',
      PASSWORD_HASH_MEMORY_KIB: '1024',
      WEBHOOK_RETRY_SCHEDULE: '200ms,300ms',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
  db = postgres(system.database.url, { max: 2, onnotice: () => undefined });
  admin = await operator();
}, 120_000);

afterAll(async () => {
  await db?.end();
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  for (const r of receivers) await r.stop();
  await inbox?.stop();
});

// ------------------------------------------------------------------------------------------------
// helpers

async function deleteStreams(namespace: string): Promise<void> {
  const nats = await connectNats({ url: testNatsUrl(), name: 'e2e-cleanup' });
  try {
    const jsm = await nats.jetstreamManager();
    for await (const stream of jsm.streams.list()) {
      if (stream.config.name.startsWith(`${namespace.toUpperCase()}_`)) await jsm.streams.delete(stream.config.name).catch(() => undefined);
    }
  } finally {
    await nats.close();
  }
}

const derivers = new Map<string, { addressAt(i: number): string }>();
let nextAddress = 0;

/** A fresh valid address of the coin: testnet for sandbox projects, mainnet for live ones. */
function addressFor(currency: CryptoCode, network: Network = 'testnet'): string {
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

async function sandboxShop(extra: { webhookUrl?: string } = {}): Promise<Shop> {
  const merchant = await registerMerchant(api);
  return { merchant, project: await createProjectWithKey(api, merchant, 'sandbox', extra) };
}

type Balances = Record<string, { available: number; pending: number; total: number }>;

type BalanceItem = { currency: string; availableDecimal: string; pendingDecimal: string; totalDecimal: string } & Balances[string];

/** The documented numbers per currency; the exact decimal strings beside them must say the same amounts. */
async function balances(key: string): Promise<Balances> {
  const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(key) });
  expect(res.status).toBe(200);
  return Object.fromEntries(
    (res.body.balances as BalanceItem[]).map(({ currency, available, pending, total, availableDecimal, pendingDecimal, totalDecimal }) => {
      expect([availableDecimal, pendingDecimal, totalDecimal].map(Number)).toEqual([available, pending, total]);
      return [currency, { available, pending, total }];
    }),
  );
}

/** Waits until the balance of `currency` is `available` (the ledger is fed asynchronously by invoice.paid). */
async function balanceReaches(key: string, currency: string, available: number): Promise<void> {
  await eventually(async () => ((await balances(key))[currency]?.available === available ? true : undefined), 15_000, `${currency} available = ${available}`);
}

/** Creates and sandbox-pays an invoice in `payCurrency` with amountReceived; returns the invoice id. */
async function payInvoice(key: string, payCurrency: string, amountReceived: number): Promise<string> {
  const created = await api.post(
    '/api/invoice',
    { priceAmount: '10.00', priceCurrency: 'USD', payCurrency, successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(key) },
  );
  expect(created.status).toBe(201);
  const paid = await api.post(`/api/invoice/${created.body.id}/sandbox/pay`, { amountReceived }, { headers: apiKeyHeader(key) });
  expect(paid.status).toBe(200);
  return created.body.id as string;
}

/** A registered merchant made operator by the grant-operator command, logged in again for the admin claim. */
async function operator(): Promise<MerchantFixture> {
  return grantOperator(system, api, `ops-${randomUUID().slice(0, 8)}@coinvoice.test`, 'operator-password-1');
}

/**
 * A live shop (verified merchant) whose live balance holds `amount` of `currency`: the only kind
 * of payout an operator completes or rejects (sandbox payouts complete by themselves).
 */
async function liveFundedShop(currency: string, amount: number, extra: { webhookUrl?: string } = {}): Promise<Shop> {
  const merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  const project = await createProjectWithKey(api, merchant, 'live', extra);
  await publishLivePayment(system, { projectId: project.id, currency, amount: String(amount) });
  await balanceReaches(project.key, currency, amount);
  return { merchant, project };
}

/** A sandbox shop whose balance holds `amount` of `currency`. */
async function fundedShop(currency: string, amount: number, extra: { webhookUrl?: string } = {}): Promise<Shop> {
  const shop = await sandboxShop(extra);
  await payInvoice(shop.project.key, currency, amount);
  await balanceReaches(shop.project.key, currency, amount);
  return shop;
}

async function requestPayout(key: string, body: Record<string, unknown>, headers: Record<string, string> = {}) {
  return api.post('/api/payout/request', body, { headers: { ...apiKeyHeader(key), ...headers } });
}

/** The code from the verification email of `payoutId`, as it arrived at the SMTP server. */
async function emailedCode(merchant: MerchantFixture, payoutId: string): Promise<string> {
  const mail = await inbox.waitFor((m) => m.to.includes(merchant.email) && mailText(m.raw).includes(payoutId), 15_000);
  const match = /^\s+(\d{6})\s*$/m.exec(mailText(mail.raw));
  if (!match?.[1]) throw new Error(`no code in the email for ${payoutId}`);
  return match[1];
}

/** One character changed so that only the checksum is wrong (EIP-55: a letter's case flipped). */
function breakChecksum(address: string): string {
  if (address.startsWith('0x')) {
    const i = [...address].findIndex((c, index) => index > 1 && /[a-fA-F]/.test(c));
    const c = address.charAt(i);
    return address.slice(0, i) + (c === c.toLowerCase() ? c.toUpperCase() : c.toLowerCase()) + address.slice(i + 1);
  }
  return address.slice(0, -1) + (address.endsWith('q') ? 'p' : 'q');
}

/** Everything every process of the system has logged so far. */
function logsText(): string {
  const dir = path.join(system.dataDir, 'logs');
  return readdirSync(dir)
    .map((f) => readFileSync(path.join(dir, f), 'utf8'))
    .join('\n');
}

function wrongCode(code: string): string {
  return String((Number(code) + 1) % 1_000_000).padStart(6, '0');
}

async function history(key: string, query = ''): Promise<{ items: Array<Record<string, any>>; nextCursor: string | null }> {
  const res = await api.get(`/api/payout/history${query}`, { headers: apiKeyHeader(key) });
  expect(res.status).toBe(200);
  return res.body;
}

async function payoutById(key: string, id: string): Promise<Record<string, any> | undefined> {
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<typeof history>> = await history(key, `?limit=100${cursor ? `&cursor=${cursor}` : ''}`);
    const found = page.items.find((p) => p.id === id);
    if (found) return found;
    cursor = page.nextCursor;
  } while (cursor);
  return undefined;
}

async function bounded<T>(count: number, concurrency: number, task: (i: number) => Promise<T>): Promise<T[]> {
  const results = new Array<T>(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        const i = next++;
        results[i] = await task(i);
      }
    }),
  );
  return results;
}

const claim = (id: string) => api.post(`/api/admin/payouts/${id}/claim`, undefined, { headers: bearer(admin.token) });
/** What an operator does: Start sending (the claim; a 409 when already claimed or not Pending), then Complete. */
const complete = async (id: string, transactionHash: string) => {
  await claim(id);
  return api.post(`/api/admin/payouts/${id}/complete`, { transactionHash }, { headers: bearer(admin.token) });
};
const TX = (n: number) => n.toString(16).padStart(64, 'a');

// ------------------------------------------------------------------------------------------------

describe('1. the ledger fed by invoice.paid', () => {
  test('two paid invoices show their sum; the same invoice.paid delivered twice credits once; a live balance never moves', async () => {
    const shop = await sandboxShop();
    const first = await payInvoice(shop.project.key, 'BTC', 0.0015);
    const second = await payInvoice(shop.project.key, 'BTC', 0.00025);
    await balanceReaches(shop.project.key, 'BTC', 0.00175);
    const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(shop.project.key) });
    expect(res.body).toEqual({
      projectId: shop.project.id,
      environment: 'sandbox',
      balances: [{ currency: 'BTC', network: 'bitcoin', available: 0.00175, pending: 0, total: 0.00175, availableDecimal: '0.00175', pendingDecimal: '0', totalDecimal: '0.00175' }],
    });

    // The second invoice's invoice.paid, as the invoice service published it, delivered again under
    // a new message id (signed by the invoice service's key, as a second publish of it would be).
    const nats = await connectNats({ url: testNatsUrl(), name: 'e2e-duplicate' });
    const namespace = new EventNamespace(system.namespace);
    const duplicateId = randomUUID();
    let forgedId = '';
    await markEmailVerified(system, shop.merchant.merchantId);
    const live = await createProjectWithKey(api, shop.merchant, 'live');
    try {
      const jsm = await nats.jetstreamManager();
      const original = await jsm.streams.getMessage(namespace.streamName('invoice'), { last_by_subj: namespace.subject('invoice.paid') });
      expect(original.json<{ invoiceId: string }>().invoiceId).toBe(second);
      const keys = systemEventKeys(system);
      const signed = (id: string, body: Uint8Array) => signInto(copyHeaders(original.header), keys, original.subject, id, body);
      await nats.jetstream().publish(original.subject, original.data, { msgID: duplicateId, headers: signed(duplicateId, original.data) });

      // A sandbox payment naming the live project's id cannot reach its live balance.
      forgedId = randomUUID();
      const forged = new TextEncoder().encode(
        JSON.stringify({ ...original.json<Record<string, unknown>>(), invoiceId: randomUUID(), projectId: live.id, environment: 'sandbox', amount: '7' }),
      );
      await nats.jetstream().publish(original.subject, forged, { msgID: forgedId, headers: signed(forgedId, forged) });
    } finally {
      await nats.close();
    }
    await eventually(async () => {
      const rows = await db`select event_id from payout.processed_events where event_id in ${db([duplicateId, forgedId])}`;
      return rows.length === 2 ? true : undefined;
    }, 15_000, 'the payout service to consume the duplicate and the forged event');
    expect(await balances(shop.project.key)).toEqual({ BTC: { available: 0.00175, pending: 0, total: 0.00175 } });
    const credits = await db`select invoice_id from payout.ledger_entries where kind = 'credit_invoice' and invoice_id in ${db([first, second])}`;
    expect(credits).toHaveLength(2);

    // The live project: sandbox pay is refused for its key, and its (live) balance stays empty.
    const liveInvoice = await api.post(
      '/api/invoice',
      { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
      { headers: apiKeyHeader(live.key) },
    );
    expectProblem(await api.post(`/api/invoice/${liveInvoice.body.id}/sandbox/pay`, {}, { headers: apiKeyHeader(live.key) }), 403, 'sandbox_key_required');
    const liveBalance = await api.get('/api/payout/balance', { headers: apiKeyHeader(live.key) });
    expect(liveBalance.body).toEqual({ projectId: live.id, environment: 'live', balances: [] });
    // The same through the merchant's JWT.
    const viaJwt = await api.get(`/api/payout/balance?projectId=${live.id}`, { headers: bearer(shop.merchant.token) });
    expect(viaJwt.body).toEqual({ projectId: live.id, environment: 'live', balances: [] });
  });
});

describe('2. request → emailed code → verify → admin complete', () => {
  test('balances are right at every step, and every state change reaches the webhook', async () => {
    const receiver = await new Receiver().start();
    receivers.push(receiver);
    const { merchant, project } = await liveFundedShop('ETH', 1.25, { webhookUrl: receiver.url });
    const address = addressFor('ETH', 'mainnet');

    const requested = await requestPayout(project.key, { amount: 0.5, currency: 'ETH', address, note: 'Supplier invoice 42' });
    expect(requested.status).toBe(201);
    expect(requested.body).toEqual({
      id: expect.any(String),
      amount: 0.5,
      currency: 'ETH',
      network: 'ethereum',
      address,
      note: 'Supplier invoice 42',
      status: 'AwaitingVerification',
      transactionHash: null,
      adminNote: null,
      createdAt: expect.any(String),
      environment: 'live',
      processing: false,
      confirmations: null,
      origin: 'merchant',
      approvedAt: null,
    });
    const payoutId = requested.body.id as string;
    expect(Math.abs(new Date(requested.body.createdAt).getTime() - Date.now())).toBeLessThan(60_000);
    expect(await balances(project.key)).toEqual({ ETH: { available: 0.75, pending: 0.5, total: 1.25 } });

    const code = await emailedCode(merchant, payoutId);
    const verified = await api.post('/api/payout/verify', { payoutId, code }, { headers: apiKeyHeader(project.key) });
    expect(verified.status).toBe(200);
    expect(verified.body).toMatchObject({ id: payoutId, status: 'Pending', transactionHash: null, adminNote: null });
    expect(await balances(project.key)).toEqual({ ETH: { available: 0.75, pending: 0.5, total: 1.25 } });

    // Operators only: the merchant's own token and an API key are refused.
    const hash = `0x${'c0ffee'.padEnd(64, '0')}`;
    expectProblem(await api.post(`/api/admin/payouts/${payoutId}/complete`, { transactionHash: hash }, { headers: bearer(merchant.token) }), 403, 'forbidden');
    expectProblem(await api.post(`/api/admin/payouts/${payoutId}/complete`, { transactionHash: hash }, { headers: apiKeyHeader(project.key) }), 401);

    const completed = await complete(payoutId, hash);
    expect(completed.status).toBe(200);
    expect(completed.body).toEqual({ ...requested.body, status: 'Completed', transactionHash: hash });
    expect(await balances(project.key)).toEqual({ ETH: { available: 0.75, pending: 0, total: 0.75 } });
    expect((await history(project.key)).items).toEqual([completed.body]);

    // The webhooks: requested, verified, completed — signed, never the code.
    const delivered = await receiver.waitFor(3, 15_000, (r) => r.body.includes(payoutId));
    const wh = new Webhook(project.webhookSecret);
    const bodies = delivered.map((r) => wh.verify(r.body, r.headers as Record<string, string>) as Record<string, unknown>);
    expect(bodies.map((b) => b.status).sort()).toEqual(['AwaitingVerification', 'Completed', 'Pending']);
    expect(bodies.find((b) => b.status === 'Completed')).toEqual({ payoutId, status: 'Completed', amount: 0.5, currency: 'ETH', environment: 'live', transactionHash: hash, network: 'ethereum', occurredAt: expect.any(String) });
    for (const r of receiver.requests) expect(r.body).not.toContain(code);
    // Never logged by any process (as a token of its own: timestamps and ids may contain its digits).
    expect(logsText()).not.toMatch(new RegExp(`(?<![0-9A-Za-z])${code}(?![0-9A-Za-z])`));
    expect(logsText()).toContain(payoutId);
  });

  test('the merchant JWT works too, with its own projectId; a projectId of another merchant answers 404 naming projectId, as if it did not exist', async () => {
    const { merchant, project } = await liveFundedShop('BTC', 0.01);
    const stranger = await sandboxShop();
    const auth = bearer(merchant.token);
    const body = { amount: 0.004, currency: 'BTC', address: addressFor('BTC', 'mainnet') };

    const missing = expectProblem(await api.post('/api/payout/request', body, { headers: auth }), 400, 'validation_failed');
    expect(missing.errors).toEqual([{ field: 'projectId', message: expect.stringContaining('is required') }]);
    const foreign = expectProblem(await api.post('/api/payout/request', { ...body, projectId: stranger.project.id }, { headers: auth }), 404, 'not_found');
    expect(foreign.errors).toEqual([{ field: 'projectId', message: 'is not one of your projects' }]);
    const unknown = expectProblem(await api.post('/api/payout/request', { ...body, projectId: randomUUID() }, { headers: auth }), 404, 'not_found');
    expect(unknown.errors).toEqual(foreign.errors);
    // An API key naming another project: 404 too.
    const otherKey = expectProblem(await requestPayout(project.key, { ...body, projectId: stranger.project.id }), 404, 'not_found');
    expect(otherKey.errors).toEqual([{ field: 'projectId', message: 'is not the project of this API key' }]);
    // The detail never claims the project does not exist (it may: it is another's); it says the same
    // for a foreign, an unknown and another key's project.
    for (const problem of [foreign, unknown, otherKey]) expect(problem.detail).toBe('the request names a project this caller cannot use');

    const created = await api.post('/api/payout/request', { ...body, projectId: project.id }, { headers: auth });
    expect(created.status).toBe(201);
    const code = await emailedCode(merchant, created.body.id);
    expectProblem(await api.post('/api/payout/verify', { payoutId: created.body.id, code }, { headers: auth }), 400, 'validation_failed');
    expect((await api.post('/api/payout/verify', { payoutId: created.body.id, code, projectId: project.id }, { headers: auth })).body.status).toBe('Pending');
    // History and cancel for the JWT name the project too; the stranger's project is refused.
    expectProblem(await api.get(`/api/payout/history?projectId=${stranger.project.id}`, { headers: auth }), 404, 'not_found');
    expectProblem(await api.get(`/api/payout/balance?projectId=${stranger.project.id}`, { headers: auth }), 404, 'not_found');
    expectProblem(await api.get(`/api/payout/balance?projectId=${randomUUID()}`, { headers: auth }), 404, 'not_found');
    const listed = await api.get(`/api/payout/history?projectId=${project.id}&status=Pending`, { headers: auth });
    expect(listed.body.items.map((p: { id: string }) => p.id)).toEqual([created.body.id]);
    const cancelled = await api.post(`/api/payout/${created.body.id}/cancel`, { projectId: project.id }, { headers: auth });
    expect(cancelled.body.status).toBe('Cancelled');
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.01, pending: 0, total: 0.01 } });
    // Another project's payout through an API key: 404, as if it did not exist.
    expectProblem(await api.post(`/api/payout/${created.body.id}/cancel`, undefined, { headers: apiKeyHeader(stranger.project.key) }), 404, 'not_found');
  });

  test('network (issue 24): balance items and the payout name it; left out, the currency default network; a network without a balance is 409', async () => {
    const { project } = await liveFundedShop('BTC', 0.5);
    const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(project.key) });
    expect(res.body.balances).toEqual([expect.objectContaining({ currency: 'BTC', network: 'bitcoin', available: 0.5 })]);
    const payout = await requestPayout(project.key, { amount: '0.1', currency: 'BTC', address: addressFor('BTC', 'mainnet') });
    expect(payout.status).toBe(201);
    expect(payout.body).toMatchObject({ currency: 'BTC', network: 'bitcoin', amount: 0.1 });
    const named = await requestPayout(project.key, { amount: '0.1', currency: 'BTC', network: 'bitcoin', address: addressFor('BTC', 'mainnet') });
    expect(named.body).toMatchObject({ network: 'bitcoin' });
    expect((await payoutById(project.key, named.body.id))?.network).toBe('bitcoin');
    // USDT has no balance on any network here: bsc is checked against its own (empty) balance.
    const usdt = await requestPayout(project.key, { amount: '1', currency: 'USDT', network: 'bsc', address: addressFor('USDT', 'mainnet') });
    expect(expectProblem(usdt, 409).code).toBe('insufficient_balance');
    // A network that does not carry the coin is named, with those that do.
    const base = await requestPayout(project.key, { amount: '1', currency: 'USDT', network: 'base', address: addressFor('USDT', 'mainnet') });
    expect(expectProblem(base, 400).errors).toContainEqual({ field: 'network', message: 'does not carry USDT: USDT is paid out on ethereum, arbitrum, optimism, polygon, bsc, tron' });
  });

  test('Idempotency-Key: the same body replays the first payout, another body answers 422', async () => {
    const { project } = await fundedShop('BTC', 0.01);
    const body = { amount: 0.003, currency: 'BTC', address: addressFor('BTC') };
    const key = { 'idempotency-key': `payout-${randomUUID()}` };
    const first = await requestPayout(project.key, body, key);
    const again = await requestPayout(project.key, body, key);
    expect(again.status).toBe(201);
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    expect(again.body).toEqual(first.body);
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.007, pending: 0.003, total: 0.01 } });
    expectProblem(await requestPayout(project.key, { ...body, amount: 0.004 }, key), 422, 'idempotency_key_reused');
  });

  test('a payout to a coinvoice invoice’s deposit address (another merchant’s, in any letter case) is 400 naming address, nothing held (docs/treasury.md#house-addresses)', async () => {
    const { project } = await fundedShop('BTC', 0.01);
    const supplier = await sandboxShop();
    const invoice = await api.post(
      '/api/invoice',
      { priceAmount: '5.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
      { headers: apiKeyHeader(supplier.project.key) },
    );
    expect(invoice.status).toBe(201);
    for (const address of [invoice.body.address as string, (invoice.body.address as string).toUpperCase()]) {
      const refused = expectProblem(await requestPayout(project.key, { amount: 0.001, currency: 'BTC', address }), 400, 'validation_failed');
      expect(refused.errors).toEqual([{ field: 'address', message: expect.stringContaining('is a coinvoice invoice’s deposit address') }]);
    }
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.01, pending: 0, total: 0.01 } });
    expect((await requestPayout(project.key, { amount: 0.001, currency: 'BTC', address: addressFor('BTC') })).status).toBe(201);
  });
});

describe('3. concurrency', () => {
  test('20 concurrent requests against a balance that covers 5: exactly 5 succeed, the rest 409 insufficient_balance', async () => {
    const { project } = await fundedShop('BTC', 0.05);
    const address = addressFor('BTC');
    const results = await Promise.all(Array.from({ length: 20 }, () => requestPayout(project.key, { amount: 0.01, currency: 'BTC', address })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(5);
    const refused = results.filter((r) => r.status !== 201);
    expect(refused).toHaveLength(15);
    for (const r of refused) expectProblem(r, 409, 'insufficient_balance');
    expect(await balances(project.key)).toEqual({ BTC: { available: 0, pending: 0.05, total: 0.05 } });
    const [negative] = await db`select count(*)::int as n from payout.balances where available < 0 or pending < 0`;
    expect(negative!.n).toBe(0);
  });
});

describe('4. wrong and expired codes', () => {
  test('5 wrong codes cancel the payout and release the hold', async () => {
    const { merchant, project } = await fundedShop('LTC', 2);
    const created = await requestPayout(project.key, { amount: 1.5, currency: 'LTC', address: addressFor('LTC') });
    const payoutId = created.body.id as string;
    const wrong = wrongCode(await emailedCode(merchant, payoutId));
    for (const left of ['4 attempts', '3 attempts', '2 attempts', '1 attempt']) {
      const res = await api.post('/api/payout/verify', { payoutId, code: wrong }, { headers: apiKeyHeader(project.key) });
      expect(expectProblem(res, 400, 'invalid_verification_code').errors).toEqual([{ field: 'code', message: `is wrong; ${left} left` }]);
      expect(await balances(project.key)).toEqual({ LTC: { available: 0.5, pending: 1.5, total: 2 } });
    }
    const last = await api.post('/api/payout/verify', { payoutId, code: wrong }, { headers: apiKeyHeader(project.key) });
    expect(expectProblem(last, 400, 'invalid_verification_code').errors).toEqual([{ field: 'code', message: 'is wrong; no attempts left, the payout was cancelled' }]);
    expect(await balances(project.key)).toEqual({ LTC: { available: 2, pending: 0, total: 2 } });
    expect(await payoutById(project.key, payoutId)).toMatchObject({ status: 'Cancelled' });
    expectProblem(await api.post('/api/payout/verify', { payoutId, code: wrong }, { headers: apiKeyHeader(project.key) }), 409, 'payout_not_verifiable');
  });

  test('a payout left unverified past its code lifetime is cancelled by itself, and its hold released', async () => {
    const { project } = await fundedShop('TRX', 100);
    const created = await requestPayout(project.key, { amount: 60, currency: 'TRX', address: addressFor('TRX') });
    expect(created.status).toBe(201);
    expect(await balances(project.key)).toEqual({ TRX: { available: 40, pending: 60, total: 100 } });
    const cancelled = await eventually(async () => {
      const payout = await payoutById(project.key, created.body.id);
      return payout?.status === 'Cancelled' ? payout : undefined;
    }, CODE_TTL_MS + 15_000, 'the payout to be cancelled by the sweeper');
    expect(cancelled).toMatchObject({ id: created.body.id, status: 'Cancelled', transactionHash: null });
    expect(await balances(project.key)).toEqual({ TRX: { available: 100, pending: 0, total: 100 } });
    const [row] = await db`select cancel_reason from payout.payouts where id = ${created.body.id}`;
    expect(row!.cancel_reason).toBe('code_expired');
  }, CODE_TTL_MS + 30_000);
});

describe('5. cancel', () => {
  test('cancel releases the hold; cancelling a Completed payout answers 409', async () => {
    const { merchant, project } = await liveFundedShop('USDT', 300);
    const address = addressFor('USDT', 'mainnet');
    const a = await requestPayout(project.key, { amount: 100, currency: 'USDT', address });
    const b = await requestPayout(project.key, { amount: 150.5, currency: 'USDT', address });
    expect(await balances(project.key)).toEqual({ USDT: { available: 49.5, pending: 250.5, total: 300 } });

    const cancelled = await api.post(`/api/payout/${a.body.id}/cancel`, undefined, { headers: apiKeyHeader(project.key) });
    expect(cancelled.status).toBe(200);
    expect(cancelled.body).toEqual({ ...a.body, status: 'Cancelled' });
    expect(await balances(project.key)).toEqual({ USDT: { available: 149.5, pending: 150.5, total: 300 } });
    expectProblem(await api.post(`/api/payout/${a.body.id}/cancel`, undefined, { headers: apiKeyHeader(project.key) }), 409, 'payout_not_cancellable');

    await api.post('/api/payout/verify', { payoutId: b.body.id, code: await emailedCode(merchant, b.body.id) }, { headers: apiKeyHeader(project.key) });
    expect((await complete(b.body.id, `0x${TX(1)}`)).status).toBe(200);
    const refused = expectProblem(await api.post(`/api/payout/${b.body.id}/cancel`, {}, { headers: apiKeyHeader(project.key) }), 409, 'payout_not_cancellable');
    expect(refused.detail).toBe('payout is Completed; only a payout in AwaitingVerification or Pending can be cancelled');
    expect(await balances(project.key)).toEqual({ USDT: { available: 149.5, pending: 0, total: 149.5 } });
    expectProblem(await api.post(`/api/payout/${randomUUID()}/cancel`, {}, { headers: apiKeyHeader(project.key) }), 404, 'not_found');
  });

  test('an operator rejects a Pending payout with a note: released, adminNote shown', async () => {
    const { merchant, project } = await liveFundedShop('BTC', 0.02);
    const created = await requestPayout(project.key, { amount: 0.02, currency: 'BTC', address: addressFor('BTC', 'mainnet') });
    await api.post('/api/payout/verify', { payoutId: created.body.id, code: await emailedCode(merchant, created.body.id) }, { headers: apiKeyHeader(project.key) });
    const rejected = await api.post(`/api/admin/payouts/${created.body.id}/reject`, { adminNote: 'Destination flagged' }, { headers: bearer(admin.token) });
    expect(rejected.body).toEqual({ ...created.body, status: 'Rejected', adminNote: 'Destination flagged' });
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.02, pending: 0, total: 0.02 } });
    expectProblem(await complete(created.body.id, TX(2)), 409, 'payout_not_pending');
  });
});

describe('6. bad input: a 4xx problem naming the field, never a 5xx', () => {
  let shop: Shop;
  let other: Shop;
  beforeAll(async () => {
    shop = await fundedShop('BTC', 1);
    other = await sandboxShop();
  });

  const valid = () => ({ amount: 0.01, currency: 'BTC', address: addressFor('BTC') });
  const cases: Array<[string, () => Record<string, unknown>, number, string]> = [
    ['an amount with 9 decimals', () => ({ ...valid(), amount: 0.123456789 }), 400, 'amount'],
    ['a zero amount', () => ({ ...valid(), amount: 0 }), 400, 'amount'],
    ['a negative amount', () => ({ ...valid(), amount: -1 }), 400, 'amount'],
    // (A decimal string is accepted like invoice prices: test/e2e/contract-bounds.test.ts.)
    ['an amount string with 9 decimals', () => ({ ...valid(), amount: '0.123456789' }), 400, 'amount'],
    ['an amount string that is not a decimal', () => ({ ...valid(), amount: '1e-2' }), 400, 'amount'],
    ['a huge amount', () => ({ ...valid(), amount: 1e300 }), 400, 'amount'],
    ['a tiny amount', () => ({ ...valid(), amount: 5e-324 }), 400, 'amount'],
    ['7 decimals of USDT', () => ({ ...valid(), currency: 'USDT', address: addressFor('USDT'), amount: 1.1234567 }), 400, 'amount'],
    ['no amount', () => ({ currency: 'BTC', address: addressFor('BTC') }), 400, 'amount'],
    ['a note of 501 characters', () => ({ ...valid(), note: 'x'.repeat(501) }), 400, 'note'],
    ['a note with a lone surrogate', () => ({ ...valid(), note: 'half \ud800 pair' }), 400, 'note'],
    ['an address with a bad checksum', () => ({ ...valid(), address: breakChecksum(addressFor('BTC')) }), 400, 'address'],
    ['an ETH address with a bad checksum', () => ({ ...valid(), currency: 'ETH', address: breakChecksum(addressFor('ETH')) }), 400, 'address'],
    ['a mainnet address for a sandbox project', () => ({ ...valid(), address: addressFor('BTC', 'mainnet') }), 400, 'address'],
    ['an unsupported currency', () => ({ ...valid(), currency: 'DOGE' }), 400, 'currency'],
    // Networks (docs/networks.md): one that does not carry the coin, one of another address family, one not a string.
    ['USDT on base (a network that does not carry it)', () => ({ ...valid(), currency: 'USDT', network: 'base', address: addressFor('USDT') }), 400, 'network'],
    ['BTC on ethereum', () => ({ ...valid(), network: 'ethereum' }), 400, 'network'],
    ['an EVM address for USDT on tron', () => ({ ...valid(), currency: 'USDT', network: 'tron', address: addressFor('USDT') }), 400, 'address'],
    ['a network that is not a string', () => ({ ...valid(), network: 56 }), 400, 'network'],
    ['a projectId of another merchant', () => ({ ...valid(), projectId: other.project.id }), 404, 'projectId'],
    ['a malformed projectId', () => ({ ...valid(), projectId: 'nope' }), 400, 'projectId'],
    ['an unknown field', () => ({ ...valid(), memo: 'x' }), 400, 'memo'],
  ];

  test.each(cases)('%s', async (_what, body, status, field) => {
    const res = await requestPayout(shop.project.key, body());
    const problem = expectProblem(res, status);
    expect(problem.errors.map((e: { field: string }) => e.field)).toContain(field);
  });

  test('an Idempotency-Key breaking any of its rules is named as the header, whichever rule (an outside review saw the service\'s proto name for one)', async () => {
    for (const [key, message] of [
      ['ü-key', 'must be printable ASCII'],
      ['tab\tinside', 'must be printable ASCII'],
      ['k'.repeat(256), 'must NOT have more than 255 characters'],
    ] as const) {
      const res = await api.post('/api/payout/request', valid(), { headers: { ...apiKeyHeader(shop.project.key), 'idempotency-key': key } });
      const problem = expectProblem(res, 400, 'validation_failed');
      expect(problem.errors).toEqual([{ field: 'idempotency-key', message: expect.any(String) }]);
      if (message === 'must be printable ASCII') expect(problem.errors[0].message).toBe(message);
    }
  });

  test('an amount of neither type, or of a type but out of bounds, gets one message (not one per allowed type)', async () => {
    for (const [amount, message] of [
      [-1, 'must be greater than 0'],
      [0, 'must be greater than 0'],
      [true, 'must be string or number'],
      [null, 'must be string or number'],
      ['', 'must not be empty'],
    ] as const) {
      const problem = expectProblem(await requestPayout(shop.project.key, { ...valid(), amount }), 400, 'validation_failed');
      expect(problem.errors).toEqual([{ field: 'amount', message }]);
    }
  });

  test('exact JSON numbers (issue 27): a number the JSON parser would round is 400 naming the field, never rounded; exact ones in any spelling are taken', async () => {
    const key = apiKeyHeader(shop.project.key);
    const address = addressFor('BTC');
    const raw = (amountText: string) =>
      api.post('/api/payout/request', undefined, {
        headers: { ...key, 'content-type': 'application/json' },
        raw: `{"amount":${amountText},"currency":"BTC","address":"${address}"}`,
      });
    const before = await balances(shop.project.key);
    // Today's JSON.parse reads 0.0010000000000000001 as 0.001: refused, as a number and as a string.
    for (const amount of ['0.0010000000000000001', '"0.0010000000000000001"', '0.00100000000000000000000000001', '1e-1000', '1e400', '9007199254740993']) {
      const problem = expectProblem(await raw(amount), 400, 'validation_failed');
      expect(problem.errors.map((e: { field: string }) => e.field)).toEqual(['amount']);
    }
    expect(await balances(shop.project.key)).toEqual(before);
    // A number's written decimals count as a string's do: nine are refused even when the last is 0.
    for (const amount of ['0.001000000', '"0.001000000"']) {
      const problem = expectProblem(await raw(amount), 400, 'validation_failed');
      expect(problem.errors).toEqual([{ field: 'amount', message: 'must have at most 8 decimal places' }]);
    }
    // The same value written differently is exact: taken.
    for (const amount of ['0.00100000', '1e-3', '0.1E-2']) {
      const res = await raw(amount);
      expect(res.status).toBe(201);
      expect(res.body.amount).toBe(0.001);
      await api.post(`/api/payout/${res.body.id}/cancel`, {}, { headers: key });
    }
    // Elsewhere too: a sandbox payment's amountReceived, a project's settings, an invoice's price.
    const invoice = await api.post(
      '/api/invoice',
      { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
      { headers: key },
    );
    const pay = expectProblem(
      await api.post(`/api/invoice/${invoice.body.id}/sandbox/pay`, undefined, { headers: { ...key, 'content-type': 'application/json' }, raw: '{"amountReceived":0.00010000000000000001}' }),
      400,
      'validation_failed',
    );
    expect(pay.errors.map((e: { field: string }) => e.field)).toEqual(['amountReceived']);
    const nineDecimals = expectProblem(
      await api.post(`/api/invoice/${invoice.body.id}/sandbox/pay`, undefined, { headers: { ...key, 'content-type': 'application/json' }, raw: '{"amountReceived":0.000100000}' }),
      400,
      'validation_failed',
    );
    expect(nineDecimals.errors).toEqual([{ field: 'amountReceived', message: 'must have at most 8 decimal places' }]);
    expect((await api.get(`/api/invoice/${invoice.body.id}`, { headers: key })).body.status).toBe('Waiting');
    const price = expectProblem(
      await api.post('/api/invoice', undefined, {
        headers: { ...key, 'content-type': 'application/json' },
        raw: '{"priceAmount":"19.999","priceCurrency":"USD","payCurrency":"BTC","successUrl":"https://shop.example/ok","cancelUrl":"https://shop.example/no"}',
      }),
      400,
      'validation_failed',
    );
    expect(price.errors.map((e: { field: string }) => e.field)).toEqual(['priceAmount']);
    const settings = expectProblem(
      await api.request('PATCH', `/api/merchant/projects/${shop.project.id}`, {
        headers: { ...bearer(shop.merchant.token), 'content-type': 'application/json' },
        raw: '{"invoiceLifetimeMinutes":60.0000000000000001,"paymentTolerancePercent":1.0000000000000001}',
      }),
      400,
      'validation_failed',
    );
    expect(settings.errors.map((e: { field: string }) => e.field).sort()).toEqual(['invoiceLifetimeMinutes', 'paymentTolerancePercent']);
  });

  test('every problem of a request is named at once: an unknown field does not hide the payout rules', async () => {
    const before = await balances(shop.project.key);
    const problem = expectProblem(
      await requestPayout(shop.project.key, { amount: '0', currency: 'btc', address: breakChecksum(addressFor('BTC')), memo: 'x' }),
      400,
      'validation_failed',
    );
    expect(problem.errors).toEqual(
      expect.arrayContaining([
        { field: 'memo', message: 'is not a known field' },
        { field: 'amount', message: 'must be greater than 0' },
        { field: 'address', message: expect.stringContaining('checksum') },
      ]),
    );
    expect(problem.errors).toHaveLength(3);
    // Nothing was held.
    expect(await balances(shop.project.key)).toEqual(before);
  });

  test('bad verify, history and cancel input names the field', async () => {
    const key = apiKeyHeader(shop.project.key);
    expect(expectProblem(await api.post('/api/payout/verify', { payoutId: 'x', code: '123456' }, { headers: key }), 400).errors[0].field).toBe('payoutId');
    expect(expectProblem(await api.post('/api/payout/verify', { payoutId: randomUUID(), code: 123456 }, { headers: key }), 400).errors[0].field).toBe('code');
    expect(expectProblem(await api.post('/api/payout/verify', { payoutId: randomUUID(), code: '12ab56' }, { headers: key }), 400).errors[0].field).toBe('code');
    const longNote = expectProblem(await api.post('/api/payout/request', { amount: '0.001', currency: 'BTC', address: 'x', note: 'n'.repeat(501) }, { headers: key }), 400);
    expect(longNote.errors).toContainEqual({ field: 'note', message: 'must be at most 500 characters' });
    expectProblem(await api.post('/api/payout/verify', { payoutId: randomUUID(), code: '123456' }, { headers: key }), 404, 'not_found');
    expect(expectProblem(await api.get('/api/payout/history?status=Done', { headers: key }), 400).errors[0].field).toBe('status');
    expect(expectProblem(await api.get('/api/payout/history?cursor=zzz', { headers: key }), 400).errors[0].field).toBe('cursor');
    // Said in words, never as the regular expression that checks it.
    expect(expectProblem(await api.get('/api/payout/history?limit=0', { headers: key }), 400).errors).toEqual([{ field: 'limit', message: 'must be at least 1' }]);
    // More than 100 is refused, never cut down to 100 silently (issue 27 review).
    expect(expectProblem(await api.get('/api/payout/history?limit=101', { headers: key }), 400).errors).toEqual([{ field: 'limit', message: 'must be at most 100' }]);
    expect((await api.get('/api/payout/history?limit=100', { headers: key })).status).toBe(200);
    // An integer (a typed client passes a number), in plain digits only: nothing else is read as one.
    for (const limit of ['1e1', '0x10', '%205', '5.0', 'abc', '010']) {
      expect(expectProblem(await api.get(`/api/payout/history?limit=${limit}`, { headers: key }), 400).errors).toEqual([{ field: 'limit', message: 'must be a whole number' }]);
    }
    expect(expectProblem(await api.post('/api/payout/nope/cancel', {}, { headers: key }), 400).errors[0].field).toBe('id');
    expectProblem(await api.get('/api/payout/balance'), 401, 'unauthenticated');
    expectProblem(await api.post(`/api/admin/payouts/${randomUUID()}/complete`, { transactionHash: '' }, { headers: bearer(admin.token) }), 400, 'validation_failed');
  });

  test('property: random request bodies always answer a problem+json 4xx naming a field (or 409 for a body the balance cannot cover)', async () => {
    const amount = fc.oneof(
      fc.double({ noNaN: false }),
      fc.integer({ min: -10, max: 10 }),
      fc.constantFrom(0.01, 0.00000001, 0.000000001, 1e21, -0, 123.456),
      fc.string({ maxLength: 12 }),
      fc.constant(null),
      fc.boolean(),
    );
    const currency = fc.oneof(fc.constantFrom('BTC', 'ETH', 'USDT', 'LTC', 'TRX', 'USDC', 'btc', 'DOGE', ''), fc.string({ maxLength: 20 }), fc.integer());
    const address = fc.oneof(
      fc.constant(null).map(() => addressFor('BTC')),
      fc.constant(null).map(() => addressFor('ETH')),
      fc.constant(null).map(() => addressFor('BTC', 'mainnet')),
      fc.string({ maxLength: 140 }),
      fc.constant(''),
      fc.integer(),
    );
    const note = fc.oneof(fc.string({ maxLength: 520 }), fc.string({ unit: 'binary', maxLength: 40 }), fc.constant('n'.repeat(501)), fc.integer(), fc.constant(null));
    const projectId = fc.oneof(fc.constant(shop.project.id), fc.constant(other.project.id), fc.uuid(), fc.string({ maxLength: 40 }));
    const body = fc.record(
      { amount, currency, address, note, projectId, extra: fc.string({ maxLength: 5 }) },
      { requiredKeys: [] },
    );
    const fields = ['amount', 'currency', 'address', 'note', 'projectId', 'extra', 'body'];
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        const res = await requestPayout(shop.project.key, b);
        expect(res.status).toBeLessThan(500);
        if (res.status === 201) {
          // A body that happens to be valid: held, then cancelled so the balance lasts.
          await api.post(`/api/payout/${res.body.id}/cancel`, {}, { headers: apiKeyHeader(shop.project.key) });
          return;
        }
        const problem = expectProblem(res, res.status);
        if (res.status === 409) expect(problem.code).toBe('insufficient_balance');
        else {
          expect([400, 404]).toContain(res.status);
          expect(problem.errors.length).toBeGreaterThan(0);
          for (const e of problem.errors) expect(fields).toContain(e.field.split('.')[0]);
        }
      }),
      { numRuns: 120 },
    );
    expect(await balances(shop.project.key)).toEqual({ BTC: { available: 1, pending: 0, total: 1 } });
  }, 120_000);
});

describe('8. completion exactly once', () => {
  test('completing the same payout twice concurrently debits once; the second answers 409', async () => {
    const { merchant, project } = await liveFundedShop('BTC', 0.3);
    const created = await requestPayout(project.key, { amount: 0.2, currency: 'BTC', address: addressFor('BTC', 'mainnet') });
    await api.post('/api/payout/verify', { payoutId: created.body.id, code: await emailedCode(merchant, created.body.id) }, { headers: apiKeyHeader(project.key) });
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.1, pending: 0.2, total: 0.3 } });

    const results = await Promise.all([complete(created.body.id, TX(10)), complete(created.body.id, TX(11))]);
    expect(results.map((r) => r.status).sort()).toEqual([200, 409]);
    expectProblem(results.find((r) => r.status === 409)!, 409, 'payout_not_pending');
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.1, pending: 0, total: 0.1 } });
    // And once more, sequentially.
    expectProblem(await complete(created.body.id, TX(10)), 409, 'payout_not_pending');
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.1, pending: 0, total: 0.1 } });
    const debits = await db`select 1 from payout.ledger_entries where payout_id = ${created.body.id} and kind = 'debit'`;
    expect(debits).toHaveLength(1);
  });
});

describe('9. a payout is never paid twice (issue 27)', () => {
  test('the operator claims (Start sending) and sends; the merchant cancels at once → 409 payout_in_flight, balance unchanged; the completion debits once', async () => {
    const receiver = await new Receiver().start();
    receivers.push(receiver);
    const { merchant, project } = await liveFundedShop('ETH', 1, { webhookUrl: receiver.url });
    const address = addressFor('ETH', 'mainnet');
    const requested = await requestPayout(project.key, { amount: 0.8, currency: 'ETH', address });
    expect(requested.status).toBe(201);
    const payoutId = requested.body.id as string;
    // The code email names what it confirms: the amount and the destination address.
    const mail = await inbox.waitFor((m) => m.to.includes(merchant.email) && mailText(m.raw).includes(payoutId), 15_000);
    expect(mailText(mail.raw)).toContain(address);
    expect(mailText(mail.raw)).toContain('0.8 ETH');
    await api.post('/api/payout/verify', { payoutId, code: await emailedCode(merchant, payoutId) }, { headers: apiKeyHeader(project.key) });

    // Complete before the claim is refused: the operator must claim before sending coins.
    expectProblem(await api.post(`/api/admin/payouts/${payoutId}/complete`, { transactionHash: `0x${TX(900)}` }, { headers: bearer(admin.token) }), 409, 'payout_not_claimed');
    // Only operators claim.
    expectProblem(await api.post(`/api/admin/payouts/${payoutId}/claim`, undefined, { headers: bearer(merchant.token) }), 403, 'forbidden');
    const claimed = await claim(payoutId);
    expect(claimed.status).toBe(200);
    expect(claimed.body).toEqual({ ...requested.body, status: 'Pending', processing: true });
    // The merchant sees it being sent.
    expect(await payoutById(project.key, payoutId)).toMatchObject({ status: 'Pending', processing: true });

    // The coins are on their way; the merchant sees them arrive and cancels at once.
    const refused = expectProblem(await api.post(`/api/payout/${payoutId}/cancel`, {}, { headers: apiKeyHeader(project.key) }), 409, 'payout_in_flight');
    expect(refused.detail).toContain('can no longer be cancelled');
    const viaJwt = await api.post(`/api/payout/${payoutId}/cancel`, { projectId: project.id }, { headers: bearer(merchant.token) });
    expectProblem(viaJwt, 409, 'payout_in_flight');
    expect(await balances(project.key)).toEqual({ ETH: { available: 0.2, pending: 0.8, total: 1 } });
    // So no second payout of the same 0.8 ETH can be requested.
    expectProblem(await requestPayout(project.key, { amount: 0.8, currency: 'ETH', address }), 409, 'insufficient_balance');
    expectProblem(await claim(payoutId), 409, 'payout_already_claimed');

    const hash = `0x${TX(901)}`;
    const completed = await api.post(`/api/admin/payouts/${payoutId}/complete`, { transactionHash: hash }, { headers: bearer(admin.token) });
    expect(completed.status).toBe(200);
    expect(completed.body).toEqual({ ...requested.body, status: 'Completed', transactionHash: hash, processing: false });
    expect(await balances(project.key)).toEqual({ ETH: { available: 0.2, pending: 0, total: 0.2 } });
    const debits = await db`select kind from payout.ledger_entries where payout_id = ${payoutId} order by id`;
    expect(debits.map((d) => d.kind)).toEqual(['hold', 'debit']);

    // The same transaction cannot complete another payout (0.05 ETH here).
    const other = await requestPayout(project.key, { amount: 0.05, currency: 'ETH', address });
    await api.post('/api/payout/verify', { payoutId: other.body.id, code: await emailedCode(merchant, other.body.id) }, { headers: apiKeyHeader(project.key) });
    await claim(other.body.id);
    expectProblem(await api.post(`/api/admin/payouts/${other.body.id}/complete`, { transactionHash: hash }, { headers: bearer(admin.token) }), 409, 'transaction_already_used');
    expect(await balances(project.key)).toEqual({ ETH: { available: 0.15, pending: 0.05, total: 0.2 } });
  });

  test('the operator queue shows which payouts are being sent; an unclaimed one may still be cancelled', async () => {
    const { merchant, project } = await liveFundedShop('BTC', 0.5);
    const a = await requestPayout(project.key, { amount: 0.1, currency: 'BTC', address: addressFor('BTC', 'mainnet') });
    const b = await requestPayout(project.key, { amount: 0.2, currency: 'BTC', address: addressFor('BTC', 'mainnet') });
    for (const p of [a, b]) await api.post('/api/payout/verify', { payoutId: p.body.id, code: await emailedCode(merchant, p.body.id) }, { headers: apiKeyHeader(project.key) });
    await claim(a.body.id);
    const queue = await api.get('/api/admin/payouts?status=Pending&environment=live&limit=100', { headers: bearer(admin.token) });
    const mine = (queue.body.items as Array<{ id: string; processing: boolean }>).filter((p) => p.id === a.body.id || p.id === b.body.id);
    expect(Object.fromEntries(mine.map((p) => [p.id, p.processing]))).toEqual({ [a.body.id]: true, [b.body.id]: false });
    const cancelled = await api.post(`/api/payout/${b.body.id}/cancel`, {}, { headers: apiKeyHeader(project.key) });
    expect(cancelled.body).toMatchObject({ status: 'Cancelled', processing: false });
    expect(await balances(project.key)).toEqual({ BTC: { available: 0.4, pending: 0.1, total: 0.5 } });
  });
});

// Last: its 250+ requests queue as many verification emails at the notifier.
describe('7. history', () => {
  test('pages through 250 payouts with no duplicates or gaps while new payouts are being created', async () => {
    const { project } = await fundedShop('USDC', 10_000);
    const address = addressFor('USDC');
    const original = await bounded(250, 8, async (i) => {
      const res = await requestPayout(project.key, { amount: Number((1 + i / 100).toFixed(2)), currency: 'USDC', address, note: `#${i}` });
      expect(res.status).toBe(201);
      return res.body.id as string;
    });

    let creating = true;
    const created: string[] = [];
    const creator = (async () => {
      while (creating) {
        const res = await requestPayout(project.key, { amount: 0.5, currency: 'USDC', address });
        if (res.status === 201) created.push(res.body.id);
      }
    })();
    const seen: Array<Record<string, any>> = [];
    let cursor: string | null = null;
    do {
      const page: Awaited<ReturnType<typeof history>> = await history(project.key, `?limit=20${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(page.items.length).toBeLessThanOrEqual(20);
      seen.push(...page.items);
      cursor = page.nextCursor;
    } while (cursor);
    creating = false;
    await creator;

    expect(created.length).toBeGreaterThan(0);
    const ids = seen.map((p) => p.id as string);
    expect(new Set(ids).size).toBe(ids.length);
    const seenIds = new Set(ids);
    expect(original.filter((id) => !seenIds.has(id))).toEqual([]);
    const known = new Set([...original, ...created]);
    expect(ids.filter((id) => !known.has(id))).toEqual([]);
    for (let i = 1; i < seen.length; i++) {
      expect(new Date(seen[i - 1]!.createdAt).getTime()).toBeGreaterThanOrEqual(new Date(seen[i]!.createdAt).getTime());
    }
    // Every item is the contract's Payout, exactly.
    for (const p of seen) {
      // …plus `environment` (issue 12), `processing` (issue 27), `approvedAt`, `confirmations` and `origin` (issue 23).
      expect(Object.keys(p).sort()).toEqual([
        'address', 'adminNote', 'amount', 'approvedAt', 'confirmations', 'createdAt', 'currency', 'environment', 'id', 'network', 'note', 'origin', 'processing', 'status', 'transactionHash',
      ]);
    }
  }, 120_000);
});
