/**
 * Request bodies (gateway/src/exact-json.ts): a key repeated in one object is refused with 400
 * validation_failed naming it, never read as its last value (JSON.parse's choice), while bodies
 * without repeats — however their strings and nesting look — pass unchanged.
 */
import fc from 'fast-check';
import { parseJsonExactly, repeatedKeys, writtenDecimal } from '../src/exact-json';
import { HttpProblem } from '../src/problem';

function refusal(text: string): HttpProblem {
  try {
    parseJsonExactly(text);
  } catch (err) {
    if (err instanceof HttpProblem) return err;
    throw err;
  }
  throw new Error(`accepted: ${text}`);
}

test('a payout body naming its amount twice is refused, naming the field', () => {
  const problem = refusal('{"amount":"0.0001","currency":"BTC","address":"tb1qexample","amount":"5"}');
  expect(problem.status).toBe(400);
  expect(problem.code).toBe('validation_failed');
  expect(problem.errors).toEqual([{ field: 'amount', message: expect.stringContaining('appears more than once') }]);
});

test('repeats are found where they are: nested, in arrays, spelled with escapes', () => {
  expect(repeatedKeys('{"items":[{"a":1},{"a":1,"a":2}]}')).toEqual(['items.1.a']);
  expect(repeatedKeys('{"ab":1,"a\\u0062":2}')).toEqual(['ab']);
  expect(repeatedKeys('{"x":{"y":{"z":1,"z":2}},"x2":3,"x2":4}')).toEqual(['x.y.z', 'x2']);
  expect(repeatedKeys('[{"k":1},[],{"k":2,"k":3}]')).toEqual(['2.k']);
});

test('no repeat is seen where there is none: the same key in sibling objects, keys inside strings, values equal to keys', () => {
  for (const text of [
    '{"x":{"a":1},"y":{"a":1}}',
    '{"a":"{\\"a\\":1,","b":"]","c":"\\\\","d":["a","a"]}',
    '{"a":"a","b":"a","c":{"a":"b"}}',
    '{"priceAmount":"10.00","priceCurrency":"EUR","payCurrency":"BTC"}',
    '"just a string"',
    '[1,2,3]',
  ]) {
    expect(repeatedKeys(text)).toEqual([]);
    expect(parseJsonExactly(text)).toEqual(JSON.parse(text));
  }
});

test('any JSON that JSON.stringify writes (it never repeats a key) passes unchanged', () => {
  fc.assert(
    fc.property(fc.jsonValue(), (value) => {
      const text = JSON.stringify(value);
      expect(repeatedKeys(text)).toEqual([]);
    }),
    { numRuns: 500 },
  );
});

test('a key repeated anywhere in a random object is found', () => {
  fc.assert(
    fc.property(fc.dictionary(fc.string(), fc.jsonValue(), { minKeys: 1 }), fc.jsonValue(), (object, extra) => {
      const text = JSON.stringify(object);
      const key = Object.keys(object)[0]!;
      const repeated = `${text.slice(0, -1)},${JSON.stringify(key)}:${JSON.stringify(extra)}}`;
      expect(repeatedKeys(repeated)).toContain(key);
    }),
    { numRuns: 300 },
  );
});

test('a number keeps the digits its client wrote: "at most 8 decimals" judges 1.100000000 as nine, as it would the string (an outside review)', () => {
  const body = parseJsonExactly('{"amount":1.100000000,"tiny":1.1e-7,"whole":12,"nested":{"amountReceived":0.000100000000},"list":[2.50]}') as {
    nested: object;
    list: object;
  };
  expect(writtenDecimal(body, 'amount')).toBe('1.100000000');
  expect(writtenDecimal(body, 'tiny')).toBe('0.00000011');
  expect(writtenDecimal(body, 'whole')).toBe('12');
  expect(writtenDecimal(body.nested, 'amountReceived')).toBe('0.000100000000');
  expect(writtenDecimal(body.list, '0')).toBe('2.50');
  // A value that never went through the parser: the decimal of its value.
  expect(writtenDecimal({ amount: 1.1 }, 'amount')).toBe('1.1');
  expect(() => writtenDecimal(body, 'missing')).toThrow();
});
