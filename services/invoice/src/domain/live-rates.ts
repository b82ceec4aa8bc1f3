/**
 * Live rates (docs/architecture.md#rates), the pure part: reading the providers' answers (untrusted input) into
 * USD prices, and combining fresh quotes into one price per currency (median, outliers dropped).
 * Fetching and caching live in src/rates/.
 */
import { CRYPTO_CODES, type CryptoCode } from '@coinvoice/chains/coin';
import { FIAT_CODES, type FiatCode } from '@coinvoice/domain/fiat';
import { Decimal, Rounding } from '@coinvoice/domain/money';

export type RateSourceName = 'coinbase' | 'kraken';
export const RATE_SOURCES: readonly RateSourceName[] = ['coinbase', 'kraken'];
/** Every currency a live quote is needed for (USD is 1 by definition). */
export type QuotedCode = CryptoCode | Exclude<FiatCode, 'USD'>;
export const QUOTED_CODES: readonly QuotedCode[] = [...CRYPTO_CODES, ...FIAT_CODES.filter((c): c is Exclude<FiatCode, 'USD'> => c !== 'USD')];

/** Prices inverted from "units per USD" keep this many significant digits, cut down (more coin expected, never less). */
const INVERTED_SIGNIFICANT_DIGITS = 12;
/** A provider number: digits with an optional fraction; no sign, exponent or spaces; bounded length. */
const PROVIDER_NUMBER = /^\d{1,20}(\.\d{1,40})?$/;

/** What one provider said in one answer: a USD price per currency it quoted sensibly, and what it got wrong. */
export interface ProviderPrices {
  readonly prices: ReadonlyMap<QuotedCode, Decimal>;
  /** One line per refused entry (missing pair, zero, negative, not a number), for the log. */
  readonly problems: readonly string[];
}

