/**
 * Exchange rates and quotes (docs/architecture.md#rates). Rates come from a `RateProvider`; the default is a
 * static table shipped with the service, replaceable by configuration (a JSON table in an env
 * var, parsed by `parseRateTableJson`). An invoice fixes its quote, rate included, at creation.
 */
import { CRYPTO_CODES, type CryptoCode, type CryptoCurrency } from '@coinvoice/chains/coin';
import { cryptoCurrency, isCryptoCode, minimumAmount } from '@coinvoice/chains/currencies';
import { FIAT_CODES, isFiatCode, type FiatCode } from '@coinvoice/domain/fiat';
import { Decimal, Rounding, formatPlain, isExactJsonNumber, ok, parsePositiveDecimal, refused, type Parsed } from '@coinvoice/domain/money';

export interface RateProvider {
  /** Price of ONE unit of `payCurrency` in `priceCurrency`, e.g. rate('BTC', 'EUR') = 60185.18… */
  rate(payCurrency: CryptoCode, priceCurrency: FiatCode): Promise<Decimal>;
  /** Price of ONE unit of `fiat` in USD, for priceAmountInUsd (usdRate('USD') = 1). */
  usdRate(fiat: FiatCode): Promise<Decimal>;
}

/**
 * A rate table, JSON-able, all rates anchored on USD so that the cross rates between any two
 * currencies are consistent. Values are decimal strings (never JSON numbers: they would be floats).
 */
export interface RateTable {
  /** When the rates were taken (ISO 8601), for operators; not used in arithmetic. */
  readonly asOf?: string;
  /** USD per ONE unit of each fiat currency; USD must be "1". */
  readonly fiatUsd: Readonly<Record<FiatCode, string>>;
  /** USD per ONE unit of each crypto currency. */
  readonly cryptoUsd: Readonly<Record<CryptoCode, string>>;
}

/**
 * The table shipped with the service: indicative mid-2025 rates, good for development and sandbox.
 * A live deployment configures its own (or a live provider behind `RateProvider`).
 */
export const DEFAULT_RATE_TABLE: RateTable = {
  asOf: '2025-06-01T00:00:00Z',
  fiatUsd: { USD: '1', EUR: '1.14', GBP: '1.35', JPY: '0.0069', CHF: '1.21', CAD: '0.73', AUD: '0.65' },
  cryptoUsd: { BTC: '105000', LTC: '88', ETH: '2500', USDT: '1', USDC: '1', TRX: '0.27', POL: '0.2', BNB: '650' },
};

/** Name proposed for the env var carrying a replacement rate table as JSON (wired by the service). */
export const RATE_TABLE_ENV = 'INVOICE_RATE_TABLE';

/** Cross rates (coin in a non-USD fiat) keep at least this many significant digits when shown. */
export const CROSS_RATE_SIGNIFICANT_DIGITS = 12;
/** A shown rate has at most this many significant digits: it must survive as an exact JSON number. */
const SHOWN_RATE_MAX_SIGNIFICANT_DIGITS = 15;
/** Rates in a table: at most this many decimals (JPY in USD needs a few; 18 is generous). */
const MAX_RATE_DECIMALS = 18;

/**
 * Price of one coin in a fiat currency from both prices in USD: exact for USD, otherwise cut DOWN to
 * CROSS_RATE_SIGNIFICANT_DIGITS (a lower rate means more coin expected, so rounding never costs the
 * merchant). Static and live rates both go through here.
 */
export function crossRate(coinUsd: Decimal, fiatUsd: Decimal): Decimal {
  if (fiatUsd.eq(1)) return coinUsd;
  return coinUsd.div(fiatUsd).toSignificantDigits(CROSS_RATE_SIGNIFICANT_DIGITS, Rounding.down);
}

/** A `RateProvider` over a fixed `RateTable`. */
export class StaticRateProvider implements RateProvider {
  private readonly fiatUsd: ReadonlyMap<FiatCode, Decimal>;
  private readonly cryptoUsd: ReadonlyMap<CryptoCode, Decimal>;

