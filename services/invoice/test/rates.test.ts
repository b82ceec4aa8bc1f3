import fc from 'fast-check';
import { CRYPTO_CODES, type CryptoCode } from '@coinvoice/chains/coin';
import { cryptoCurrency, minimumAmount } from '@coinvoice/chains/currencies';
import { FIAT_CODES, fiatCurrency, type FiatCode } from '@coinvoice/domain/fiat';
import { Decimal, formatPlain, parsePriceAmount } from '@coinvoice/domain/money';
import {
  DEFAULT_RATE_TABLE,
  StaticRateProvider,
  parseRateTable,
  parseRateTableJson,
  quote,
  quoteAtRates,
  rateProviderFromConfig,
  type RateTable,
} from '../src/domain/rates';

function value<T>(parsed: { ok: true; value: T } | { ok: false; reason: string }): T {
  if (!parsed.ok) throw new Error(`unexpectedly refused: ${parsed.reason}`);
  return parsed.value;
}

const price = (amount: string, currency: FiatCode) => value(parsePriceAmount(amount, fiatCurrency(currency)));

/** A decimal string as an exact fraction units / 10^scale, with BigInt: independent of decimal.js. */
function fraction(decimal: string): { units: bigint; scale: number } {
  const [whole = '0', frac = ''] = decimal.split('.');
  return { units: BigInt(whole + frac), scale: frac.length };
}

/** a·b compared with c, exactly, as fractions: negative, zero or positive. */
function compareProduct(a: string, b: string, c: string): number {
  const [x, y, z] = [fraction(a), fraction(b), fraction(c)];
  const left = x.units * y.units * 10n ** BigInt(z.scale);
  const right = z.units * 10n ** BigInt(x.scale + y.scale);
  return left < right ? -1 : left > right ? 1 : 0;
}

/** The fewest coins, in steps of 10^-decimals, whose value at `rate` is at least `price`: BigInt only. */
function smallestWorth(price: string, rate: string, decimals: number): Decimal {
  const [p, r] = [fraction(price), fraction(rate)];
  // units ≥ price·10^decimals / rate = p.units·10^(decimals + r.scale) / (r.units·10^p.scale)
  const numerator = p.units * 10n ** BigInt(decimals + r.scale);
  const denominator = r.units * 10n ** BigInt(p.scale);
  const units = (numerator + denominator - 1n) / denominator;
  return new Decimal(units.toString()).div(new Decimal(10).pow(decimals));
}

/** priceAmount / rate, rounded up (`fromRate`), is the amount or below it by under 10^-14 of it, plus the rounding's unit. */
function withinRelationBound(amount: Decimal, fromRate: Decimal, decimals: number): boolean {
  const units = (d: Decimal) => d.times(new Decimal(10).pow(decimals));
  const short = units(amount).minus(units(fromRate));
  return short.gte(0) && short.lte(units(amount).times(1e-14).plus(1));
}

/** Half-up rounding of a·b to cents, computed with BigInt only. */
function halfUpCents(a: string, b: string): string {
  const [x, y] = [fraction(a), fraction(b)];
  const scale = 10n ** BigInt(x.scale + y.scale);
  const cents = (2n * x.units * y.units * 100n + scale) / (2n * scale); // floor(exact·100 + ½)
  return formatPlain(new Decimal(cents.toString()).div(100));
}

describe('StaticRateProvider', () => {
  const provider = new StaticRateProvider();

  it('prices one coin in USD straight from the table', async () => {
    expect(formatPlain(await provider.rate('BTC', 'USD'))).toBe(DEFAULT_RATE_TABLE.cryptoUsd.BTC);
    expect(formatPlain(await provider.usdRate('USD'))).toBe('1');
    expect(formatPlain(await provider.usdRate('EUR'))).toBe(DEFAULT_RATE_TABLE.fiatUsd.EUR);
  });

  it('derives cross rates through USD, cut down to 12 significant digits', async () => {
    const table: RateTable = { ...DEFAULT_RATE_TABLE, fiatUsd: { ...DEFAULT_RATE_TABLE.fiatUsd, EUR: '1.08' } };
    const rate = await new StaticRateProvider(table).rate('BTC', 'EUR');
    expect(formatPlain(rate)).toBe('97222.2222222'); // 105000 / 1.08 = 97222.2222…
    expect(rate.times('1.08').lte(DEFAULT_RATE_TABLE.cryptoUsd.BTC)).toBe(true);
  });

  it('refuses an invalid table at construction', () => {
    expect(() => new StaticRateProvider({ ...DEFAULT_RATE_TABLE, cryptoUsd: { ...DEFAULT_RATE_TABLE.cryptoUsd, BTC: '-1' } })).toThrow(
      /cryptoUsd.BTC must be greater than 0/,
    );
  });
});

