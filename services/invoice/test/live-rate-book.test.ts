/**
 * Live rates against local stand-ins of Coinbase and Kraken in their real JSON shapes
 * (docs/architecture.md#rates): the median of fresh quotes; every kind of bad answer (missing pair, zero, negative, a
 * string that is not a number, a 50% outlier, a 10 s hang, HTTP errors) leaves the other
 * provider's price in use, or no price at all once nothing fresh is left.
 */
import { Writable } from 'node:stream';
import pino from 'pino';
import { Decimal } from '@coinvoice/domain/money';
import { CoinbaseFeed, KrakenFeed } from '../src/rates/feeds';
import { LiveRateBook } from '../src/rates/live-rate-book';
import { InvoicePricing } from '../src/rates/pricing';
import { StaticRateProvider } from '../src/domain/rates';
import { RateStandIn } from './support/rate-stand-ins';
import { waitFor } from './support/harness';

const MAX_AGE_MS = 1_500;
let coinbase: RateStandIn;
let kraken: RateStandIn;
let book: LiveRateBook;
const logLines: Array<Record<string, unknown>> = [];

function logged(fragment: string): Array<Record<string, unknown>> {
  return logLines.filter((line) => String(line.msg).includes(fragment));
}

beforeAll(async () => {
  [coinbase, kraken] = await Promise.all([RateStandIn.start('coinbase'), RateStandIn.start('kraken')]);
  const sink = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) logLines.push(JSON.parse(line) as Record<string, unknown>);
      done();
    },
  });
  book = new LiveRateBook({
    feeds: [new CoinbaseFeed({ baseUrl: coinbase.url, timeoutMs: 1_000 }), new KrakenFeed({ baseUrl: kraken.url, timeoutMs: 1_000 })],
    refreshMs: 100,
    maxAgeMs: MAX_AGE_MS,
    logger: pino({ level: 'warn' }, sink),
  });
  book.start();
});

afterAll(async () => {
  await book.stop();
  await Promise.all([coinbase.close(), kraken.close()]);
});

/** Waits until BTC is priced from exactly `sources` at `usd`. */
async function btcPricedAt(usd: string, sources: string[]) {
  return waitFor(`BTC at ${usd} from ${sources.join('+')}`, async () => {
    const price = book.price('BTC');
    return price && price.usd.eq(usd) && price.sources.join(',') === sources.join(',') ? price : undefined;
  }, 10_000);
}

test('the median of both providers: Coinbase 100,000 and Kraken 100,200 give 100,100, with the time of the older quote', async () => {
  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  const price = await btcPricedAt('100100', ['coinbase', 'kraken']);
  expect(Date.now() - price.quotedAt.getTime()).toBeLessThanOrEqual(MAX_AGE_MS);
  // Fiat from the same quotes: EUR 1.1 USD on both (Coinbase's inverse is cut down at 12 digits).
  expect(book.price('EUR')!.usd.minus('1.1').abs().lt('1e-9')).toBe(true);
  expect(book.price('EUR')!.usd.lte('1.1')).toBe(true);
  const pricing = new InvoicePricing({ source: 'live', table: new StaticRateProvider(), live: book });
  const rates = pricing.ratesFor('live', 'BTC', 'USD')!;
  expect(rates.coinUsd.toString()).toBe('100100');
  expect(rates.sources).toEqual(['coinbase', 'kraken']);
});

test.each([
  ['a missing pair', undefined],
  ['a zero', '0'],
  ['a negative price', '-100200'],
  ['a string that is not a number', 'NaN'],
  ['a number where a string belongs', 100200],
  ['null', null],
])('Kraken answering %s for BTC: its BTC entry is refused and logged, Coinbase alone prices BTC', async (_name, bad) => {
  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  await btcPricedAt('100100', ['coinbase', 'kraken']);
  const before = logged('unusable entries').length;
  kraken.setPrices({ BTC: bad === undefined ? { raw: undefined } : { raw: bad } });
  await btcPricedAt('100000', ['coinbase']);
  const warning = logged('unusable entries').slice(before).find((line) => (line.source as string) === 'kraken');
  expect(warning?.problems).toEqual([expect.stringMatching(/^BTC \(XBTUSD\) /)]);
  // Kraken's other pairs are still used.
  expect(book.price('ETH')?.sources).toEqual(['coinbase', 'kraken']);
});