  /** Throws on an invalid table; untrusted tables go through `parseRateTable` first. */
  constructor(readonly table: RateTable = DEFAULT_RATE_TABLE) {
    const checked = parseRateTable(table);
    if (!checked.ok) throw new Error(`invalid rate table: ${checked.reason}`);
    this.fiatUsd = new Map(FIAT_CODES.map((code) => [code, new Decimal(table.fiatUsd[code])]));
    this.cryptoUsd = new Map(CRYPTO_CODES.map((code) => [code, new Decimal(table.cryptoUsd[code])]));
  }

  /**
   * coinUsd / fiatUsd, exact for USD, otherwise cut DOWN to CROSS_RATE_SIGNIFICANT_DIGITS: a lower
   * rate means more coin expected, so rounding the rate never costs the merchant.
   */
  async rate(payCurrency: CryptoCode, priceCurrency: FiatCode): Promise<Decimal> {
    return this.rateNow(payCurrency, priceCurrency);
  }

  async usdRate(fiat: FiatCode): Promise<Decimal> {
    return this.usdRateNow(fiat);
  }

  /** Synchronous `rate`, for callers that hold a `StaticRateProvider` itself. */
  rateNow(payCurrency: CryptoCode, priceCurrency: FiatCode): Decimal {
    const coinUsd = this.cryptoUsd.get(payCurrency);
    const fiatUsd = this.fiatUsd.get(priceCurrency);
    if (!coinUsd || !fiatUsd) throw new Error(`no rate for ${payCurrency}/${priceCurrency}`);
    return crossRate(coinUsd, fiatUsd);
  }

  usdRateNow(fiat: FiatCode): Decimal {
    const fiatUsd = this.fiatUsd.get(fiat);
    if (!fiatUsd) throw new Error(`no USD rate for ${fiat}`);
    return fiatUsd;
  }
}

/**
 * Validates an untrusted rate table (e.g. parsed from configuration): an object with `fiatUsd` and
 * `cryptoUsd` maps holding EVERY supported code and no other, each a positive plain decimal string,
 * USD exactly 1, `asOf` optional ISO string. All problems are reported, joined by "; ".
 */
export function parseRateTable(input: unknown): Parsed<RateTable> {
  if (!isPlainObject(input)) return refused('rate table must be a JSON object with "fiatUsd" and "cryptoUsd"');
  const problems: string[] = [];
  for (const key of Object.keys(input)) {
    if (key !== 'asOf' && key !== 'fiatUsd' && key !== 'cryptoUsd') problems.push(`unknown field "${key}"`);
  }
  if (input.asOf !== undefined && (typeof input.asOf !== 'string' || Number.isNaN(Date.parse(input.asOf)))) {
    problems.push('asOf must be an ISO 8601 date-time string');
  }
  const fiatUsd = checkRates(input.fiatUsd, 'fiatUsd', FIAT_CODES, isFiatCode, problems);
  const cryptoUsd = checkRates(input.cryptoUsd, 'cryptoUsd', CRYPTO_CODES, isCryptoCode, problems);
  if (fiatUsd && fiatUsd.USD !== undefined && !new Decimal(fiatUsd.USD).eq(1)) problems.push('fiatUsd.USD must be "1"');
  if (problems.length > 0 || !fiatUsd || !cryptoUsd) return refused(problems.join('; '));
  const table: RateTable = {
    ...(typeof input.asOf === 'string' ? { asOf: input.asOf } : {}),
    fiatUsd: fiatUsd as Record<FiatCode, string>,
    cryptoUsd: cryptoUsd as Record<CryptoCode, string>,
  };
  return ok(table);
}

/** `parseRateTable` over a JSON string, e.g. the value of the INVOICE_RATE_TABLE env var. */
export function parseRateTableJson(json: string): Parsed<RateTable> {
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch {
    return refused('rate table is not valid JSON');
  }
  return parseRateTable(value);
}

/**
 * The rate provider configuration asks for: the shipped table when `rateTableJson` is unset or
 * blank, otherwise a `StaticRateProvider` over the configured table (refused when invalid, so the
 * service can fail to start with the reason).
 */
export function rateProviderFromConfig(rateTableJson: string | undefined): Parsed<StaticRateProvider> {
  if (rateTableJson === undefined || rateTableJson.trim() === '') return ok(new StaticRateProvider(DEFAULT_RATE_TABLE));
  const table = parseRateTableJson(rateTableJson);
  return table.ok ? ok(new StaticRateProvider(table.value)) : table;
}