describe('rate table configuration', () => {
  it('round-trips the shipped table through JSON', () => {
    expect(parseRateTableJson(JSON.stringify(DEFAULT_RATE_TABLE))).toEqual({ ok: true, value: DEFAULT_RATE_TABLE });
  });

  it('uses the shipped table when nothing is configured', () => {
    expect(value(rateProviderFromConfig(undefined)).table).toBe(DEFAULT_RATE_TABLE);
    expect(value(rateProviderFromConfig('  ')).table).toBe(DEFAULT_RATE_TABLE);
  });

  it('uses a configured table', async () => {
    const configured = { fiatUsd: DEFAULT_RATE_TABLE.fiatUsd, cryptoUsd: { ...DEFAULT_RATE_TABLE.cryptoUsd, BTC: '50000.5' } };
    const provider = value(rateProviderFromConfig(JSON.stringify(configured)));
    expect(formatPlain(await provider.rate('BTC', 'USD'))).toBe('50000.5');
  });

  it('reports every invalid entry', () => {
    const bad = {
      asOf: 'yesterday',
      extra: 1,
      fiatUsd: { ...DEFAULT_RATE_TABLE.fiatUsd, USD: '1.01', EUR: 1.08, XYZ: '1' },
      cryptoUsd: { BTC: '1e5', ETH: '0', LTC: '88', USDT: '1', USDC: '1' },
    };
    const parsed = parseRateTable(bad);
    expect(parsed.ok).toBe(false);
    const reasons = parsed.ok ? [] : parsed.reason.split('; ');
    expect(reasons).toEqual([
      'unknown field "extra"',
      'asOf must be an ISO 8601 date-time string',
      'fiatUsd.EUR must be a decimal string such as "10.50"',
      'fiatUsd.XYZ is not a supported currency (supported: USD, EUR, GBP, JPY, CHF, CAD, AUD)',
      expect.stringMatching(/^cryptoUsd.BTC must be a plain decimal number/),
      'cryptoUsd.ETH must be greater than 0',
      'cryptoUsd is missing TRX, POL, BNB',
      'fiatUsd.USD must be "1"',
    ]);
  });

  it('refuses non-JSON and non-objects', () => {
    expect(parseRateTableJson('{')).toEqual({ ok: false, reason: 'rate table is not valid JSON' });
    expect(parseRateTableJson('[]').ok).toBe(false);
    expect(parseRateTableJson('{"fiatUsd": null, "cryptoUsd": "x"}').ok).toBe(false);
    expect(rateProviderFromConfig('null').ok).toBe(false);
  });
});

