/**
 * A replica that starts with RATES_SOURCE=live asks each provider once before it serves (bounded
 * by RATES_TIMEOUT_MS): the first live invoice after start is priced, not refused with 503 while
 * the first quotes are on the way; with every provider down it still starts (within the timeout),
 * refusing live invoices with 503 rates_unavailable and pricing sandbox ones from the table.
 */
import { Code } from '@coinvoice/runtime';
import { createRequest, liveProject, rejection, sandboxProject, startInvoiceHarness, type Harness } from './support/harness';
import { RateStandIn } from './support/rate-stand-ins';

let coinbase: RateStandIn;
let kraken: RateStandIn;
const harnesses: Harness[] = [];

beforeAll(async () => {
  [coinbase, kraken] = await Promise.all([RateStandIn.start('coinbase'), RateStandIn.start('kraken')]);
});

afterAll(async () => {
  await Promise.all(harnesses.map((h) => h.dispose()));
  await Promise.all([coinbase?.close(), kraken?.close()]);
});

async function start(): Promise<{ h: Harness; startedInMs: number }> {
  const began = Date.now();
  const h = await startInvoiceHarness({
    env: {
      RATES_SOURCE: 'live',
      RATES_COINBASE_URL: coinbase.url,
      RATES_KRAKEN_URL: kraken.url,
      RATES_MAX_AGE_MS: '120000',
      RATES_REFRESH_MS: '60000', // no second round during the test: only the first one counts
      RATES_TIMEOUT_MS: '2000',
    },
  });
  harnesses.push(h);
  return { h, startedInMs: Date.now() - began };
}

test('slow providers (0.8 s): the first live invoice after start is priced from both', async () => {
  coinbase.behaviour = { kind: 'hang', ms: 800 };
  kraken.behaviour = { kind: 'hang', ms: 800 };
  const { h } = await start();
  const { invoice } = await h.client.createInvoice(createRequest(liveProject(), { priceAmount: '100.00', priceCurrency: 'USD', payCurrency: 'BTC' }));
  const [row] = await h.sql<{ rate_sources: string[] }[]>`select rate_sources from invoices where id = ${invoice!.id}`;
  expect(row!.rate_sources).toEqual(['coinbase', 'kraken']);
});

test('every provider down: it starts within the timeout; live invoices 503 rates_unavailable, sandbox ones priced', async () => {
  coinbase.behaviour = { kind: 'status', status: 503 };
  kraken.behaviour = { kind: 'hang', ms: 30_000 };
  const { h, startedInMs } = await start();
  expect(startedInMs).toBeLessThan(15_000);
  const refused = await rejection(h.client.createInvoice(createRequest(liveProject(), { priceAmount: '100.00', priceCurrency: 'USD', payCurrency: 'BTC' })));
  expect(refused).toMatchObject({ connectCode: Code.Unavailable, code: 'rates_unavailable' });
  const { invoice } = await h.client.createInvoice(createRequest(sandboxProject(), { priceAmount: '105.00', priceCurrency: 'USD', payCurrency: 'BTC' }));
  expect(invoice!.amountExpected).toBe('0.001');
}, 30_000);
