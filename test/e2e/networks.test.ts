/**
 * Issue 24 ("Asset and network") through the gateway, against the whole system as real processes:
 * GET /api/currencies (public, cacheable, exact numbers), payNetwork on invoice creation and in
 * every invoice JSON, the refusal naming the networks that carry an asset, a bsc USDT invoice's
 * 18-decimal payment URI on chain 56, the currencies table of /openapi.json (what /docs renders),
 * and a sandbox invoice on EVERY pair GET /api/currencies lists, paid by simulation, arriving as a
 * signed invoice.paid webhook with its payNetwork (docs/networks.md).
 */
import { EVM_NETWORKS } from '@coinvoice/chains/evm/networks';
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { Webhook } from 'standardwebhooks';
import { CurrenciesSchema } from '../../gateway/src/schemas/currencies';
import { InvoicePaidWebhook } from '../../gateway/src/schemas/webhook-events';
import { markEmailVerified } from '../support/accounts';
import { launchBrowser } from '../support/browser';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { deleteStreams, Receiver, type ReceivedRequest } from './webhooks.support';

FormatRegistry.Set('uuid', (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v));
FormatRegistry.Set('date-time', (v) => !Number.isNaN(Date.parse(v)));

let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let merchant: MerchantFixture;
let sandbox: ProjectFixture;
let live: ProjectFixture;

beforeAll(async () => {
  receiver = await new Receiver().start();
  system = await bootSystem({ env: { WEBHOOK_RETRY_SCHEDULE: '200ms,300ms,300ms' } });
  api = new GatewayClient(system.gatewayUrl);
  merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  sandbox = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });
  live = await createProjectWithKey(api, merchant, 'live');
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
});

interface Listed {
  currency: string;
  network: string;
  name: string;
  networkLabel: string;
  decimals: number;
  baseUnitDecimals: number;
  confirmations: number;
  minimumAmount: number;
  contract: string | null;
  chainId: number | null;
  watched: boolean;
}

const invoiceBody = (extra: Record<string, unknown> = {}) => ({
  priceAmount: '25.00',
  priceCurrency: 'USD',
  payCurrency: 'BTC',
  successUrl: 'https://shop.example/thanks',
  cancelUrl: 'https://shop.example/cart',
  ...extra,
});

describe('GET /api/currencies', () => {
  test('lists every enabled (asset, network) with decimals, confirmations, minimum, contract and chain id, without a key', async () => {
    const res = await api.get<{ currencies: Listed[] }>('/api/currencies');
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^application\/json/);
    expect(Value.Check(CurrenciesSchema, res.body)).toBe(true);
    const pairs = res.body.currencies.map((c) => `${c.currency}@${c.network}`);
    // Assets in registry order, each asset's networks in registry order; USDC on Tron only where configured.
    expect(pairs).toEqual([
      'BTC@bitcoin', 'LTC@litecoin',
      'ETH@ethereum', 'ETH@base', 'ETH@arbitrum', 'ETH@optimism',
      'USDT@ethereum', 'USDT@arbitrum', 'USDT@optimism', 'USDT@polygon', 'USDT@bsc', 'USDT@tron',
      'USDC@ethereum', 'USDC@base', 'USDC@arbitrum', 'USDC@optimism', 'USDC@polygon', 'USDC@bsc',
      'TRX@tron', 'POL@polygon', 'BNB@bsc',
    ]);
    expect(res.body.currencies.find((c) => c.currency === 'USDT' && c.network === 'bsc')).toEqual({
      currency: 'USDT',
      network: 'bsc',
      name: 'Tether USD (BEP-20)',
      networkLabel: 'BNB Smart Chain',
      decimals: 6,
      baseUnitDecimals: 18,
      confirmations: EVM_NETWORKS.bsc.confirmations,
      minimumAmount: 0.000001,
      contract: '0x55d398326f99059fF775485246999027B3197955',
      chainId: 56,
      watched: false,
    });
    expect(res.body.currencies.find((c) => c.currency === 'USDT' && c.network === 'tron')).toMatchObject({ contract: 'TR7NHqjeKQxGTCi8q8ZY4pL8otSzgjLj6t', chainId: null, baseUnitDecimals: 6 });
    expect(res.body.currencies.find((c) => c.currency === 'BTC')).toMatchObject({ contract: null, chainId: null, decimals: 8 });
    // Exact numbers: written from the decimal digit for digit, never through a double's exponent form.
    expect(res.text).toContain('"currency":"ETH","network":"ethereum","name":"Ether","networkLabel":"Ethereum","decimals":8,"baseUnitDecimals":18,"confirmations":12,"minimumAmount":0.00000001,');
    expect(res.text).not.toMatch(/e-\d/);
  });

  test('is cacheable: Cache-Control public with a max-age, an ETag, and 304 for a current If-None-Match', async () => {
    const first = await api.get('/api/currencies');
    expect(first.headers.get('cache-control')).toBe('public, max-age=300');
    const etag = first.headers.get('etag');
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    const again = await api.get('/api/currencies');
    expect(again.headers.get('etag')).toBe(etag);
    const revalidated = await api.get('/api/currencies', { headers: { 'if-none-match': etag! } });
    expect(revalidated.status).toBe(304);
    expect(revalidated.text).toBe('');
    expect(revalidated.headers.get('etag')).toBe(etag);
    expect((await api.get('/api/currencies', { headers: { 'if-none-match': '"stale"' } })).status).toBe(200);
  });

  test('/openapi.json (what /docs renders) lists every pair with its contract and confirmations, from the same answer', async () => {
    const { body } = await api.get<{ currencies: Listed[] }>('/api/currencies');
    const doc = (await api.get('/openapi.json')).body as { info: { description: string }; paths: Record<string, unknown> };
    expect(doc.paths['/api/currencies']).toBeDefined();
    const table = doc.info.description.split('## Currencies and networks')[1] ?? '';
    for (const c of body.currencies) {
      const row = table.split('\n').find((line) => line.startsWith(`| ${c.currency} | \`${c.network}\` (${c.networkLabel}) |`));
      expect(row).toBeDefined();
      expect(row).toContain(c.contract ? `\`${c.contract}\`` : '| — |');
      expect(row).toContain(`| ${c.confirmations} |`);
    }
  });
});

