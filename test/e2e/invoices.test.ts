/**
 * Issue 4 through the gateway, against the whole system as processes: the Invoice contract field
 * by field, isolation, exactly-once sandbox payment under concurrency, addresses, money, expiry
 * with two sweepers, idempotency and bad input.
 */
import { randomUUID } from 'node:crypto';
import { validateAddress } from '@coinvoice/chains/addresses';
import { cryptoCurrency, isCryptoCode, minimumAmount } from '@coinvoice/chains/currencies';
import { Decimal } from '@coinvoice/domain/money';
import fc from 'fast-check';
import postgres from 'postgres';
import { decodeSegwitV0 } from '../../services/invoice/test/support/independent-codecs';
import { publishedEvents } from '../support/events';
import { markEmailVerified } from '../support/accounts';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type ProjectFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';

let system: BootedSystem;
let api: GatewayClient;
let db: postgres.Sql;
let sandbox: ProjectFixture;
let live: ProjectFixture;
let merchantToken: string;

beforeAll(async () => {
  // Two invoice replicas: their sweepers race for the same expired invoices.
  system = await bootSystem({ env: { INVOICE_REPLICAS: '2', INVOICE_SWEEP_INTERVAL_MS: '100' } });
  api = new GatewayClient(system.gatewayUrl);
  db = postgres(system.database.url, { max: 2, onnotice: () => undefined });
  const merchant = await registerMerchant(api);
  merchantToken = merchant.token;
  await markEmailVerified(system, merchant.merchantId);
  [sandbox, live] = await Promise.all([createProjectWithKey(api, merchant, 'sandbox', { name: 'Sandbox Shop' }), createProjectWithKey(api, merchant, 'live', { name: 'Live Shop' })]);
}, 120_000);

afterAll(async () => {
  await db?.end();
  await system?.stop();
});

const body = (overrides: Record<string, unknown> = {}) => ({
  priceAmount: '19.90',
  priceCurrency: 'USD',
  payCurrency: 'BTC',
  successUrl: 'https://shop.example/ok',
  cancelUrl: 'https://shop.example/cancel',
  ...overrides,
});
const create = (project: ProjectFixture, overrides?: Record<string, unknown>, headers: Record<string, string> = {}) =>
  api.post('/api/invoice', body(overrides), { headers: { ...apiKeyHeader(project.key), ...headers } });

const ISO_UTC = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