export interface QuoteRequest {
  /** The parsed, validated price (see parsePriceAmount). */
  readonly priceAmount: Decimal;
  readonly priceCurrency: FiatCode;
  readonly payCurrency: CryptoCode;
  /**
   * The registry entry paid in (payCurrency on the invoice's payNetwork): its amountDecimals and
   * minimum amount round the quote (docs/networks.md). Absent: payCurrency on its default network.
   */
  readonly payMethod?: CryptoCurrency;
}

export interface Quote {
  /** priceAmount in USD, rounded half-up to cents. */
  readonly priceAmountInUsd: Decimal;
  /** Coin to pay: priceAmount × usdRate / coinUsd rounded UP to the coin's amountDecimals (≤ 8). */
  readonly amountExpected: Decimal;
  /**
   * Price of one pay-currency unit in the price currency, fixed on the invoice: coinUsd / usdRate,
   * shown with as many digits as make priceAmount / rate, rounded up, come to amountExpected.
   */
  readonly rate: Decimal;
}

/** The rates one quote uses, both anchored on USD (the cross rate between them is their ratio). */
export interface QuoteRates {
  /** Price of one pay-currency unit in USD. */
  readonly coinUsd: Decimal;
  /** Price of one price-currency unit in USD. */
  readonly usdRate: Decimal;
}

/** Asks the provider for both rates and quotes at them. */
export async function quote(request: QuoteRequest, provider: RateProvider): Promise<Parsed<Quote>> {
  const [coinUsd, usdRate] = await Promise.all([provider.rate(request.payCurrency, 'USD'), provider.usdRate(request.priceCurrency)]);
  return quoteAtRates(request, { coinUsd, usdRate });
}

/**
 * The pure quote arithmetic.
 * - amountExpected = priceAmount × usdRate / coinUsd, computed from the two USD prices (never from
 *   a rounded cross rate) and rounded UP to the coin's amountDecimals: the smallest amount worth
 *   at least the price at these rates, so the merchant never receives less and the customer is
 *   never asked for a base unit more (100 EUR at 1.14 USD is 114 USDT, not 114.000001).
 * - rate = coinUsd / usdRate, exact when it has at most 15 significant digits, else rounded (to the
 *   nearest, else up or down) to the fewest digits from 12 on for which priceAmount / rate, rounded
 *   up, is amountExpected (the documented relation holds for the number shown). When no rate of
 *   15 digits or fewer gives the amount back (amounts of more than about 10^12 base units, where
 *   one base unit is a smaller step than a 15-digit rate's), amountExpected stays the smallest
 *   amount worth the price and the rate shown is priceAmount / amountExpected rounded up to 15
 *   digits: amountExpected × rate still covers the price, and priceAmount / rate, rounded up, is
 *   below amountExpected by under 10^-14 of it (a base unit or a few).
 * - priceAmountInUsd = priceAmount × usdRate rounded half-up to cents.
 * Refused (a reason for `priceAmount`) when a result would not survive as an exact JSON number,
 * which only happens for absurdly large prices.
 */