describe('quote', () => {
  const provider = new StaticRateProvider();

  it('100 USD in BTC at 105000: amountExpected rounded up to 8 decimals', async () => {
    const q = value(await quote({ priceAmount: price('100', 'USD'), priceCurrency: 'USD', payCurrency: 'BTC' }, provider));
    expect(formatPlain(q.amountExpected)).toBe('0.00095239'); // 0.000952380952…
    expect(formatPlain(q.priceAmountInUsd)).toBe('100');
    expect(formatPlain(q.rate)).toBe('105000');
  });

  it('prices in another fiat from the two USD prices: 10 EUR at 1.08 USD is 10.8 USDT, not a base unit more', () => {
    const q = value(quoteAtRates({ priceAmount: price('10', 'EUR'), priceCurrency: 'EUR', payCurrency: 'USDT' }, { coinUsd: new Decimal('1'), usdRate: new Decimal('1.08') }));
    expect(formatPlain(q.amountExpected)).toBe('10.8'); // 10.800001 when it was taken from the cross rate cut to 12 digits
    expect(formatPlain(q.priceAmountInUsd)).toBe('10.8');
    // 1 / 1.08 = 0.925925…: shown with the fewest digits (12 at least) for which 10 / rate, rounded up, is 10.8.
    expect(formatPlain(q.rate)).toBe('0.925925925926');
  });

  it('the reviewers\' cases: the default table\'s EUR, GBP, CHF and JPY prices come to the exact coin amounts', async () => {
    const provider = new StaticRateProvider();
    const at = async (amount: string, priceCurrency: FiatCode, payCurrency: CryptoCode) =>
      formatPlain(value(await quote({ priceAmount: price(amount, priceCurrency), priceCurrency, payCurrency }, provider)).amountExpected);
    expect(await at('100', 'EUR', 'USDT')).toBe('114');
    expect(await at('100', 'GBP', 'USDC')).toBe('135');
    expect(await at('105000', 'EUR', 'BTC')).toBe('1.14');
    expect(await at('2500', 'CHF', 'ETH')).toBe('1.21');
    expect(await at('100', 'EUR', 'POL')).toBe('570');
    expect(await at('1000', 'JPY', 'USDT')).toBe('6.9');
    expect(await at('12.34', 'EUR', 'USDT')).toBe('14.0676');
    expect(await at('0.01', 'GBP', 'ETH')).toBe('0.0000054');
    expect(await at('999999999999', 'JPY', 'BTC')).toBe('65714.28571422'); // 6,899,999,999.9931 USD / 105,000, rounded up
  });

  it('very large prices in another fiat: the exact smallest amount, never the 12-digit cross rate\'s, at a 15-digit rate it covers the price at', async () => {
    // An outside review's cases: the amount had been taken from the cross rate cut to 12 digits,
    // 861 satoshi too many for 500 billion CAD in BTC.
    const provider = new StaticRateProvider();
    const at = async (amount: string, priceCurrency: FiatCode, payCurrency: CryptoCode) =>
      value(await quote({ priceAmount: price(amount, priceCurrency), priceCurrency, payCurrency }, provider));
    const cases: [string, FiatCode, CryptoCode, string, string][] = [
      ['500000000000.00', 'CAD', 'BTC', '3476190.47619048', '143835.616438357'],
      ['7000000000.00', 'EUR', 'ETH', '3192000', '2192.98245614036'],
      ['1000000000.00', 'EUR', 'LTC', '12954545.45454546', '77.1929824561404'],
      ['94485167.51', 'CHF', 'TRX', '423433528.470741', '0.223140495867769'],
    ];
    for (const [amount, priceCurrency, payCurrency, exactSmallest, nearestRate] of cases) {
      const q = await at(amount, priceCurrency, payCurrency);
      expect([formatPlain(q.amountExpected), formatPlain(q.rate)]).toEqual([exactSmallest, nearestRate]);
    }
  });

  it('prices JPY (no minor units) and rounds its USD value half-up to cents', () => {
    const q = value(quoteAtRates({ priceAmount: price('1500', 'JPY'), priceCurrency: 'JPY', payCurrency: 'ETH' }, { coinUsd: new Decimal('2500'), usdRate: new Decimal('0.0069') }));
    expect(formatPlain(q.priceAmountInUsd)).toBe('10.35');
    expect(formatPlain(q.amountExpected)).toBe('0.00414'); // 10.35 USD / 2500 exactly
    expect(formatPlain(q.rate)).toBe('362318.84058'); // 2500 / 0.0069 = 362318.8405797…
  });

  it('rounds priceAmountInUsd half-up, not half-even', () => {
    const at = (amount: string, usdRate: string) =>
      formatPlain(value(quoteAtRates({ priceAmount: price(amount, 'EUR'), priceCurrency: 'EUR', payCurrency: 'BTC' }, { coinUsd: new Decimal(1), usdRate: new Decimal(usdRate) })).priceAmountInUsd);
    expect(at('0.25', '0.5')).toBe('0.13'); // 0.125: half-even would give 0.12
    expect(at('0.05', '0.1')).toBe('0.01'); // 0.005
    expect(at('0.01', '0.4')).toBe('0'); // 0.004
  });

  it('refuses a price whose quote would not survive as a JSON number', () => {
    const q = quoteAtRates({ priceAmount: price('999999999999.99', 'USD'), priceCurrency: 'USD', payCurrency: 'TRX' }, { coinUsd: new Decimal('0.27'), usdRate: new Decimal(1) });
    expect(q).toEqual({ ok: false, reason: 'is too large to be quoted in TRX' });
  });
  it('refuses an amount below the dust limit of a UTXO chain (BTC 294 sat, LTC 2,940 litoshi) and takes one at it', () => {
    const at = (payCurrency: CryptoCode, priceAmount: string, rate: string) =>
      quoteAtRates({ priceAmount: price(priceAmount, 'USD'), priceCurrency: 'USD', payCurrency }, { coinUsd: new Decimal(rate), usdRate: new Decimal(1) });
    expect(at('BTC', '1', '341297')).toEqual({ ok: false, reason: "is too small: it comes to 0.00000293 BTC, below the smallest payable amount of 0.00000294 BTC (the chain's dust limit)" });
    expect(formatPlain(value(at('BTC', '1', '340137')).amountExpected)).toBe('0.00000294');
    expect(at('LTC', '1', '34026')).toMatchObject({ ok: false, reason: expect.stringContaining('0.00002939 LTC, below the smallest payable amount of 0.0000294 LTC') });
    expect(formatPlain(value(at('LTC', '1', '34014')).amountExpected)).toBe('0.0000294');
    // Account chains have no dust: one amount unit is payable.
    expect(formatPlain(value(at('ETH', '0.01', '3000000')).amountExpected)).toBe('0.00000001');
    expect(formatPlain(value(at('TRX', '0.01', '10000')).amountExpected)).toBe('0.000001');
  });
});