function providerNumber(value: unknown): Decimal | string {
  if (typeof value !== 'string') return `is ${value === undefined ? 'missing' : `not a decimal string (${typeof value})`}`;
  if (!PROVIDER_NUMBER.test(value)) return `is not a plain positive decimal (${JSON.stringify(value.slice(0, 40))})`;
  const number = new Decimal(value);
  return number.gt(0) ? number : 'is zero';
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Coinbase `GET /v2/exchange-rates?currency=USD`: `{"data": {"currency": "USD", "rates": {"BTC":
 * "0.00001", "EUR": "0.92", …}}}`, each rate in units of the currency per ONE USD.
 */
export function parseCoinbaseRates(body: unknown): ProviderPrices {
  const data = isRecord(body) ? body.data : undefined;
  if (!isRecord(data) || data.currency !== 'USD' || !isRecord(data.rates)) {
    return { prices: new Map(), problems: ['answer is not {"data": {"currency": "USD", "rates": {…}}}'] };
  }
  const rates = data.rates;
  const prices = new Map<QuotedCode, Decimal>();
  const problems: string[] = [];
  for (const code of QUOTED_CODES) {
    const perUsd = providerNumber(Object.hasOwn(rates, code) ? rates[code] : undefined);
    if (typeof perUsd === 'string') problems.push(`${code} ${perUsd}`);
    else prices.set(code, new Decimal(1).div(perUsd).toSignificantDigits(INVERTED_SIGNIFICANT_DIGITS, Rounding.down));
  }
  return { prices, problems };
}

/**
 * Kraken pairs per currency: the query name, the names the answer may key it by (canonical and
 * alternative), and whether the pair is quoted the other way round (USD per unit vs units per USD).
 */
export const KRAKEN_PAIRS: Readonly<Record<QuotedCode, { pair: string; keys: readonly string[]; inverted: boolean }>> = {
  BTC: { pair: 'XBTUSD', keys: ['XXBTZUSD', 'XBTUSD'], inverted: false },
  LTC: { pair: 'LTCUSD', keys: ['XLTCZUSD', 'LTCUSD'], inverted: false },
  ETH: { pair: 'ETHUSD', keys: ['XETHZUSD', 'ETHUSD'], inverted: false },
  USDT: { pair: 'USDTUSD', keys: ['USDTZUSD', 'USDTUSD'], inverted: false },
  USDC: { pair: 'USDCUSD', keys: ['USDCUSD'], inverted: false },
  TRX: { pair: 'TRXUSD', keys: ['TRXUSD'], inverted: false },
  POL: { pair: 'POLUSD', keys: ['POLUSD'], inverted: false },
  BNB: { pair: 'BNBUSD', keys: ['BNBUSD'], inverted: false },
  EUR: { pair: 'EURUSD', keys: ['ZEURZUSD', 'EURUSD'], inverted: false },
  GBP: { pair: 'GBPUSD', keys: ['ZGBPZUSD', 'GBPUSD'], inverted: false },
  AUD: { pair: 'AUDUSD', keys: ['ZAUDZUSD', 'AUDUSD'], inverted: false },
  JPY: { pair: 'USDJPY', keys: ['ZUSDZJPY', 'USDJPY'], inverted: true },
  CAD: { pair: 'USDCAD', keys: ['ZUSDZCAD', 'USDCAD'], inverted: true },
  CHF: { pair: 'USDCHF', keys: ['USDCHF', 'ZUSDZCHF'], inverted: true },
};

/** `pair=` of Kraken's Ticker request for every quoted currency. */
export function krakenTickerPairs(): string {
  return QUOTED_CODES.map((code) => KRAKEN_PAIRS[code].pair).join(',');
}

/**
 * Kraken `GET /0/public/Ticker?pair=…`: `{"error": [], "result": {"XXBTZUSD": {"c": ["100200.0",
 * "0.01"], "a": […], "b": […], …}}}`; the price is `c[0]`, the last trade.
 */
export function parseKrakenTicker(body: unknown): ProviderPrices {
  if (!isRecord(body) || !isRecord(body.result)) {
    const errors = isRecord(body) && Array.isArray(body.error) ? body.error.filter((e) => typeof e === 'string').join('; ') : '';
    return { prices: new Map(), problems: [`answer has no "result"${errors ? `: ${errors.slice(0, 200)}` : ''}`] };
  }
  const result = body.result;
  const prices = new Map<QuotedCode, Decimal>();
  const problems: string[] = [];
  for (const code of QUOTED_CODES) {
    const { pair, keys, inverted } = KRAKEN_PAIRS[code];
    const key = keys.find((k) => Object.hasOwn(result, k));
    const ticker = key === undefined ? undefined : result[key];
    const last = isRecord(ticker) && Array.isArray(ticker.c) ? ticker.c[0] : undefined;
    const price = providerNumber(last);
    if (typeof price === 'string') problems.push(`${code} (${pair}) ${key === undefined ? 'is missing' : price}`);
    else prices.set(code, inverted ? new Decimal(1).div(price).toSignificantDigits(INVERTED_SIGNIFICANT_DIGITS, Rounding.down) : price);
  }
  return { prices, problems };
}

/** One provider's latest successful answer. */
export interface ProviderSnapshot {
  readonly source: RateSourceName;
  /** When the provider was asked for this answer (its age counts from then, not from its arrival). */
  readonly fetchedAt: Date;
  readonly prices: ReadonlyMap<QuotedCode, Decimal>;
}

/** The price of one currency in USD as used for invoices. */
export interface CombinedPrice {
  readonly usd: Decimal;
  /** Providers whose quotes made the price. */
  readonly sources: readonly RateSourceName[];
  /** The oldest of those quotes' times: the price is no younger than this. */
  readonly quotedAt: Date;
}

export interface DroppedQuote {
  readonly code: QuotedCode;
  readonly source: RateSourceName;
  readonly usd: Decimal;
  readonly reference: Decimal;
}

/**
 * A quote further than this from the reference is an outlier. Exchanges agree within a fraction of
 * a percent; 10% is far outside normal spread and well inside a broken feed's error.
 */
export const OUTLIER_DEVIATION = new Decimal('0.10');

export function median(values: readonly Decimal[]): Decimal {
  if (values.length === 0) throw new RangeError('median of nothing');
  const sorted = [...values].sort((a, b) => a.comparedTo(b));
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : sorted[mid - 1]!.plus(sorted[mid]!).div(2);
}

/** Every value within OUTLIER_DEVIATION of every other. */
function agree(values: readonly Decimal[]): boolean {
  const low = Decimal.min(...values);
  return deviation(Decimal.max(...values), low).lte(OUTLIER_DEVIATION);
}

function deviation(value: Decimal, reference: Decimal): Decimal {
  return value.minus(reference).abs().div(reference);
}

/**
 * The price of each currency from the snapshots younger than `maxAgeMs`: the median of the fresh
 * quotes that are not outliers. The reference an outlier is judged against is the median of the
 * fresh quotes when there are three or more, else the price accepted last time (`previous`, which the
 * caller passes only while it is younger than the max age; quotes that all leave it together mean
 * the market moved and are kept); two
 * quotes that disagree with no previous price to decide between them give no price at all (never
 * guess which feed is broken). Pure: the caller keeps `previous` and logs `dropped`.
 */
export function combineQuotes(
  snapshots: readonly ProviderSnapshot[],
  options: { now: Date; maxAgeMs: number; previous: ReadonlyMap<QuotedCode, Decimal> },
): { prices: Map<QuotedCode, CombinedPrice>; dropped: DroppedQuote[] } {
  const fresh = snapshots.filter((s) => options.now.getTime() - s.fetchedAt.getTime() <= options.maxAgeMs);
  const prices = new Map<QuotedCode, CombinedPrice>();
  const dropped: DroppedQuote[] = [];
  for (const code of QUOTED_CODES) {
    const quotes = fresh.flatMap((s) => {
      const usd = s.prices.get(code);
      return usd ? [{ source: s.source, fetchedAt: s.fetchedAt, usd }] : [];
    });
    if (quotes.length === 0) continue;
    const reference = quotes.length >= 3 ? median(quotes.map((q) => q.usd)) : options.previous.get(code);
    let kept = quotes;
    if (reference) {
      const outliers = quotes.filter((q) => deviation(q.usd, reference).gt(OUTLIER_DEVIATION));
      // Every quote far from the last price, but all agreeing with each other: the market moved.
      const marketMoved = outliers.length === quotes.length && quotes.length >= 2 && agree(quotes.map((q) => q.usd));
      if (!marketMoved) {
        for (const q of outliers) dropped.push({ code, source: q.source, usd: q.usd, reference });
        kept = quotes.filter((q) => !outliers.includes(q));
      }
    } else if (quotes.length === 2 && deviation(quotes[0]!.usd, quotes[1]!.usd).gt(OUTLIER_DEVIATION)) {
      for (const [q, other] of [[quotes[0]!, quotes[1]!], [quotes[1]!, quotes[0]!]] as const) {
        dropped.push({ code, source: q.source, usd: q.usd, reference: other.usd });
      }
      kept = [];
    }
    if (kept.length === 0) continue;
    prices.set(code, {
      usd: median(kept.map((q) => q.usd)),
      sources: kept.map((q) => q.source),
      quotedAt: new Date(Math.min(...kept.map((q) => q.fetchedAt.getTime()))),
    });
  }
  return { prices, dropped };
}
