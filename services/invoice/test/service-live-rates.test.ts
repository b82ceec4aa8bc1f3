/**
 * The invoice service priced from live quotes (RATES_SOURCE=live) served by Coinbase and Kraken
 * stand-ins: the exact amount for the median, the rate's sources and quote time stored with the
 * invoice, 503 rates_unavailable for a live invoice once no quote is fresh, and the sandbox still
 * priced from the static table.
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import { Code } from '@coinvoice/runtime';
import { createRequest, liveProject, rejection, sandboxProject, startInvoiceHarness, waitFor, type Harness } from './support/harness';
import { RateStandIn } from './support/rate-stand-ins';

const MAX_AGE_MS = 1_500;
let h: Harness;
let coinbase: RateStandIn;
let kraken: RateStandIn;

beforeAll(async () => {
  [coinbase, kraken] = await Promise.all([RateStandIn.start('coinbase'), RateStandIn.start('kraken')]);
  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  h = await startInvoiceHarness({
    env: {
      RATES_SOURCE: 'live',
      RATES_COINBASE_URL: coinbase.url,
      RATES_KRAKEN_URL: kraken.url,
      RATES_MAX_AGE_MS: String(MAX_AGE_MS),
      RATES_REFRESH_MS: '100',
      RATES_TIMEOUT_MS: '1000',
    },
  });
});

afterAll(async () => {
  await h?.dispose();
  await Promise.all([coinbase?.close(), kraken?.close()]);
});

async function storedRate(invoiceId: string) {
  const [row] = await h.sql<{ rate: string; rate_sources: string[]; rate_quoted_at: Date | null }[]>`
    select rate::text, rate_sources, rate_quoted_at from invoices where id = ${invoiceId}`;
  return row!;
}

test('Coinbase 100,000 and Kraken 100,200: a 100.00 USD live invoice expects 100 / 100,100 rounded up to 8 decimals', async () => {
  const project = liveProject();
  const invoice = await waitFor('a live invoice priced from both providers', async () => {
    const created = (await h.client.createInvoice(createRequest(project, { priceAmount: '100.00', priceCurrency: 'USD', payCurrency: 'BTC' }))).invoice!;
    return (await storedRate(created.id)).rate_sources.length === 2 ? created : undefined;
  }, 10_000);
  // 100 / 100100 = 0.000999000999…, rounded UP: the merchant never receives less than the price.
  expect(invoice.amountExpected).toBe('0.00099901');
  expect(invoice.rate).toBe('100100');
  const stored = await storedRate(invoice.id);
  expect(stored).toMatchObject({ rate: '100100', rate_sources: ['coinbase', 'kraken'] });
  expect(Date.now() - stored.rate_quoted_at!.getTime()).toBeLessThan(MAX_AGE_MS + 5_000);
});

test('one provider answering garbage: the other price is used', async () => {
  kraken.setPrices({ BTC: { raw: '-5' } });
  const project = liveProject();
  const invoice = await waitFor('a live invoice priced from Coinbase alone', async () => {
    const created = (await h.client.createInvoice(createRequest(project, { priceAmount: '100.00', priceCurrency: 'USD', payCurrency: 'BTC' }))).invoice!;
    return (await storedRate(created.id)).rate_sources.join() === 'coinbase' ? created : undefined;
  }, 10_000);
  expect(invoice.amountExpected).toBe('0.001');
  expect(invoice.rate).toBe('100000');
  kraken.setPrices({ BTC: '100200' });
});

test('both providers down longer than the max age: a live invoice answers 503 rates_unavailable; the sandbox uses the static table', async () => {
  // The BTC price in use now is no older than its quote time: it may not be refused before that plus the max age.
  const before = (await h.client.getRates({})).rates.find((r) => r.currency === 'BTC')!;
  const quotedAt = timestampDate(before.quotedAt!).getTime();
  coinbase.behaviour = { kind: 'status', status: 500 };
  kraken.behaviour = { kind: 'hang', ms: 10_000 };
  const down = Date.now();
  const failure = await waitFor('rates_unavailable', async () => {
    const facts = await h.client.createInvoice(createRequest(liveProject(), { priceAmount: '100.00' })).then(
      () => undefined,
      (err: unknown) => rejection(Promise.reject(err)),
    );
    return facts;
  }, 10_000);
  expect(Date.now()).toBeGreaterThanOrEqual(quotedAt + MAX_AGE_MS);
  expect(failure).toMatchObject({ connectCode: Code.Unavailable, code: 'rates_unavailable' });
  const [count] = await h.sql<{ n: number }[]>`select count(*)::int as n from invoices where environment = 'live' and created_at > ${new Date(down + MAX_AGE_MS)}`;
  expect(count!.n).toBe(0);

  const sandbox = (await h.client.createInvoice(createRequest(sandboxProject(), { priceAmount: '105.00', priceCurrency: 'USD', payCurrency: 'BTC' }))).invoice!;
  expect(sandbox.rate).toBe('105000');
  expect(sandbox.amountExpected).toBe('0.001');
  expect(await storedRate(sandbox.id)).toMatchObject({ rate_sources: ['static'], rate_quoted_at: new Date('2025-06-01T00:00:00Z') });

  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  await waitFor('live invoices again', async () =>
    h.client.createInvoice(createRequest(liveProject(), { priceAmount: '100.00' })).then(() => true, () => undefined), 10_000);
});
