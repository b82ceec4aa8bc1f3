/**
 * Decimal → JSON number, the one conversion at the public edge (json-money.ts): the token digit for
 * digit, and the JS number built on it, refusing what would not be exact.
 */
import Decimal from 'decimal.js';
import fc from 'fast-check';
import { decimalAsJsonNumber, decimalToJsonNumber, jsonNumberIsExact } from '../src/json-money';

describe('decimalAsJsonNumber', () => {
  test.each([
    ['0.00000001', '0.00000001', 0.00000001],
    ['123456.12345678', '123456.12345678', 123456.12345678],
    ['1.50000000', '1.5', 1.5],
    ['100', '100', 100],
    ['100.000', '100', 100],
    ['0', '0', 0],
    ['0.0', '0', 0],
    ['-0.00', '0', 0],
    ['007.10', '7.1', 7.1],
    ['-2.5', '-2.5', -2.5],
    ['1e-8', '0.00000001', 0.00000001],
    ['1.5E3', '1500', 1500],
    ['12.345e-2', '0.12345', 0.12345],
    ['21000000.00000000', '21000000', 21000000],
    ['9999999.99999999', '9999999.99999999', 9999999.99999999],
  ])('%s → %s', (decimal, token, value) => {
    expect(decimalAsJsonNumber(decimal)).toBe(token);
    expect(JSON.parse(token)).toBe(value);
  });

  test.each(['', ' 1', '1 ', '+1', '.5', '1.', '1..2', 'NaN', 'Infinity', '0x10', '1e', '1e1000', '١٢', '1_000'])('refuses %j', (bad) => {
    expect(() => decimalAsJsonNumber(bad)).toThrow(/not a decimal number/);
  });

  test('amounts with up to 8 decimals below 10^7 survive JSON.parse exactly', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 9_999_999 }), fc.integer({ min: 0, max: 99_999_999 }), (whole, fraction) => {
        const decimal = `${whole}.${String(fraction).padStart(8, '0')}`;
        const parsed = JSON.parse(decimalAsJsonNumber(decimal)) as number;
        expect(parsed).toBe(Number(decimal));
        expect(new Decimal(String(parsed)).equals(new Decimal(decimal))).toBe(true);
      }),
      { numRuns: 2000 },
    );
  });

  test('the token is the exact decimal, even where a double is not', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: 0n, max: 10n ** 20n }), fc.integer({ min: 0, max: 12 }), (units, scale) => {
        const digits = units.toString().padStart(scale + 1, '0');
        const decimal = scale === 0 ? digits : `${digits.slice(0, -scale)}.${digits.slice(-scale)}`;
        expect(new Decimal(decimalAsJsonNumber(decimal)).equals(new Decimal(decimal))).toBe(true);
      }),
    );
  });
});

describe('decimalToJsonNumber', () => {
  test.each([
    ['0.00000001', 0.00000001],
    ['1.50000000', 1.5],
    ['999999999999.99', 999999999999.99],
    ['1e-8', 0.00000001],
  ])('%s → %s', (decimal, value) => {
    expect(decimalToJsonNumber(decimal)).toBe(value);
  });

  test('a decimal a double cannot carry gives the nearest double, never an error (1 wei more than 0.5 ETH)', () => {
    expect(decimalToJsonNumber('0.500000000000000001')).toBe(0.5);
    expect(decimalToJsonNumber('0.1234567890123456789')).toBe(0.12345678901234568);
  });

  test('refuses anything that is not a decimal', () => {
    expect(() => decimalToJsonNumber('abc')).toThrow(/not a decimal number/);
  });
});

describe('jsonNumberIsExact (issue 27: a JSON number is taken as written or refused)', () => {
  test.each([
    ['0.001', true],
    ['0.00100000', true],
    ['1e-3', true],
    ['1E-3', true],
    ['-0', true],
    ['9007199254740992', true],
    ['0.1', true],
    ['0.0010000000000000001', false],
    ['9007199254740993', false],
    ['1e400', false],
    ['1e-400', false],
    ['123456789.123456789', false],
  ])('%s → %s', (source, exact) => {
    expect(jsonNumberIsExact(source, JSON.parse(source) as number)).toBe(exact);
  });
});