test('create then get returns every field of the Invoice table with its documented type and rules', async () => {
  const created = await create(sandbox, { orderId: 'order-1', orderDescription: 'Two mugs' });
  expect(created.status).toBe(201);
  const inv = created.body;
  expect(Object.keys(inv).sort()).toEqual(
    // The seed's 17 fields and payNetwork, an addition of issue 24 (docs/networks.md).
    ['address', 'amountExpected', 'amountReceived', 'cancelUrl', 'createdAt', 'expiredAt', 'id', 'isDonation', 'orderDescription', 'orderId', 'payCurrency', 'payNetwork', 'priceAmount', 'priceAmountInUsd', 'priceCurrency', 'projectName', 'status', 'successUrl'].sort(),
  );
  expect(inv).toMatchObject({
    payNetwork: 'bitcoin',
    orderId: 'order-1',
    orderDescription: 'Two mugs',
    priceAmount: 19.9,
    priceAmountInUsd: 19.9,
    amountReceived: 0,
    priceCurrency: 'USD',
    payCurrency: 'BTC',
    status: 'Waiting',
    successUrl: 'https://shop.example/ok',
    cancelUrl: 'https://shop.example/cancel',
    projectName: 'Sandbox Shop',
    isDonation: false,
  });
  expect(inv.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
  for (const f of ['priceAmount', 'priceAmountInUsd', 'amountReceived', 'amountExpected']) expect(typeof inv[f]).toBe('number');
  expect(inv.createdAt).toMatch(ISO_UTC);
  expect(inv.expiredAt).toMatch(ISO_UTC);
  expect(new Date(inv.expiredAt).getTime() - new Date(inv.createdAt).getTime()).toBe(60 * 60_000);
  expect(validateAddress('BTC', 'testnet', inv.address).ok).toBe(true);
  expect(inv.address.startsWith('tb1q')).toBe(true);
  expect(inv.amountExpected).toBeGreaterThan(0);

  const got = await api.get(`/api/invoice/${inv.id}`, { headers: apiKeyHeader(sandbox.key) });
  expect(got.status).toBe(200);
  expect(got.body).toEqual(inv);

  const donation = await create(sandbox, { isDonation: true });
  expect(donation.body.isDonation).toBe(true);
  const bare = await create(sandbox);
  expect(bare.body.orderId).toBe('');
  expect(bare.body.orderDescription).toBe('');

  const liveInvoice = await create(live);
  expect(liveInvoice.status).toBe(201);
  expect(liveInvoice.body.address.startsWith('bc1q')).toBe(true);
  expect(liveInvoice.body.projectName).toBe('Live Shop');
});

test("another project's invoice answers 404 as if it did not exist; a malformed id 400", async () => {
  const inv = (await create(sandbox)).body;
  const other = await createProjectWithKey(api, await registerMerchant(api), 'sandbox');
  expectProblem(await api.get(`/api/invoice/${inv.id}`, { headers: apiKeyHeader(other.key) }), 404, 'not_found');
  expectProblem(await api.post(`/api/invoice/${inv.id}/sandbox/pay`, {}, { headers: apiKeyHeader(other.key) }), 404, 'not_found');
  expectProblem(await api.get(`/api/invoice/${inv.id}`, { headers: apiKeyHeader(live.key) }), 404, 'not_found');
  const malformed = expectProblem(await api.get('/api/invoice/12345', { headers: apiKeyHeader(sandbox.key) }), 400, 'validation_failed');
  expect(malformed.errors).toEqual([expect.objectContaining({ field: 'id' })]);
});

/** Batch envelopes every invoice process has served (rpc_server_handled_total on their admin ports). */
async function invoiceBatchesServed(): Promise<number> {
  let total = 0;
  for (const [name, info] of Object.entries(system.current())) {
    if (!name.startsWith('invoice') || !info.adminUrl) continue;
    const metrics = await (await fetch(`${info.adminUrl}/metrics`)).text();
    for (const m of metrics.matchAll(/^rpc_server_handled_total\{[^}]*procedure="coinvoice\.rpc\.v1\.BatchService\/Call"[^}]*\} (\d+)/gm)) total += Number(m[1]);
  }
  return total;
}

test('requests made together reach the invoice service in batches (docs/performance.md#batched-calls); each is answered with its own invoice or its own 404', async () => {
  const orders = Array.from({ length: 30 }, (_, i) => `batch-${i}-${randomUUID()}`);
  const before = await invoiceBatchesServed();
  const created = await Promise.all(orders.map((orderId) => create(sandbox, { orderId })));
  expect(created.map((r) => [r.status, r.body.orderId])).toEqual(orders.map((orderId) => [201, orderId]));
  const foreign = (await create(live)).body.id as string;
  const ids = [...created.map((r) => r.body.id as string), foreign, randomUUID()];
  const read = await Promise.all(ids.map((id) => api.get(`/api/invoice/${id}`, { headers: apiKeyHeader(sandbox.key) })));
  expect(read.slice(0, 30).map((r) => [r.status, r.body.id, r.body.orderId])).toEqual(created.map((r) => [200, r.body.id, r.body.orderId]));
  expectProblem(read[30]!, 404, 'not_found');
  expectProblem(read[31]!, 404, 'not_found');
  expect(await invoiceBatchesServed()).toBeGreaterThan(before);
});

