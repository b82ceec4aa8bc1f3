/**
 * Live rates through the gateway: public GET /api/rates shows the median quotes and their age;
 * with both providers down longer than RATES_MAX_AGE_MS a live invoice answers 503
 * rates_unavailable (problem+json) while a sandbox invoice is priced from the static table.
 * Coinbase and Kraken are local stand-ins serving their real JSON shapes.
 */
import { markEmailVerified } from '../support/accounts';
import { RateStandIn } from '../../services/invoice/test/support/rate-stand-ins';
import { waitFor } from '../support/async';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';

let system: BootedSystem;
let api: GatewayClient;
let coinbase: RateStandIn;
let kraken: RateStandIn;

beforeAll(async () => {
  [coinbase, kraken] = await Promise.all([RateStandIn.start('coinbase'), RateStandIn.start('kraken')]);
  coinbase.setPrices({ BTC: '100000', POL: '0.2', BNB: '620' });
  kraken.setPrices({ BTC: '100200', POL: '0.22', BNB: '640' });
  system = await bootSystem({
    env: {
      RATES_SOURCE: 'live',
      RATES_COINBASE_URL: coinbase.url,
      RATES_KRAKEN_URL: kraken.url,
      RATES_MAX_AGE_MS: '2000',
      RATES_REFRESH_MS: '200',
      RATES_TIMEOUT_MS: '1000',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  await Promise.all([coinbase?.close(), kraken?.close()]);
});

const invoiceBody = { priceAmount: '100.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/thanks', cancelUrl: 'https://shop.example/cart' };

test('GET /api/rates (no key) shows the median of both providers and how old it is', async () => {
  const res = await waitFor('BTC from both providers', async () => {
    const r = await api.get('/api/rates');
    const btc = r.body?.rates?.find((q: { currency: string }) => q.currency === 'BTC');
    return btc?.sources?.length === 2 ? r : undefined;
  });
  expect(res.status).toBe(200);
  expect(res.body).toMatchObject({ source: 'live', maxAgeMs: 2000 });
  const btc = res.body.rates.find((q: { currency: string }) => q.currency === 'BTC');
  expect(btc).toMatchObject({ usd: 100100, sources: ['coinbase', 'kraken'] });
  expect(btc.ageMs).toBeLessThanOrEqual(2000);
  expect(res.body.providers).toEqual([
    expect.objectContaining({ name: 'coinbase', healthy: true }),
    expect.objectContaining({ name: 'kraken', healthy: true }),
  ]);
});

test('POL and BNB are quoted live by both providers (Kraken POLUSD/BNBUSD), and live invoices in them are priced at the median', async () => {
  const res = await waitFor('POL and BNB from both providers', async () => {
    const r = await api.get('/api/rates');
    const quoted = (code: string) => r.body?.rates?.find((q: { currency: string }) => q.currency === code)?.sources?.length === 2;
    return quoted('POL') && quoted('BNB') ? r : undefined;
  });
  const rate = (code: string) => res.body.rates.find((q: { currency: string }) => q.currency === code);
  expect(rate('POL')).toMatchObject({ usd: 0.21, sources: ['coinbase', 'kraken'] });
  expect(rate('BNB')).toMatchObject({ usd: 630, sources: ['coinbase', 'kraken'] });

  const merchant = await registerMerchant(api);
  await markEmailVerified(system, merchant.merchantId);
  const live = await createProjectWithKey(api, merchant, 'live');
  const bnb = await api.post('/api/invoice', { ...invoiceBody, payCurrency: 'BNB' }, { headers: apiKeyHeader(live.key) });
  expect(bnb.status).toBe(201);
  // 100 / 630 rounded up to 8 decimals; BNB is paid on bsc by default.
  expect(bnb.body).toMatchObject({ payCurrency: 'BNB', payNetwork: 'bsc', amountExpected: 0.15873016 });
  const pol = await api.post('/api/invoice', { ...invoiceBody, payCurrency: 'POL', payNetwork: 'polygon' }, { headers: apiKeyHeader(live.key) });
  expect(pol.status).toBe(201);
  expect(pol.body).toMatchObject({ payCurrency: 'POL', payNetwork: 'polygon', amountExpected: 476.19047620 });
});

test('both providers down: a live invoice answers 503 rates_unavailable, a sandbox invoice uses the static table', async () => {
  const merchant = await registerMerchant(api);
  // Live keys need a verified email (issue 12); the emailed-code flow has its own tests.
  await markEmailVerified(system, merchant.merchantId);
  const [live, sandbox] = [await createProjectWithKey(api, merchant, 'live'), await createProjectWithKey(api, merchant, 'sandbox')];
  const first = await api.post('/api/invoice', invoiceBody, { headers: apiKeyHeader(live.key) });
  expect(first.status).toBe(201);
  expect(first.body.amountExpected).toBe(0.00099901);
  // The merchant sees how it was priced (the dashboard's invoice page); the public invoice does not.
  expect(first.body.pricing).toBeUndefined();
  const seen = await api.get(`/api/merchant/invoices/${first.body.id}`, { headers: bearer(merchant.token) });
  expect(seen.body.pricing).toEqual({ rate: 100100, rateSources: ['coinbase', 'kraken'], rateQuotedAt: expect.any(String) });
  const quoteAge = new Date(first.body.createdAt).getTime() - new Date(seen.body.pricing.rateQuotedAt).getTime();
  expect(quoteAge).toBeGreaterThanOrEqual(0);
  expect(quoteAge).toBeLessThanOrEqual(2000); // RATES_MAX_AGE_MS: never a staler quote

  coinbase.behaviour = { kind: 'status', status: 503 };
  kraken.behaviour = { kind: 'hang', ms: 10_000 };
  const refused = await waitFor('503', async () => {
    const r = await api.post('/api/invoice', invoiceBody, { headers: apiKeyHeader(live.key) });
    return r.status === 503 ? r : undefined;
  });
  expectProblem(refused, 503, 'rates_unavailable');
  const rates = await api.get('/api/rates');
  expect(rates.body.rates).toEqual([]);
  expect(rates.body.providers.map((p: { healthy: boolean }) => p.healthy)).toEqual([false, false]);

  const sandboxInvoice = await api.post('/api/invoice', { ...invoiceBody, priceAmount: '105.00' }, { headers: apiKeyHeader(sandbox.key) });
  expect(sandboxInvoice.status).toBe(201);
  // 105 / 105,000 (the static table); at the live 100,100 it would be 0.00104896.
  expect(sandboxInvoice.body.amountExpected).toBe(0.001);
  const sandboxSeen = await api.get(`/api/merchant/invoices/${sandboxInvoice.body.id}`, { headers: bearer(merchant.token) });
  expect(sandboxSeen.body.pricing).toMatchObject({ rate: 105000, rateSources: ['static'] });
  coinbase.setPrices({ BTC: '100000', POL: '0.2', BNB: '620' });
  kraken.setPrices({ BTC: '100200', POL: '0.22', BNB: '640' });
});
