/**
 * Money as exact decimals (docs/architecture.md#money: never a binary float inside the system).
 *
 * Every amount in the invoice domain is a `Decimal` from the constructor below. Input arrives as a
 * decimal string (or, at the REST edge only, a JSON number that is converted once, here) and leaves
 * either as a canonical decimal string (proto, database) or, at the REST edge only, as a JSON
 * number via `decimalToJsonNumber` (../money.ts).
 *
 * Canonical string form (`formatPlain`): plain notation, never an exponent, no trailing fractional
 * zeros, no trailing '.', "0" for zero. One value has exactly one canonical string, so strings can
 * be compared for equality (idempotency bodies, tests). Fiat amounts that should show their minor
 * units ("19.90", "1500" for JPY) use `formatFixed(amount, minorUnits)` instead.
 */
import { Decimal as DecimalJs } from 'decimal.js';

/**
 * decimal.js configured for money. 80 significant digits keep every product and quotient of
 * 12-integer-digit amounts and rates exact or far below the 8th decimal; the exponent limits keep
 * `toString` in plain notation for every amount the domain can produce.
 */
export const Decimal = DecimalJs.clone({
  precision: 80,
  rounding: DecimalJs.ROUND_HALF_UP,
  toExpNeg: -100,
  toExpPos: 100,
});
export type Decimal = DecimalJs;

/** Rounding modes used by the domain, re-exported so callers never reach for decimal.js itself. */
export const Rounding = {
  up: DecimalJs.ROUND_UP,
  down: DecimalJs.ROUND_DOWN,
  halfUp: DecimalJs.ROUND_HALF_UP,
} as const;

/** A parse or lookup outcome: the value, or a human-readable reason fit for a 400 violation message. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

export const ok = <T>(value: T): Parsed<T> => ({ ok: true, value });
export const refused = <T = never>(reason: string): Parsed<T> => ({ ok: false, reason });

/** Amounts above this many integer digits are refused as absurd (a trillion in any unit). */
export const MAX_INTEGER_DIGITS = 12;
/** Crypto amounts carry at most this many decimals (docs/architecture.md#money). */
export const MAX_CRYPTO_DECIMALS = 8;
/** Longer input is refused before any parsing work; no legitimate amount comes close. */
const MAX_AMOUNT_INPUT_LENGTH = 64;

// Digits, optionally '.' and more digits. No sign, exponent, whitespace, '_' or bare '.'.
const PLAIN_DECIMAL = /^(\d+)(?:\.(\d+))?$/;

/**
 * Strictly parses a positive decimal STRING: plain digits with an optional fraction, no leading
 * zeros (except a single "0" before '.'), no sign, exponent or whitespace, more than 0, at most
 * `maxDecimals` fraction digits as written (so "10.500" is refused for a 2-decimal currency rather
 * than silently reinterpreted), at most MAX_INTEGER_DIGITS integer digits.
 */
export function parsePositiveDecimal(input: unknown, maxDecimals: number): Parsed<Decimal> {
  return parseDecimalString(input, maxDecimals, tooManyDecimals(maxDecimals));
}

function parseDecimalString(input: unknown, maxDecimals: number, tooManyDecimalsReason: string): Parsed<Decimal> {
  if (typeof input !== 'string') return refused('must be a decimal string such as "10.50"');
  if (input.length === 0) return refused('must not be empty');
  if (input.length > MAX_AMOUNT_INPUT_LENGTH) return refused(`must be at most ${MAX_AMOUNT_INPUT_LENGTH} characters`);
  if (input.startsWith('-') && PLAIN_DECIMAL.test(input.slice(1))) return refused('must be greater than 0');
  const match = PLAIN_DECIMAL.exec(input);
  if (!match) {
    return refused('must be a plain decimal number such as "10.50" (digits with an optional fraction, without sign, exponent or spaces)');
  }
  const integerPart = match[1] ?? '';
  const fractionPart = match[2] ?? '';
  if (integerPart.length > 1 && integerPart.startsWith('0')) return refused('must not have leading zeros');
  if (integerPart.length > MAX_INTEGER_DIGITS) return refused(`must have at most ${MAX_INTEGER_DIGITS} digits before the decimal point`);
  if (fractionPart.length > maxDecimals) return refused(tooManyDecimalsReason);
  const value = new Decimal(input);
  if (value.isZero()) return refused('must be greater than 0'); // the grammar already excludes a sign
  return ok(value);
}