test('Coinbase answering garbage for BTC (negative, not a number): Kraken prices BTC', async () => {
  kraken.setPrices({ BTC: '100200' });
  for (const raw of ['-0.00001', '1e-5', 'abc', '']) {
    coinbase.setPrices({ BTC: { raw } });
    await btcPricedAt('100200', ['kraken']);
    coinbase.setPrices({ BTC: '100000' });
    await btcPricedAt('100100', ['coinbase', 'kraken']);
  }
});

test('a provider 50% away from the other is an outlier: dropped and logged, the other price used', async () => {
  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  await btcPricedAt('100100', ['coinbase', 'kraken']);
  kraken.setPrices({ BTC: '150300' });
  await btcPricedAt('100000', ['coinbase']);
  const drop = logged('rate outlier dropped').find((line) => line.source === 'kraken' && line.code === 'BTC');
  expect(drop).toMatchObject({ usd: '150300' });
  // Kraken's return to a sane price is used again.
  kraken.setPrices({ BTC: '100200' });
  await btcPricedAt('100100', ['coinbase', 'kraken']);
});

test('a 10 s hang of one provider: cut off, its quotes age out, the other is used; reading a price never waits', async () => {
  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  await btcPricedAt('100100', ['coinbase', 'kraken']);
  kraken.behaviour = { kind: 'hang', ms: 10_000 };
  const hangStarted = Date.now();
  await btcPricedAt('100000', ['coinbase']);
  // Priced from Coinbase alone once Kraken's last quote is older than the max age, long before its 10 s answer.
  expect(Date.now() - hangStarted).toBeLessThan(5_000);
  const started = process.hrtime.bigint();
  for (let i = 0; i < 1_000; i += 1) book.price('BTC');
  expect(Number(process.hrtime.bigint() - started) / 1e6).toBeLessThan(200); // 1,000 reads, no I/O
  await waitFor('the timeout logged', async () => logged('rate provider failed').some((l) => l.source === 'kraken' && /aborted|timeout/i.test(String(l.err))), 5_000);
  kraken.setPrices({ BTC: '100200' });
  await btcPricedAt('100100', ['coinbase', 'kraken']);
});

test('both providers down for longer than the max age: no price at all (never a stale one); back when they answer', async () => {
  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  await btcPricedAt('100100', ['coinbase', 'kraken']);
  coinbase.behaviour = { kind: 'status', status: 503 };
  kraken.behaviour = { kind: 'status', status: 502 };
  // The last answers before the outage are at most this old: the price lasts until they age out.
  const lastQuote = Math.max(...book.providers().map((p) => p.fetchedAt!.getTime()));
  await waitFor('no BTC price', async () => book.price('BTC') === undefined, 10_000);
  expect(Date.now()).toBeGreaterThan(lastQuote + MAX_AGE_MS);
  const pricing = new InvoicePricing({ source: 'live', table: new StaticRateProvider(), live: book });
  expect(pricing.ratesFor('live', 'BTC', 'EUR')).toBeUndefined();
  // The sandbox falls back to the static table.
  expect(pricing.ratesFor('sandbox', 'BTC', 'USD')).toMatchObject({ sources: ['static'], coinUsd: new Decimal('105000') });
  expect(book.providers().map((p) => p.lastError)).toEqual([expect.stringContaining('503'), expect.stringContaining('502')]);
  coinbase.setPrices({ BTC: '100000' });
  kraken.setPrices({ BTC: '100200' });
  await btcPricedAt('100100', ['coinbase', 'kraken']);
});

test('a quote is as old as its question: an answer that took 0.8 s is 0.8 s old when it arrives', async () => {
  let clock = new Date('2026-01-01T00:00:00Z').getTime();
  const slowFeed = {
    source: 'coinbase' as const,
    async fetchPrices() {
      clock += 800; // the answer arrives 0.8 s after the question
      return { prices: new Map([['BTC' as const, new Decimal('100000')]]), problems: [] };
    },
  };
  const slowBook = new LiveRateBook({ feeds: [slowFeed], refreshMs: 60_000, maxAgeMs: 1_000, logger: pino({ level: 'silent' }), now: () => new Date(clock) });
  await slowBook.refresh(slowFeed);
  const price = slowBook.price('BTC')!;
  expect(price.quotedAt.toISOString()).toBe('2026-01-01T00:00:00.000Z');
  clock += 201; // 1.001 s after the question, 0.201 s after the answer: too old
  expect(slowBook.price('BTC')).toBeUndefined();
});