test('50 concurrent sandbox pays: exactly one 200, the rest 409, exactly one invoice.paid on JetStream', async () => {
  const inv = (await create(sandbox, { orderId: 'order-race' })).body;
  const results = await Promise.all(
    Array.from({ length: 50 }, () => api.post(`/api/invoice/${inv.id}/sandbox/pay`, undefined, { headers: apiKeyHeader(sandbox.key) })),
  );
  const statuses = results.map((r) => r.status).sort();
  expect(statuses.filter((s) => s === 200)).toHaveLength(1);
  expect(statuses.filter((s) => s === 409)).toHaveLength(49);
  for (const r of results.filter((x) => x.status === 409)) expectProblem(r, 409, 'invoice_not_payable');
  const ok = results.find((r) => r.status === 200)!;
  expect(ok.body).toMatchObject({ id: inv.id, status: 'Paid', amountReceived: inv.amountExpected });

  await new Promise((r) => setTimeout(r, 500)); // let any wrongly doubled event arrive
  const paid = (await publishedEvents(system.namespace, 'invoice.paid', { atLeast: 1 })).filter((e) => e.payload.invoiceId === inv.id);
  expect(paid).toHaveLength(1);
  expect(paid[0]!.payload).toMatchObject({ invoiceId: inv.id, orderId: 'order-race', status: 'Paid', amount: String(inv.amountExpected), currency: 'BTC', environment: 'sandbox' });
  expect((await api.get(`/api/invoice/${inv.id}`, { headers: apiKeyHeader(sandbox.key) })).body.status).toBe('Paid');
});

test('sandbox pay takes amountReceived and transactionHash; a live key is refused with 403', async () => {
  const inv = (await create(sandbox)).body;
  const paid = await api.post(`/api/invoice/${inv.id}/sandbox/pay`, { amountReceived: 0.00012345, transactionHash: 'ab'.repeat(32) }, { headers: apiKeyHeader(sandbox.key) });
  expect(paid.status).toBe(200);
  expect(paid.body.amountReceived).toBe(0.00012345);
  const liveInv = (await create(live)).body;
  expectProblem(await api.post(`/api/invoice/${liveInv.id}/sandbox/pay`, {}, { headers: apiKeyHeader(live.key) }), 403, 'sandbox_key_required');
  const tooPrecise = await api.post(`/api/invoice/${(await create(sandbox)).body.id}/sandbox/pay`, { amountReceived: 0.000000001 }, { headers: apiKeyHeader(sandbox.key) });
  expect(expectProblem(tooPrecise, 400).errors).toEqual([expect.objectContaining({ field: 'amountReceived' })]);
});

