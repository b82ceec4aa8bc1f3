/**
 * The fiat price currencies (ISO 4217) an invoice may be priced in, and the lookup of an untrusted
 * currency code shared with the crypto registry (services/chains/src/currencies.ts).
 */
import { refused, type Parsed } from './money';

export const FIAT_CODES = ['USD', 'EUR', 'GBP', 'JPY', 'CHF', 'CAD', 'AUD'] as const;
export type FiatCode = (typeof FIAT_CODES)[number];

export interface FiatCurrency {
  readonly kind: 'fiat';
  readonly code: FiatCode;
  readonly name: string;
  /** ISO 4217 minor units: the decimals a price may have (2 for USD, 0 for JPY). */
  readonly minorUnits: number;
}

const fiat = (code: FiatCode, name: string, minorUnits: number): FiatCurrency => ({ kind: 'fiat', code, name, minorUnits });

const FIAT: Readonly<Record<FiatCode, FiatCurrency>> = {
  USD: fiat('USD', 'US Dollar', 2),
  EUR: fiat('EUR', 'Euro', 2),
  GBP: fiat('GBP', 'Pound Sterling', 2),
  JPY: fiat('JPY', 'Yen', 0),
  CHF: fiat('CHF', 'Swiss Franc', 2),
  CAD: fiat('CAD', 'Canadian Dollar', 2),
  AUD: fiat('AUD', 'Australian Dollar', 2),
};

export const SUPPORTED_FIAT: readonly FiatCurrency[] = FIAT_CODES.map((code) => FIAT[code]);
export function isFiatCode(code: unknown): code is FiatCode {
  return typeof code === 'string' && (FIAT_CODES as readonly string[]).includes(code);
}

/** The registry entry of a known fiat code. */
export function fiatCurrency(code: FiatCode): FiatCurrency {
  return FIAT[code];
}

/**
 * Looks up an untrusted fiat code, in any letter case (`"eur"` is EUR: the value carries the
 * canonical upper-case code). Unsupported codes are refused with a reason naming the supported
 * ones, e.g. `unsupported currency "XYZ"; supported: USD, EUR, …`.
 */
export function findFiatCurrency(code: unknown): Parsed<FiatCurrency> {
  const canonical = upperCased(code);
  return isFiatCode(canonical) ? { ok: true, value: FIAT[canonical] } : refused(unsupportedCurrency(code, FIAT_CODES));
}


/** A code as the registries spell it: upper case (anything that is not a string is left as is). */
export function upperCased(code: unknown): unknown {
  return typeof code === 'string' ? code.toUpperCase() : code;
}

/** The reason an unsupported currency code is refused, naming the supported ones. */
export function unsupportedCurrency(code: unknown, supported: readonly string[]): string {
  const shown = typeof code === 'string' ? `"${code.length > 16 ? `${code.slice(0, 16)}…` : code}"` : `of type ${typeof code}`;
  return `unsupported currency ${shown}; supported: ${supported.join(', ')}`;
}
