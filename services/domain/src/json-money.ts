/**
 * Money crosses process boundaries as decimal strings and is never a binary float inside the
 * system. JSON numbers exist only at the public edge; these are the conversions there, and the
 * only ones: decimal → JSON number is `decimalAsJsonNumber` (the token, for bodies written as
 * exact text: webhooks, balances) and `decimalToJsonNumber` (the nearest double, for bodies a
 * serializer writes), built on it. A read never fails because of an amount's precision: where an
 * amount can carry more digits than a double (ETH's 18 decimals), the body also carries its exact
 * decimal string (docs/accounting.md).
 */
import Decimal from 'decimal.js';

/**
 * The JSON number token for a decimal string, written digit for digit so nothing is lost on our
 * side: JSON.parse of it gives the nearest double (exact round trip for up to 15 significant
 * digits, which covers 8 decimals up to 9,999,999.99999999), and a decimal-aware parser gets the
 * exact value. Canonical form: no exponent, no leading zeros, no trailing fractional zeros, no
 * "-0". Accepts plain and exponent notation (decimal.js writes tiny values as "1e-8").
 * @throws Error on anything else ("", "+1", ".5", "1.", "NaN", whitespace…): this text goes into
 *   the body verbatim, so it must be a number and nothing else.
 */
export function decimalAsJsonNumber(decimal: string): string {
  const match = /^(-?)(\d+)(?:\.(\d+))?(?:[eE]([+-]?\d{1,3}))?$/.exec(decimal);
  if (!match) throw new Error(`not a decimal number: ${JSON.stringify(decimal.slice(0, 40))}`);
  const [, sign = '', whole = '', fraction = '', exponentText] = match;
  const exponent = exponentText === undefined ? 0 : Number(exponentText);

  // All digits, and where the decimal point sits among them.
  const digits = whole + fraction;
  const point = whole.length + exponent;
  const padded = point <= 0 ? '0'.repeat(1 - point) + digits : digits.padEnd(point, '0');
  const pointInPadded = Math.max(point, 1);

  const integerPart = padded.slice(0, pointInPadded).replace(/^0+(?=\d)/, '');
  const fractionPart = padded.slice(pointInPadded).replace(/0+$/, '');
  const magnitude = fractionPart === '' ? integerPart : `${integerPart}.${fractionPart}`;
  return magnitude === '0' ? '0' : sign + magnitude;
}

/**
 * A decimal string as a JSON number: the double nearest to it (exact for up to 15 significant
 * digits — every seed-documented amount, 8 decimals up to 9,999,999.99999999). Never throws for
 * precision: a read must not fail because someone paid 1 wei more; bodies that can meet such an
 * amount carry its exact decimal string beside the number.
 * @throws Error when `decimal` is not a decimal number at all (a bug upstream).
 */
export function decimalToJsonNumber(decimal: string): number {
  const value = Number(decimalAsJsonNumber(decimal));
  if (!Number.isFinite(value)) throw new RangeError(`amount ${decimal} is not a finite number`);
  return value;
}

/**
 * A JSON number received from a client as a plain decimal string (no exponent) and the number of
 * decimal places it has, taking the shortest representation that reads back as the same double —
 * what the client wrote, for every number a client would write.
 */
/**
 * Whether a JSON number's source text (as written by the client) denotes exactly the value a JSON
 * parser made of it. "0.0010000000000000001" parses as 0.001 and "9007199254740993" as
 * 9007199254740992: those are refused at the edge rather than rounded silently (docs/architecture.md#exact-json-numbers).
 * Same value written differently ("1.10", "1e-8", "-0") is exact.
 */
export function jsonNumberIsExact(source: string, value: number): boolean {
  if (!Number.isFinite(value)) return false;
  try {
    return new Decimal(source).eq(new Decimal(value));
  } catch {
    return false;
  }
}

export function jsonNumberToDecimal(value: number): { decimal: string; decimalPlaces: number } {
  if (!Number.isFinite(value)) throw new Error('not a finite number');
  const exact = new Decimal(value);
  return { decimal: exact.toFixed(), decimalPlaces: exact.decimalPlaces() };
}
