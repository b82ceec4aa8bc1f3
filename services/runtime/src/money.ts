/**
 * Money crosses process boundaries as decimal strings and is never a binary float inside the
 * system. JSON numbers exist only at the public edge; these are the two conversions there.
 */
import Decimal from 'decimal.js';

/**
 * A decimal string as a JSON number. Refuses (throws) when the double would not be exactly the
 * decimal — that would be a bug upstream (amounts are bounded so this cannot happen), never a
 * silent rounding of someone's money.
 */
export function decimalToJsonNumber(decimal: string): number {
  const exact = new Decimal(decimal);
  const value = exact.toNumber();
  if (!Number.isFinite(value) || !new Decimal(value).eq(exact)) {
    throw new Error(`amount ${decimal} cannot be represented exactly as a JSON number`);
  }
  return value;
}

/**
 * A JSON number received from a client as a plain decimal string (no exponent) and the number of
 * decimal places it has, taking the shortest representation that reads back as the same double —
 * what the client wrote, for every number a client would write.
 */
export function jsonNumberToDecimal(value: number): { decimal: string; decimalPlaces: number } {
  if (!Number.isFinite(value)) throw new Error('not a finite number');
  const exact = new Decimal(value);
  return { decimal: exact.toFixed(), decimalPlaces: exact.decimalPlaces() };
}