test('/docs renders that table: every pair\'s contract is on the page', async () => {
  const { body } = await api.get<{ currencies: Listed[] }>('/api/currencies');
  const browser = await launchBrowser();
  try {
    const page = await (await browser.newContext({ viewport: { width: 1280, height: 800 } })).newPage();
    await page.goto(`${system.gatewayUrl}/docs`);
    await page.getByText('0x55d398326f99059fF775485246999027B3197955').first().waitFor({ timeout: 30_000 });
    const text = (await page.textContent('body')) ?? '';
    for (const c of body.currencies) if (c.contract) expect(text).toContain(c.contract);
    expect(text).toContain('BNB Smart Chain');
  } finally {
    await browser.close();
  }
}, 60_000);

describe('payNetwork on invoices', () => {
  test('created, read, listed and shown to the merchant with its payNetwork; absent it is the asset\'s default network', async () => {
    const created = await api.post('/api/invoice', invoiceBody({ payCurrency: 'USDC', payNetwork: 'base' }), { headers: apiKeyHeader(sandbox.key) });
    expect(created.status).toBe(201);
    expect(created.body).toMatchObject({ payCurrency: 'USDC', payNetwork: 'base', amountExpected: 25 });
    const id = created.body.id as string;
    expect((await api.get(`/api/invoice/${id}`, { headers: apiKeyHeader(sandbox.key) })).body.payNetwork).toBe('base');
    const list = await api.get(`/api/merchant/projects/${sandbox.id}/invoices`, { headers: bearer(merchant.token) });
    expect(list.body.items.find((i: { id: string }) => i.id === id)?.payNetwork).toBe('base');
    expect((await api.get(`/api/merchant/invoices/${id}`, { headers: bearer(merchant.token) })).body.payNetwork).toBe('base');
    const fallback = await api.post('/api/invoice', invoiceBody({ payCurrency: 'TRX' }), { headers: apiKeyHeader(sandbox.key) });
    expect(fallback.body.payNetwork).toBe('tron');
  });

  test('USDT on base is 400 validation_failed on payNetwork naming ethereum, arbitrum, optimism, polygon, bsc and tron', async () => {
    const res = await api.post('/api/invoice', invoiceBody({ payCurrency: 'USDT', payNetwork: 'base' }), { headers: apiKeyHeader(sandbox.key) });
    const problem = expectProblem(res, 400, 'validation_failed');
    expect(problem.errors).toEqual([{ field: 'payNetwork', message: 'base does not carry USDT; USDT is taken on: ethereum, arbitrum, optimism, polygon, bsc, tron' }]);
    // A payNetwork of the wrong type is refused with the other problems of the body, in one answer.
    const typed = expectProblem(await api.post('/api/invoice', invoiceBody({ payNetwork: 56, payCurrency: 'DOGE' }), { headers: apiKeyHeader(sandbox.key) }), 400);
    expect(typed.errors.map((e: { field: string }) => e.field).sort()).toEqual(['payCurrency', 'payNetwork']);
  });

  test('a live bsc USDT invoice priced 100.00 USD expects 100 USDT and its payment URI asks for 100·10^18 units on chain 56', async () => {
    const res = await api.post('/api/invoice', invoiceBody({ priceAmount: '100.00', payCurrency: 'USDT', payNetwork: 'bsc' }), { headers: apiKeyHeader(live.key) });
    expect(res.status).toBe(201);
    expect(res.body).toMatchObject({ payCurrency: 'USDT', payNetwork: 'bsc', amountExpected: 100, amountExpectedDecimal: '100', confirmationsRequired: EVM_NETWORKS.bsc.confirmations });
    const checkout = await api.get(`/api/checkout/${res.body.id}`);
    expect(checkout.body).toMatchObject({
      payNetwork: 'bsc',
      payNetworkLabel: 'BNB Smart Chain',
      tokenContract: '0x55d398326f99059fF775485246999027B3197955',
      paymentUri: `ethereum:0x55d398326f99059fF775485246999027B3197955@56/transfer?address=${res.body.address}&uint256=100000000000000000000`,
    });
  });
});