export function quoteAtRates(request: QuoteRequest, rates: QuoteRates): Parsed<Quote> {
  const { priceAmount, payCurrency } = request;
  const { coinUsd, usdRate } = rates;
  if (!coinUsd.isFinite() || coinUsd.lte(0)) throw new RangeError(`coinUsd must be positive, got ${coinUsd.toString()}`);
  if (!usdRate.isFinite() || usdRate.lte(0)) throw new RangeError(`usdRate must be positive, got ${usdRate.toString()}`);
  const method = request.payMethod ?? cryptoCurrency(payCurrency);
  if (method.code !== payCurrency) throw new Error(`payMethod ${method.code}@${method.chain} is not ${payCurrency}`);
  const decimals = method.amountDecimals;
  const unit = new Decimal(10).pow(-decimals);

  // priceAmount × usdRate is exact; one division, whose 80 significant digits cannot carry a
  // quotient across a step of the coin's decimals (smallestAmountWorth checks the exact product anyway).
  const priceInUsd = priceAmount.times(usdRate);
  const amountExpected = smallestAmountWorth(priceInUsd, coinUsd, decimals);

  // The amount is never bent to fit the shown rate: when no rate a JSON number carries gives it
  // back, the rate shown is priceAmount / amountExpected rounded up to 15 digits, at which the
  // amount is still worth the price (and priceAmount / rate falls short of it by < 10^-14 of it).
  const rate =
    shownRate(priceAmount, amountExpected, unit, coinUsd, usdRate) ??
    priceAmount.div(amountExpected).toSignificantDigits(SHOWN_RATE_MAX_SIGNIFICANT_DIGITS, Rounding.up);

  const priceAmountInUsd = priceInUsd.toDecimalPlaces(2, Rounding.halfUp);

  if (!isExactJsonNumber(amountExpected) || !isExactJsonNumber(priceAmountInUsd)) {
    return refused(`is too large to be quoted in ${payCurrency}`);
  }
  const minimum = minimumAmount(method);
  if (amountExpected.lt(minimum)) {
    return refused(`is too small: it comes to ${formatPlain(amountExpected)} ${payCurrency}, below the smallest payable amount of ${formatPlain(minimum)} ${payCurrency} (the chain's dust limit)`);
  }
  return ok({ priceAmountInUsd, amountExpected, rate });
}

/**
 * The fewest coins, in steps of `decimals`, worth at least `price` at `unitPrice` per coin: the
 * quotient rounded up, then one step more if the division's 80 significant digits fell short (the
 * product is exact, so the guarantee is unconditional).
 */
function smallestAmountWorth(price: Decimal, unitPrice: Decimal, decimals: number): Decimal {
  const amount = price.div(unitPrice).toDecimalPlaces(decimals, Rounding.up);
  return amount.times(unitPrice).lt(price) ? amount.plus(new Decimal(10).pow(-decimals)) : amount;
}

/**
 * The cross rate coinUsd / usdRate as an invoice shows it: exact when it has at most 15
 * significant digits, else rounded to the fewest digits from 12 on for which
 * priceAmount / rate, rounded up to the coin's unit, is `amount`; undefined when none up to 15 is.
 */
function shownRate(priceAmount: Decimal, amount: Decimal, unit: Decimal, coinUsd: Decimal, usdRate: Decimal): Decimal | undefined {
  const exact = coinUsd.div(usdRate);
  const roundsTo = (rate: Decimal) => amount.times(rate).gte(priceAmount) && amount.minus(unit).times(rate).lt(priceAmount);
  if (exact.times(usdRate).eq(coinUsd) && exact.sd(false) <= SHOWN_RATE_MAX_SIGNIFICANT_DIGITS) return roundsTo(exact) ? exact : undefined;
  for (let digits = CROSS_RATE_SIGNIFICANT_DIGITS; digits <= SHOWN_RATE_MAX_SIGNIFICANT_DIGITS; digits++) {
    // The nearest rate of this many digits first, then the one on the other side of the exact rate
    // (an amount exactly at the price needs a rate at or above it: 100 EUR / 0.877192982457 → 114).
    for (const rounding of [Rounding.halfUp, Rounding.up, Rounding.down]) {
      const rate = exact.toSignificantDigits(digits, rounding);
      if (roundsTo(rate)) return rate;
    }
  }
  return undefined;
}

function checkRates<C extends string>(
  input: unknown,
  field: string,
  codes: readonly C[],
  isCode: (code: unknown) => code is C,
  problems: string[],
): Partial<Record<C, string>> | undefined {
  if (!isPlainObject(input)) {
    problems.push(`${field} must be an object mapping each of ${codes.join(', ')} to a decimal string`);
    return undefined;
  }
  const rates: Partial<Record<C, string>> = {};
  for (const [code, value] of Object.entries(input)) {
    if (!isCode(code)) {
      problems.push(`${field}.${code} is not a supported currency (supported: ${codes.join(', ')})`);
      continue;
    }
    const parsed = parsePositiveDecimal(value, MAX_RATE_DECIMALS);
    if (parsed.ok) rates[code] = value as string;
    else problems.push(`${field}.${code} ${parsed.reason}`);
  }
  const missing = codes.filter((code) => !Object.hasOwn(input, code));
  if (missing.length > 0) problems.push(`${field} is missing ${missing.join(', ')}`);
  return rates;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