describe('quote properties', () => {
  const fiatCode = fc.constantFrom(...FIAT_CODES);
  const cryptoCode = fc.constantFrom(...CRYPTO_CODES);
  /**
   * A positive decimal string of magnitude 10^e for e in [minExponent, maxExponent] (log-uniform,
   * so every scale is well represented), with up to `maxDigits` significant digits and at most
   * `maxDecimals` decimals.
   */
  const decimalString = (minExponent: number, maxExponent: number, maxDigits: number, maxDecimals = 40) =>
    fc
      .integer({ min: minExponent, max: maxExponent })
      .chain((exponent) =>
        fc.integer({ min: 1, max: Math.max(1, Math.min(maxDigits, exponent + maxDecimals + 1)) }).chain((digits) =>
          fc.bigInt({ min: 10n ** BigInt(digits - 1), max: 10n ** BigInt(digits) - 1n }).map((mantissa) =>
            formatPlain(new Decimal(mantissa.toString()).times(new Decimal(10).pow(exponent - digits + 1))),
          ),
        ),
      );
  /** A price in the currency's minor units, from one minor unit to just under ten billion. */
  const priceIn = (currency: FiatCode) => {
    const minorUnits = fiatCurrency(currency).minorUnits;
    return decimalString(-minorUnits, 9, 12 + minorUnits, minorUnits);
  };
  /** Price of one coin: 0.0001 up to 10 million. */
  const coinRate = decimalString(-4, 6, 12);
  /** Price of one fiat unit in USD: 0.0001 up to 100. */
  const fiatUsdRate = decimalString(-4, 1, 10);
  const request = fiatCode.chain((priceCurrency) =>
    fc.record({ priceCurrency: fc.constant(priceCurrency), priceAmount: priceIn(priceCurrency), payCurrency: cryptoCode }),
  );

  it('amountExpected at the USD prices never falls short of the price, one base unit less would, and the shown rate gives it back', () => {
    let checked = 0;
    fc.assert(
      fc.property(request, coinRate, fiatUsdRate, (req, coinUsd, usdRate) => {
        const q = quoteAtRates(
          { priceAmount: price(req.priceAmount, req.priceCurrency), priceCurrency: req.priceCurrency, payCurrency: req.payCurrency },
          { coinUsd: new Decimal(coinUsd), usdRate: new Decimal(usdRate) },
        );
        if (!q.ok) return; // refused as too large to carry exactly: nothing to check
        const amount = formatPlain(q.value.amountExpected);
        const decimals = cryptoCurrency(req.payCurrency).amountDecimals;
        const priceInUsd = formatPlain(new Decimal(req.priceAmount).times(usdRate)); // exact
        expect(q.value.amountExpected.decimalPlaces()).toBeLessThanOrEqual(decimals);
        expect(compareProduct(amount, coinUsd, priceInUsd)).toBeGreaterThanOrEqual(0);
        // Minimal at the USD prices: one base unit less falls short of the price.
        const unit = new Decimal(10).pow(-decimals);
        const oneUnitLess = formatPlain(q.value.amountExpected.minus(unit));
        if (oneUnitLess !== '0') expect(compareProduct(oneUnitLess, coinUsd, priceInUsd)).toBeLessThan(0);
        // The documented relation, for the rate shown: amountExpected = priceAmount / rate, rounded up;
        // for amounts of more than 10^12 base units, where no rate of 15 digits may give the amount
        // back, to within 10^-14 of it, and the amount still covers the price at the rate shown.
        const rate = formatPlain(q.value.rate);
        expect(q.value.rate.sd(false)).toBeLessThanOrEqual(15);
        expect(compareProduct(amount, rate, req.priceAmount)).toBeGreaterThanOrEqual(0);
        const baseUnits = q.value.amountExpected.times(new Decimal(10).pow(decimals));
        const fromRate = smallestWorth(req.priceAmount, rate, decimals);
        if (baseUnits.lte(1e12)) expect(formatPlain(fromRate)).toBe(amount);
        else expect(withinRelationBound(q.value.amountExpected, fromRate, decimals)).toBe(true);
        checked++;
      }),
      { numRuns: 2000 },
    );
    expect(checked).toBeGreaterThan(1000); // most cases are quotable, so the property is really exercised
  });

  it('priceAmountInUsd is the price × USD rate rounded half-up to cents', () => {
    let checked = 0;
    fc.assert(
      fc.property(request, coinRate, fiatUsdRate, (req, rate, usdRate) => {
        const q = quoteAtRates(
          { priceAmount: price(req.priceAmount, req.priceCurrency), priceCurrency: req.priceCurrency, payCurrency: req.payCurrency },
          { coinUsd: new Decimal(rate), usdRate: new Decimal(usdRate) },
        );
        if (!q.ok) return;
        expect(formatPlain(q.value.priceAmountInUsd)).toBe(halfUpCents(req.priceAmount, usdRate));
        checked++;
      }),
      { numRuns: 2000 },
    );
    expect(checked).toBeGreaterThan(1000);
  });

  it('never throws for extreme prices and rates: it quotes or refuses with a reason', () => {
    const anyPrice = fiatCode.chain((c) => fc.record({ priceCurrency: fc.constant(c), priceAmount: decimalString(-fiatCurrency(c).minorUnits, 11, 14, fiatCurrency(c).minorUnits) }));
    fc.assert(
      fc.property(anyPrice, cryptoCode, decimalString(-18, 11, 20), decimalString(-18, 11, 20), (req, payCurrency, rate, usd) => {
        const q = quoteAtRates(
          { priceAmount: price(req.priceAmount, req.priceCurrency), priceCurrency: req.priceCurrency, payCurrency },
          { coinUsd: new Decimal(rate), usdRate: new Decimal(usd) },
        );
        if (q.ok) {
          const decimals = cryptoCurrency(payCurrency).amountDecimals;
          expect(compareProduct(formatPlain(q.value.amountExpected), rate, formatPlain(new Decimal(req.priceAmount).times(usd)))).toBeGreaterThanOrEqual(0);
          expect(compareProduct(formatPlain(q.value.amountExpected), formatPlain(q.value.rate), req.priceAmount)).toBeGreaterThanOrEqual(0);
          expect(withinRelationBound(q.value.amountExpected, smallestWorth(req.priceAmount, formatPlain(q.value.rate), decimals), decimals)).toBe(true);
        }
        else expect(q.reason).toMatch(new RegExp(`^is too large to be quoted in ${payCurrency}$|^is too small: .* below the smallest payable amount of ${formatPlain(minimumAmount(cryptoCurrency(payCurrency)))} ${payCurrency} `));
      }),
      { numRuns: 1000 },
    );
  });

  it('holds through the static provider for random tables (cross rates included)', async () => {
    let checked = 0;
    const table = fc.record({
      fiatUsd: fc.record(Object.fromEntries(FIAT_CODES.map((c) => [c, c === 'USD' ? fc.constant('1') : fiatUsdRate])) as Record<FiatCode, fc.Arbitrary<string>>),
      cryptoUsd: fc.record(Object.fromEntries(CRYPTO_CODES.map((c) => [c, coinRate])) as Record<CryptoCode, fc.Arbitrary<string>>),
    });
    await fc.assert(
      fc.asyncProperty(request, table, async (req, rates) => {
        const provider = new StaticRateProvider(rates);
        const q = await quote({ priceAmount: price(req.priceAmount, req.priceCurrency), priceCurrency: req.priceCurrency, payCurrency: req.payCurrency }, provider);
        if (!q.ok) return;
        const amount = formatPlain(q.value.amountExpected);
        // Never short at the fixed rate, nor at the unrounded cross rate coinUsd / fiatUsd.
        expect(compareProduct(amount, formatPlain(q.value.rate), req.priceAmount)).toBeGreaterThanOrEqual(0);
        const coinUsd = rates.cryptoUsd[req.payCurrency];
        const fiatUsd = rates.fiatUsd[req.priceCurrency];
        expect(compareProduct(amount, coinUsd, formatPlain(new Decimal(req.priceAmount).times(fiatUsd)))).toBeGreaterThanOrEqual(0);
        expect(formatPlain(q.value.priceAmountInUsd)).toBe(halfUpCents(req.priceAmount, fiatUsd));
        checked++;
      }),
      { numRuns: 1000 },
    );
    expect(checked).toBeGreaterThan(500);
  });
});