/**
 * Parses a merchant's `priceAmount` in a fiat currency: `parsePositiveDecimal` with the currency's
 * minor units (2 for USD, 0 for JPY). The reason names the currency when decimals are the problem.
 */
export function parsePriceAmount(input: unknown, currency: { code: string; minorUnits: number }): Parsed<Decimal> {
  return parseDecimalString(
    input,
    currency.minorUnits,
    currency.minorUnits === 0
      ? `must be a whole number: ${currency.code} has no minor units`
      : `must have at most ${currency.minorUnits} decimal places for ${currency.code}`,
  );
}

/**
 * Parses a crypto amount (sandbox `amountReceived`, payout `amount`): a decimal string as
 * `parsePositiveDecimal` accepts, or a finite JSON number, converted through its shortest decimal
 * representation (what JSON.stringify would print) so 0.1 means exactly 0.1. At most `maxDecimals`
 * decimals (8 unless the coin has fewer), and exactly representable as a JSON number again so that
 * echoing it never alters it.
 */
export function parseCryptoAmount(input: unknown, maxDecimals: number = MAX_CRYPTO_DECIMALS): Parsed<Decimal> {
  let parsed: Parsed<Decimal>;
  if (typeof input === 'number') {
    if (!Number.isFinite(input)) return refused('must be a finite number');
    if (input <= 0) return refused('must be greater than 0');
    const value = new Decimal(input);
    if (value.decimalPlaces() > maxDecimals) return refused(tooManyDecimals(maxDecimals));
    if (integerDigits(value) > MAX_INTEGER_DIGITS) return refused(`must have at most ${MAX_INTEGER_DIGITS} digits before the decimal point`);
    parsed = ok(value);
  } else if (typeof input === 'string') {
    parsed = parsePositiveDecimal(input, maxDecimals);
  } else {
    return refused('must be a number or a decimal string');
  }
  if (parsed.ok && !isExactJsonNumber(parsed.value)) {
    return refused('has too many significant digits to be answered exactly as a JSON number (an IEEE 754 double: 15 digits always fit, some of 16 and 17 do)');
  }
  return parsed;
}

/**
 * Canonical decimal string: plain notation, no trailing fractional zeros, "0" for zero (never "-0").
 * Takes a decimal string too (a numeric column as Postgres returns it).
 */
export function formatPlain(amount: Decimal | string): string {
  const decimal = typeof amount === 'string' ? new Decimal(amount) : amount;
  if (decimal.isZero()) return '0';
  return decimal.toFixed();
}

/**
 * Fixed-scale decimal string, e.g. formatFixed(19.9, 2) = "19.90", formatFixed(1500, 0) = "1500".
 * Never rounds: an amount with more decimals than `places` is a bug upstream, so it throws.
 */
export function formatFixed(amount: Decimal, places: number): string {
  if (amount.decimalPlaces() > places) {
    throw new RangeError(`amount ${formatPlain(amount)} has more than ${places} decimal places`);
  }
  return amount.isZero() ? new Decimal(0).toFixed(places) : amount.toFixed(places);
}

/** True when the JSON number nearest to `amount` prints back as exactly the same decimal. */
export function isExactJsonNumber(amount: Decimal): boolean {
  const asNumber = Number(formatPlain(amount));
  return Number.isFinite(asNumber) && new Decimal(asNumber).eq(amount);
}

/** Converts a whole number of base units (satoshi, wei, sun…) back to a decimal amount. */
export function fromBaseUnits(baseUnits: bigint, decimals: number): Decimal {
  return new Decimal(baseUnits.toString()).div(new Decimal(10).pow(decimals));
}

/**
 * The amount in whole base units (e.g. BTC 0.00015 at 8 decimals = 15000n). Throws when the amount
 * has more decimals than the unit allows: amounts are quantized before they get here.
 */
export function toBaseUnits(amount: Decimal, decimals: number): bigint {
  const scaled = amount.times(new Decimal(10).pow(decimals));
  if (!scaled.isInteger()) {
    throw new RangeError(`amount ${formatPlain(amount)} has more than ${decimals} decimal places`);
  }
  return BigInt(scaled.toFixed(0));
}

function tooManyDecimals(maxDecimals: number): string {
  return maxDecimals === 0 ? 'must be a whole number' : `must have at most ${maxDecimals} decimal places`;
}

function integerDigits(value: Decimal): number {
  return value.abs().truncated().toFixed(0).replace(/^0$/, '').length;
}
