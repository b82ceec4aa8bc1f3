/**
 * The rate providers' public HTTP APIs (docs/architecture.md#rates). Answers are untrusted: they are parsed by
 * the pure readers in domain/live-rates.ts; a slow provider is cut off after `timeoutMs`.
 */
import { krakenTickerPairs, parseCoinbaseRates, parseKrakenTicker, type ProviderPrices, type RateSourceName } from '../domain/live-rates';

/** One provider: asks it once for every quoted currency. Throws when it cannot be asked or read. */
export interface RateFeed {
  readonly source: RateSourceName;
  /** `stop` aborts an answer in flight (the service is stopping). */
  fetchPrices(stop?: AbortSignal): Promise<ProviderPrices>;
}

/** Larger answers are refused: Coinbase's full table is ~20 kB. */
const MAX_ANSWER_BYTES = 1_000_000;

async function getJson(url: URL, timeoutMs: number, stop: AbortSignal | undefined): Promise<unknown> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const signal = stop ? AbortSignal.any([timeout, stop]) : timeout;
  const response = await fetch(url, { signal, headers: { accept: 'application/json' } });
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`HTTP ${response.status} from ${url.origin}${url.pathname}`);
  }
  const declared = Number(response.headers.get('content-length') ?? '0');
  if (declared > MAX_ANSWER_BYTES) {
    await response.body?.cancel();
    throw new Error(`answer of ${declared} bytes is too large`);
  }
  const text = await response.text();
  if (text.length > MAX_ANSWER_BYTES) throw new Error(`answer of ${text.length} characters is too large`);
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new Error('answer is not JSON');
  }
}

function endpoint(baseUrl: string, path: string): URL {
  return new URL(path, baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
}

export class CoinbaseFeed implements RateFeed {
  readonly source = 'coinbase' as const;
  constructor(private readonly options: { baseUrl: string; timeoutMs: number }) {}

  async fetchPrices(stop?: AbortSignal): Promise<ProviderPrices> {
    const url = endpoint(this.options.baseUrl, 'v2/exchange-rates');
    url.searchParams.set('currency', 'USD');
    return parseCoinbaseRates(await getJson(url, this.options.timeoutMs, stop));
  }
}

export class KrakenFeed implements RateFeed {
  readonly source = 'kraken' as const;
  constructor(private readonly options: { baseUrl: string; timeoutMs: number }) {}

  async fetchPrices(stop?: AbortSignal): Promise<ProviderPrices> {
    const url = endpoint(this.options.baseUrl, '0/public/Ticker');
    url.searchParams.set('pair', krakenTickerPairs());
    return parseKrakenTicker(await getJson(url, this.options.timeoutMs, stop));
  }
}
