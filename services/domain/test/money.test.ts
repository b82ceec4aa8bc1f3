import { Decimal, formatFixed, formatPlain, fromBaseUnits, isExactJsonNumber, parseCryptoAmount, parsePositiveDecimal, parsePriceAmount, toBaseUnits } from '../src/money';
import { fiatCurrency } from '../src/fiat';

const USD = fiatCurrency('USD');
const JPY = fiatCurrency('JPY');

function value<T>(parsed: { ok: true; value: T } | { ok: false; reason: string }): T {
  if (!parsed.ok) throw new Error(`unexpectedly refused: ${parsed.reason}`);
  return parsed.value;
}

describe('exact decimal arithmetic', () => {
  it('"0.10" + "0.20" is exactly 0.3, where binary floats are not', () => {
    const sum = value(parsePriceAmount('0.10', USD)).plus(value(parsePriceAmount('0.20', USD)));
    expect(0.1 + 0.2).not.toBe(0.3);
    expect(sum.eq('0.3')).toBe(true);
    expect(formatPlain(sum)).toBe('0.3');
    expect(formatFixed(sum, 2)).toBe('0.30');
  });

  it('keeps cents exact over many additions', () => {
    let total = new Decimal(0);
    for (let i = 0; i < 1000; i++) total = total.plus(value(parsePriceAmount('0.01', USD)));
    expect(formatPlain(total)).toBe('10');
  });

  it('multiplies and divides without drift', () => {
    const price = value(parsePriceAmount('19.99', USD));
    expect(formatPlain(price.times(3))).toBe('59.97');
    expect(formatPlain(price.times(3).div(3))).toBe('19.99');
  });
});

describe('parsePriceAmount', () => {
  it.each([
    ['10', '10'],
    ['10.5', '10.5'],
    ['10.50', '10.5'],
    ['0.01', '0.01'],
    ['0.10', '0.1'],
    ['999999999999.99', '999999999999.99'],
  ])('accepts %p for USD as %p', (input, canonical) => {
    expect(formatPlain(value(parsePriceAmount(input, USD)))).toBe(canonical);
  });

  it('accepts whole yen and refuses any fraction, even .0', () => {
    expect(formatPlain(value(parsePriceAmount('1500', JPY)))).toBe('1500');
    expect(parsePriceAmount('1500.5', JPY)).toEqual({ ok: false, reason: 'must be a whole number: JPY has no minor units' });
    expect(parsePriceAmount('1500.0', JPY)).toEqual({ ok: false, reason: 'must be a whole number: JPY has no minor units' });
  });

  it('refuses more decimals than the currency has, even trailing zeros', () => {
    expect(parsePriceAmount('10.001', USD)).toEqual({ ok: false, reason: 'must have at most 2 decimal places for USD' });
    expect(parsePriceAmount('10.500', USD)).toEqual({ ok: false, reason: 'must have at most 2 decimal places for USD' });
  });

  it.each([
    ['0', 'must be greater than 0'],
    ['0.00', 'must be greater than 0'],
    ['-5', 'must be greater than 0'],
    ['-0.01', 'must be greater than 0'],
    ['', 'must not be empty'],
    ['abc', expect.stringMatching(/^must be a plain decimal number/)],
    ['1e3', expect.stringMatching(/^must be a plain decimal number/)],
    ['+5', expect.stringMatching(/^must be a plain decimal number/)],
    [' 5', expect.stringMatching(/^must be a plain decimal number/)],
    ['5 ', expect.stringMatching(/^must be a plain decimal number/)],
    ['5.', expect.stringMatching(/^must be a plain decimal number/)],
    ['.5', expect.stringMatching(/^must be a plain decimal number/)],
    ['1,000', expect.stringMatching(/^must be a plain decimal number/)],
    ['1_000', expect.stringMatching(/^must be a plain decimal number/)],
    ['NaN', expect.stringMatching(/^must be a plain decimal number/)],
    ['Infinity', expect.stringMatching(/^must be a plain decimal number/)],
    ['0x10', expect.stringMatching(/^must be a plain decimal number/)],
    ['١٠', expect.stringMatching(/^must be a plain decimal number/)], // Arabic-Indic digits
    ['007', 'must not have leading zeros'],
    ['1000000000000', 'must have at most 12 digits before the decimal point'],
    ['9'.repeat(100), 'must be at most 64 characters'],
  ])('refuses %p', (input, reason) => {
    expect(parsePriceAmount(input, USD)).toEqual({ ok: false, reason });
  });

  it.each([10, null, undefined, true, {}, ['1']])('refuses the non-string %p', (input) => {
    expect(parsePriceAmount(input, USD)).toEqual({ ok: false, reason: 'must be a decimal string such as "10.50"' });
  });
});