test('a sandbox invoice on every pair GET /api/currencies lists is paid by simulation and sends a signed invoice.paid with its payNetwork', async () => {
  const { body } = await api.get<{ currencies: Listed[] }>('/api/currencies');
  const invoices: Array<{ id: string; currency: string; network: string; address: string }> = [];
  for (const c of body.currencies) {
    const created = await api.post('/api/invoice', invoiceBody({ payCurrency: c.currency, payNetwork: c.network, orderId: `${c.currency}@${c.network}` }), {
      headers: apiKeyHeader(sandbox.key),
    });
    expect({ pair: `${c.currency}@${c.network}`, status: created.status }).toEqual({ pair: `${c.currency}@${c.network}`, status: 201 });
    expect(created.body).toMatchObject({ payCurrency: c.currency, payNetwork: c.network });
    const paid = await api.post(`/api/invoice/${created.body.id}/sandbox/pay`, {}, { headers: apiKeyHeader(sandbox.key) });
    expect(paid.body).toMatchObject({ status: 'Paid', payNetwork: c.network });
    invoices.push({ id: created.body.id, currency: c.currency, network: c.network, address: created.body.address });
  }
  // Addresses by key currency: EVM networks get EVM addresses, tron Tron ones, never one address twice.
  expect(new Set(invoices.map((i) => i.address)).size).toBe(invoices.length);

  const ids = new Set(invoices.map((i) => i.id));
  const isPaidOfOurs = (r: ReceivedRequest) => r.headers['webhook-event-type'] === 'invoice.paid' && ids.has((JSON.parse(r.body) as { invoiceId: string }).invoiceId);
  const received = await receiver.waitFor(invoices.length, 30_000, isPaidOfOurs);
  const wh = new Webhook(sandbox.webhookSecret);
  for (const invoice of invoices) {
    const req = received.find((r) => (JSON.parse(r.body) as { invoiceId: string }).invoiceId === invoice.id);
    if (!req) throw new Error(`no invoice.paid for ${invoice.currency}@${invoice.network}`);
    const signed = wh.verify(req.body, {
      'webhook-id': String(req.headers['webhook-id']),
      'webhook-timestamp': String(req.headers['webhook-timestamp']),
      'webhook-signature': String(req.headers['webhook-signature']),
    }) as Record<string, unknown>;
    expect(signed).toMatchObject({ invoiceId: invoice.id, status: 'Paid', currency: invoice.currency, environment: 'sandbox', payNetwork: invoice.network });
    expect(Object.keys(signed)).toEqual(['invoiceId', 'orderId', 'status', 'amount', 'currency', 'environment', 'amountDecimal', 'payNetwork', 'occurredAt']);
    expect(Value.Check(InvoicePaidWebhook, signed)).toBe(true);
  }
}, 120_000);
