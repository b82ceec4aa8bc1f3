/**
 * Which rates an invoice is priced at (docs/architecture.md#rates): with RATES_SOURCE=live, live invoices only
 * from fresh live quotes (none: undefined, and the caller answers 503 rates_unavailable — never a
 * stale price); sandbox invoices from live quotes when there are any, else the static table. With
 * RATES_SOURCE=static, every invoice from the static table.
 */
import type { CombinedPrice } from '../domain/live-rates';
import { type QuoteRates, type StaticRateProvider } from '../domain/rates';
import type { CryptoCode } from '@coinvoice/chains/coin';
import { isCryptoCode } from '@coinvoice/chains/currencies';
import type { FiatCode } from '@coinvoice/domain/fiat';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';
import { Decimal } from '@coinvoice/domain/money';
import { QUOTED_CODES, type RateSourceName } from '../domain/live-rates';
import type { LiveRateBook } from './live-rate-book';

/** What GET /api/rates shows. */
export interface RatesOverview {
  source: RatesSource;
  prices: Array<{ currency: string; usd: Decimal; sources: readonly string[]; quotedAt: Date | null }>;
  providers: Array<{ name: RateSourceName; fetchedAt: Date | undefined; healthy: boolean }>;
}

export type RatesSource = 'live' | 'static';
export const RATES_SOURCES: readonly RatesSource[] = ['live', 'static'];

/** The rates of one invoice and where they came from, stored with it. */
export interface PricedRates extends QuoteRates {
  /** Providers whose quotes made the price ("coinbase", "kraken") or "static". */
  readonly sources: readonly string[];
  /** The oldest quote used; for the static table its asOf (when it has one). */
  readonly quotedAt: Date | null;
}

export class InvoicePricing {
  constructor(
    private readonly options: { source: RatesSource; table: StaticRateProvider; live?: LiveRateBook },
  ) {
    if (options.source === 'live' && !options.live) throw new Error('RATES_SOURCE=live needs a live rate book');
  }

  get source(): RatesSource {
    return this.options.source;
  }

  ratesFor(environment: ProjectEnvironment, payCurrency: CryptoCode, priceCurrency: FiatCode): PricedRates | undefined {
    if (this.options.source === 'live' && this.options.live) {
      const live = liveRates(this.options.live, payCurrency, priceCurrency);
      if (live || environment === 'live') return live;
    }
    return this.staticRates(payCurrency, priceCurrency);
  }

  /** The prices live invoices are created at now (cached; nothing is fetched). */
  overview(): RatesOverview {
    const { source, table, live } = this.options;
    if (source === 'live' && live) {
      return {
        source,
        prices: QUOTED_CODES.flatMap((currency) => {
          const price = live.price(currency);
          return price ? [{ currency, usd: price.usd, sources: price.sources, quotedAt: price.quotedAt }] : [];
        }),
        providers: live.providers().map((p) => ({ name: p.source, fetchedAt: p.fetchedAt, healthy: p.fetchedAt !== undefined && p.lastError === undefined })),
      };
    }
    const asOf = table.table.asOf === undefined ? null : new Date(table.table.asOf);
    return {
      source,
      prices: QUOTED_CODES.map((currency) => ({
        currency,
        usd: isCryptoCode(currency) ? table.rateNow(currency, 'USD') : table.usdRateNow(currency),
        sources: ['static'],
        quotedAt: asOf,
      })),
      providers: [],
    };
  }

  private staticRates(payCurrency: CryptoCode, priceCurrency: FiatCode): PricedRates {
    const { table } = this.options;
    const asOf = table.table.asOf;
    return {
      coinUsd: table.rateNow(payCurrency, 'USD'),
      usdRate: table.usdRateNow(priceCurrency),
      sources: ['static'],
      quotedAt: asOf === undefined ? null : new Date(asOf),
    };
  }
}

function liveRates(book: LiveRateBook, payCurrency: CryptoCode, priceCurrency: FiatCode): PricedRates | undefined {
  const coin = book.price(payCurrency);
  const fiat: CombinedPrice | 'usd' | undefined = priceCurrency === 'USD' ? 'usd' : book.price(priceCurrency);
  if (!coin || !fiat) return undefined;
  const fiatUsd = fiat === 'usd' ? undefined : fiat;
  const usdRate = fiatUsd ? fiatUsd.usd : new Decimal(1);
  const sources = [...new Set([...coin.sources, ...(fiatUsd?.sources ?? [])])].sort();
  const quotedAt = fiatUsd && fiatUsd.quotedAt < coin.quotedAt ? fiatUsd.quotedAt : coin.quotedAt;
  return { coinUsd: coin.usd, usdRate, sources, quotedAt };
}