test('an amount under 10^-6 is written in plain notation in every invoice body, as in its webhook (never 1e-8)', async () => {
  const inv = (await create(sandbox, { priceAmount: '0.01', payCurrency: 'ETH' })).body;
  const paid = await api.post(`/api/invoice/${inv.id}/sandbox/pay`, { amountReceived: 0.00000001 }, { headers: apiKeyHeader(sandbox.key) });
  expect(paid.status).toBe(200);
  const bodies = [
    paid.text,
    (await api.get(`/api/invoice/${inv.id}`, { headers: apiKeyHeader(sandbox.key) })).text,
    (await api.get(`/api/merchant/invoices/${inv.id}`, { headers: bearer(merchantToken) })).text,
    (await api.get(`/api/checkout/${inv.id}`)).text,
  ];
  for (const text of bodies) {
    expect(text).toContain('"amountReceived":0.00000001');
    expect(text).not.toMatch(/[:,[]-?\d+(\.\d+)?e[-+]?\d/i);
    expect(JSON.parse(text).amountReceived).toBe(1e-8);
  }
});

test('1,000 invoices created concurrently get 1,000 distinct valid addresses', async () => {
  const addresses: string[] = [];
  const queue = Array.from({ length: 1000 }, (_, i) => i);
  await Promise.all(
    Array.from({ length: 25 }, async () => {
      while (queue.length > 0) {
        queue.pop();
        const res = await create(sandbox, { priceAmount: '5.00' });
        expect(res.status).toBe(201);
        addresses.push(res.body.address);
      }
    }),
  );
  expect(addresses).toHaveLength(1000);
  expect(new Set(addresses).size).toBe(1000);
  for (const address of addresses) {
    // An independent bech32 decoder (written from BIP173 for the tests), not the service's own.
    const decoded = decodeSegwitV0(address);
    expect(decoded).toMatchObject({ hrp: 'tb', version: 0 });
    expect(decoded?.program).toHaveLength(20);
  }
}, 120_000);

test('money is exact or refused: decimals per currency, JPY without minor units', async () => {
  const usd = await create(sandbox, { priceAmount: '0.30', payCurrency: 'USDT' });
  expect(usd.status).toBe(201);
  expect(usd.body.priceAmount).toBe(0.3);
  expect(usd.body.priceAmountInUsd).toBe(0.3);
  expect(usd.body.amountExpected).toBe(0.3);

  const jpy = await create(sandbox, { priceAmount: '1500', priceCurrency: 'JPY', payCurrency: 'ETH' });
  expect(jpy.status).toBe(201);
  expect(jpy.body.priceAmount).toBe(1500);
  expect(jpy.body.priceAmountInUsd).toBe(10.35); // 1500 × 0.0069, half-up to cents
  // From the two USD prices, never from a rounded cross rate: 10.35 USD / 2500 is exactly 0.00414 ETH
  // (a cross rate cut to 12 digits asked 0.00414001).
  expect(jpy.body.amountExpected).toBe(0.00414);

  // Below a UTXO chain's dust limit no wallet can pay: 0.30 USD is 286 sat at the shipped 105,000 (dust: 294).
  const dust = expectProblem(await create(sandbox, { priceAmount: '0.30', payCurrency: 'BTC' }), 400, 'validation_failed');
  expect(dust.errors).toEqual([
    { field: 'priceAmount', message: "is too small: it comes to 0.00000286 BTC, below the smallest payable amount of 0.00000294 BTC (the chain's dust limit)" },
  ]);
  expect((await create(sandbox, { priceAmount: '0.31', payCurrency: 'BTC' })).body.amountExpected).toBe(0.00000296);

  for (const [priceAmount, priceCurrency] of [['1500.5', 'JPY'], ['10.001', 'USD'], ['1e3', 'USD'], ['-5.00', 'USD'], ['0', 'EUR'], ['0.00', 'EUR'], ['abc', 'USD'], [' 10', 'USD']]) {
    const res = await create(sandbox, { priceAmount, priceCurrency });
    const problem = expectProblem(res, 400, 'validation_failed');
    expect(problem.errors).toEqual([expect.objectContaining({ field: 'priceAmount' })]);
  }
});

test('property: amountExpected at the shipped rate never falls short of the price', async () => {
  const usdPerCoin: Record<string, string> = { BTC: '105000', LTC: '88', ETH: '2500', USDT: '1', USDC: '1', TRX: '0.27', POL: '0.2', BNB: '650' };
  const usdPerFiat: Record<string, string> = { USD: '1', EUR: '1.14', GBP: '1.35', JPY: '0.0069', CHF: '1.21', CAD: '0.73', AUD: '0.65' };
  await fc.assert(
    fc.asyncProperty(
      fc.constantFrom(...Object.keys(usdPerCoin)),
      fc.constantFrom(...Object.keys(usdPerFiat)),
      fc.integer({ min: 1, max: 50_000_000 }),
      async (coin, fiat, minor) => {
        const decimals = fiat === 'JPY' ? 0 : 2;
        const price = new Decimal(minor).div(new Decimal(10).pow(decimals));
        const res = await create(sandbox, { priceAmount: price.toFixed(decimals), priceCurrency: fiat, payCurrency: coin });
        if (!isCryptoCode(coin)) throw new Error(coin);
        // A price worth less than the coin's dust limit is refused (a UTXO chain cannot carry it).
        const minimum = minimumAmount(cryptoCurrency(coin));
        if (price.mul(usdPerFiat[fiat]!).div(usdPerCoin[coin]!).lt(minimum)) {
          expect(expectProblem(res, 400, 'validation_failed').errors).toEqual([expect.objectContaining({ field: 'priceAmount', message: expect.stringMatching(/^is too small/) })]);
          return;
        }
        expect(res.status).toBe(201);
        // The value the merchant receives, at the same static rate, is at least the price.
        const valueInFiat = new Decimal(res.body.amountExpected).mul(usdPerCoin[coin]!).div(usdPerFiat[fiat]!);
        expect(valueInFiat.gte(price)).toBe(true);
      },
    ),
    { numRuns: 120 },
  );
}, 60_000);

test('an invoice past its lifetime becomes Expired once (two sweepers), emits invoice.expired, and cannot be paid', async () => {
  const invoices = await Promise.all(Array.from({ length: 20 }, () => create(sandbox, { orderId: 'late' })));
  const ids = invoices.map((r) => r.body.id as string);
  await db`update invoice.invoices set created_at = now() - interval '2 hours', expired_at = now() - interval '1 second' where id = any(${ids}::uuid[])`;
  const deadline = Date.now() + 10_000;
  let statuses: string[] = [];
  while (Date.now() < deadline) {
    statuses = await Promise.all(ids.map(async (id) => (await api.get(`/api/invoice/${id}`, { headers: apiKeyHeader(sandbox.key) })).body.status));
    if (statuses.every((s) => s === 'Expired')) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect(statuses.every((s) => s === 'Expired')).toBe(true);
  await new Promise((r) => setTimeout(r, 500));
  const expired = (await publishedEvents(system.namespace, 'invoice.expired', { atLeast: ids.length })).filter((e) => ids.includes(e.payload.invoiceId as string));
  expect(expired).toHaveLength(ids.length);
  expect(new Set(expired.map((e) => e.payload.invoiceId)).size).toBe(ids.length);
  expect(expired[0]!.payload).toMatchObject({ status: 'Expired', currency: 'BTC', environment: 'sandbox', orderId: 'late' });
  expectProblem(await api.post(`/api/invoice/${ids[0]}/sandbox/pay`, undefined, { headers: apiKeyHeader(sandbox.key) }), 409, 'invoice_not_payable');
});

test('Idempotency-Key: the same body replays the first response without a second invoice; another body 422', async () => {
  const key = randomUUID();
  const first = await create(sandbox, { orderId: 'idem' }, { 'idempotency-key': key });
  const again = await create(sandbox, { orderId: 'idem' }, { 'idempotency-key': key });
  expect(first.status).toBe(201);
  expect(again.status).toBe(201);
  expect(again.body).toEqual(first.body);
  expect(again.headers.get('idempotent-replayed')).toBe('true');
  const [row] = await db<{ n: string }[]>`select count(*) as n from invoice.invoices where order_id = 'idem'`;
  expect(Number(row?.n)).toBe(1);
  expectProblem(await create(sandbox, { orderId: 'idem', priceAmount: '20.00' }, { 'idempotency-key': key }), 422, 'idempotency_key_reused');
  // Keys are per project: another project may use the same key for its own invoice.
  const elsewhere = await create(live, { orderId: 'idem' }, { 'idempotency-key': key });
  expect(elsewhere.status).toBe(201);
  expect(elsewhere.body.id).not.toBe(first.body.id);
});

test('bad input on every invoice route answers 400 problem+json naming the field', async () => {
  const h = apiKeyHeader(sandbox.key);
  const cases: Array<[Record<string, unknown>, string]> = [
    [body({ priceCurrency: 'XYZ' }), 'priceCurrency'],
    [body({ payCurrency: 'DOGE' }), 'payCurrency'],
    [body({ priceAmount: 19.9 }), 'priceAmount'],
    [body({ successUrl: 'not a url' }), 'successUrl'],
    [body({ cancelUrl: 'ftp://x.example/' }), 'cancelUrl'],
    [body({ isDonation: 'yes' }), 'isDonation'],
    [body({ orderId: 'x'.repeat(256) }), 'orderId'],
    [body({ orderDescription: 'x'.repeat(5000) }), 'orderDescription'],
    [body({ unknownField: 1 }), 'unknownField'],
    [{ priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://a.example', cancelUrl: 'https://a.example' }, 'priceAmount'],
  ];
  for (const [b, field] of cases) {
    const problem = expectProblem(await api.post('/api/invoice', b, { headers: h }), 400, 'validation_failed');
    expect({ field, got: problem.errors?.map((e: { field: string }) => e.field) }).toEqual({ field, got: expect.arrayContaining([field]) });
  }
  const unsupported = expectProblem(await api.post('/api/invoice', body({ payCurrency: 'DOGE' }), { headers: h }), 400);
  expect(JSON.stringify(unsupported)).toContain('BTC');
  const inv = (await create(sandbox)).body;
  expectProblem(await api.post(`/api/invoice/${inv.id}/sandbox/pay`, { amountReceived: -1 }, { headers: h }), 400, 'validation_failed');
  expectProblem(await api.post(`/api/invoice/${inv.id}/sandbox/pay`, { transactionHash: 'x'.repeat(129) }, { headers: h }), 400, 'validation_failed');
  expectProblem(await api.post(`/api/invoice/${inv.id}/sandbox/pay`, { amountReceived: '1' }, { headers: h }), 400, 'validation_failed');
});

test('every problem of a create body is named at once: an unknown field does not hide the invoice rules', async () => {
  const h = apiKeyHeader(sandbox.key);
  const before = await db`select count(*)::int as n from invoice.invoices`;
  const problem = expectProblem(
    await api.post('/api/invoice', { ...body({ priceAmount: '-1', payCurrency: 'DOGE', cancelUrl: 'nope' }), memo: 'x' }, { headers: h }),
    400,
    'validation_failed',
  );
  expect(problem.errors).toEqual(
    expect.arrayContaining([
      { field: 'memo', message: 'is not a known field' },
      { field: 'priceAmount', message: 'must be greater than 0' },
      { field: 'payCurrency', message: expect.stringContaining('unsupported currency "DOGE"') },
      { field: 'cancelUrl', message: expect.stringContaining('absolute URL') },
    ]),
  );
  expect(problem.errors).toHaveLength(4);
  // A value of the wrong type keeps the schema's words, once; the other fields are still checked.
  const typed = expectProblem(await api.post('/api/invoice', { ...body({ priceAmount: 19.9, priceCurrency: 'XYZ' }), memo: 'x' }, { headers: h }), 400);
  expect(typed.errors).toEqual(
    expect.arrayContaining([
      { field: 'priceAmount', message: 'must be string' },
      { field: 'memo', message: 'is not a known field' },
      { field: 'priceCurrency', message: expect.stringContaining('unsupported currency "XYZ"') },
    ]),
  );
  expect(typed.errors).toHaveLength(3);
  // A valid invoice with an unknown field is still refused, and nothing was created.
  expect(expectProblem(await api.post('/api/invoice', { ...body(), memo: 'x' }, { headers: h }), 400).errors).toEqual([{ field: 'memo', message: 'is not a known field' }]);
  expect(await db`select count(*)::int as n from invoice.invoices`).toEqual(before);
});

test('property: random bodies on every invoice route never get a 5xx', async () => {
  const h = apiKeyHeader(sandbox.key);
  const inv = (await create(sandbox)).body;
  const createBodies = fc.oneof(
    fc.anything({ maxDepth: 2 }),
    fc.record(
      {
        priceAmount: fc.oneof(fc.string({ maxLength: 70 }), fc.double(), fc.constantFrom('1', '0.01', '99999999999999', '1.999')),
        priceCurrency: fc.oneof(fc.constantFrom('USD', 'EUR', 'JPY', 'usd', ''), fc.string()),
        payCurrency: fc.oneof(fc.constantFrom('BTC', 'ETH', 'TRX', 'USDC'), fc.string()),
        successUrl: fc.oneof(fc.webUrl(), fc.string()),
        cancelUrl: fc.oneof(fc.webUrl(), fc.string()),
        orderId: fc.string({ maxLength: 300 }),
        isDonation: fc.oneof(fc.boolean(), fc.integer()),
      },
      { requiredKeys: [] },
    ),
  );
  await fc.assert(
    fc.asyncProperty(createBodies, async (b) => {
      const res = await api.request('POST', '/api/invoice', { raw: JSON.stringify(b) ?? 'null', headers: { ...h, 'content-type': 'application/json' } });
      expect(res.status).toBeLessThan(500);
      if (res.status >= 400) expect(res.headers.get('content-type')).toContain('application/problem+json');
    }),
    { numRuns: 250 },
  );
  const payBodies = fc.oneof(fc.anything({ maxDepth: 2 }), fc.record({ amountReceived: fc.oneof(fc.double(), fc.integer(), fc.string()), transactionHash: fc.oneof(fc.string({ maxLength: 200 }), fc.integer()) }, { requiredKeys: [] }));
  await fc.assert(
    fc.asyncProperty(payBodies, async (b) => {
      const res = await api.request('POST', `/api/invoice/${inv.id}/sandbox/pay`, { raw: JSON.stringify(b) ?? 'null', headers: { ...h, 'content-type': 'application/json' } });
      expect(res.status).toBeLessThan(500);
    }),
    { numRuns: 200 },
  );
}, 120_000);

test('the dashboard lists a project’s invoices by status with a cursor, and Simulate pays a sandbox invoice', async () => {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox');
  const made: string[] = [];
  for (let i = 0; i < 5; i++) made.push((await create(project, { orderId: `list-${i}` })).body.id);
  const auth = { authorization: `Bearer ${merchant.token}` };
  const page1 = await api.get(`/api/merchant/projects/${project.id}/invoices?limit=3`, { headers: auth });
  expect(page1.status).toBe(200);
  expect(page1.body.items.map((i: { id: string }) => i.id)).toEqual(made.slice().reverse().slice(0, 3));
  const page2 = await api.get(`/api/merchant/projects/${project.id}/invoices?limit=3&cursor=${encodeURIComponent(page1.body.nextCursor)}`, { headers: auth });
  expect(page2.body.items.map((i: { id: string }) => i.id)).toEqual(made.slice().reverse().slice(3));
  expect(page2.body.nextCursor).toBeNull();

  const simulated = await api.post(`/api/merchant/invoices/${made[0]}/simulate`, undefined, { headers: auth });
  expect(simulated.status).toBe(200);
  expect(simulated.body.status).toBe('Paid');
  const paidOnly = await api.get(`/api/merchant/projects/${project.id}/invoices?status=Paid`, { headers: auth });
  expect(paidOnly.body.items.map((i: { id: string }) => i.id)).toEqual([made[0]]);

  const stranger = await registerMerchant(api);
  expectProblem(await api.get(`/api/merchant/projects/${project.id}/invoices`, { headers: { authorization: `Bearer ${stranger.token}` } }), 404, 'not_found');
  expectProblem(await api.post(`/api/merchant/invoices/${made[1]}/simulate`, undefined, { headers: { authorization: `Bearer ${stranger.token}` } }), 404, 'not_found');
  expectProblem(await api.get(`/api/merchant/projects/${project.id}/invoices?limit=1000`, { headers: auth }), 400, 'validation_failed');
});