describe('parseCryptoAmount', () => {
  it('accepts decimal strings and JSON numbers with at most 8 decimals', () => {
    expect(formatPlain(value(parseCryptoAmount('0.00000001')))).toBe('0.00000001');
    expect(formatPlain(value(parseCryptoAmount(0.1)))).toBe('0.1');
    expect(formatPlain(value(parseCryptoAmount(1e-8)))).toBe('0.00000001');
    expect(formatPlain(value(parseCryptoAmount(12345.6789)))).toBe('12345.6789');
  });

  it('refuses more decimals, non-positive, non-finite and wrong types', () => {
    expect(parseCryptoAmount('0.000000001')).toEqual({ ok: false, reason: 'must have at most 8 decimal places' });
    expect(parseCryptoAmount(1e-9)).toEqual({ ok: false, reason: 'must have at most 8 decimal places' });
    expect(parseCryptoAmount(0.1 + 0.2)).toEqual({ ok: false, reason: 'must have at most 8 decimal places' });
    expect(parseCryptoAmount(0)).toEqual({ ok: false, reason: 'must be greater than 0' });
    expect(parseCryptoAmount(-1)).toEqual({ ok: false, reason: 'must be greater than 0' });
    expect(parseCryptoAmount(Number.POSITIVE_INFINITY)).toEqual({ ok: false, reason: 'must be a finite number' });
    expect(parseCryptoAmount(Number.NaN)).toEqual({ ok: false, reason: 'must be a finite number' });
    expect(parseCryptoAmount(1e21)).toEqual({ ok: false, reason: 'must have at most 12 digits before the decimal point' });
    expect(parseCryptoAmount(true)).toEqual({ ok: false, reason: 'must be a number or a decimal string' });
    expect(parseCryptoAmount('1.5', 6)).toEqual(expect.objectContaining({ ok: true }));
    expect(parseCryptoAmount('1.1234567', 6)).toEqual({ ok: false, reason: 'must have at most 6 decimal places' });
  });

  it('refuses amounts a JSON number could not carry exactly', () => {
    expect(parseCryptoAmount('123456789012.12345678')).toEqual({
      ok: false,
      reason: 'has too many significant digits to be answered exactly as a JSON number (an IEEE 754 double: 15 digits always fit, some of 16 and 17 do)',
    });
  });
});

describe('formatting and edge conversion', () => {
  it('formats canonically: plain, no exponent, no trailing zeros, no -0', () => {
    expect(formatPlain(new Decimal('1e-8'))).toBe('0.00000001');
    expect(formatPlain(new Decimal('1e15'))).toBe('1000000000000000');
    expect(formatPlain(new Decimal('2.50'))).toBe('2.5');
    expect(formatPlain(new Decimal('-0'))).toBe('0');
  });

  it('formats at a fixed scale without ever rounding', () => {
    expect(formatFixed(new Decimal('19.9'), 2)).toBe('19.90');
    expect(formatFixed(new Decimal('1500'), 0)).toBe('1500');
    expect(formatFixed(new Decimal(0), 2)).toBe('0.00');
    expect(() => formatFixed(new Decimal('0.125'), 2)).toThrow(RangeError);
  });

  it('knows when a JSON number carries a decimal exactly', () => {
    expect(isExactJsonNumber(new Decimal('0.00095239'))).toBe(true);
    expect(isExactJsonNumber(new Decimal('999999999999.99'))).toBe(true);
    expect(isExactJsonNumber(new Decimal('0.1234567890123456789'))).toBe(false);
  });

  it('converts to and from base units', () => {
    expect(toBaseUnits(new Decimal('0.00095239'), 8)).toBe(95239n);
    expect(toBaseUnits(new Decimal('1.5'), 18)).toBe(1_500_000_000_000_000_000n);
    expect(formatPlain(fromBaseUnits(95239n, 8))).toBe('0.00095239');
    expect(() => toBaseUnits(new Decimal('0.0000001'), 6)).toThrow(RangeError);
  });

  it('parsePositiveDecimal allows the decimals it is given', () => {
    expect(formatPlain(value(parsePositiveDecimal('0.006900000000000001', 18)))).toBe('0.006900000000000001');
  });
});
