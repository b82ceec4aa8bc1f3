/**
 * Request bodies (gateway/src/exact-json.ts): a key repeated in one object is refused with 400
 * validation_failed naming it, never read as its last value (JSON.parse's choice), while bodies
 * without repeats — however their strings and nesting look — pass unchanged.
 */
import fc from 'fast-check';
import { parseJsonExactly, repeatedKeys, writtenDecimal } from '../src/exact-json';
import { HttpProblem, MAX_PROBLEM_ERRORS, problemOf } from '../src/problem';

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

test('a body of 64 KiB repeating one key under a 32,000-character key costs a bounded answer (docs/http-edge.md#bounded-answers)', () => {
  const inner = Array.from({ length: 5_500 }, () => '"a":0').join(',');
  const text = `{"${'A'.repeat(32_000)}":{${inner}}}`;
  expect(text.length).toBeLessThanOrEqual(65_536);
  const started = process.hrtime.bigint();
  const problem = refusal(text);
  const ms = Number(process.hrtime.bigint() - started) / 1e6;
  expect(problem.errors).toHaveLength(MAX_PROBLEM_ERRORS);
  for (const { field } of problem.errors) expect(field).toBe(`${'A'.repeat(100)}…`);
  expect(JSON.stringify(problem.errors).length).toBeLessThan(20_000);
  // It took 14 s before; a generous bound on a slow host.
  expect(ms).toBeLessThan(1_000);
});

test('thousands of inexact numbers or broken strings are named up to the bound, the first ones first', () => {
  const numbers = `[${Array.from({ length: 6_000 }, () => '1e400').join(',')}]`;
  const byNumbers = refusal(numbers).errors;
  expect(byNumbers).toHaveLength(MAX_PROBLEM_ERRORS);
  expect(byNumbers.slice(0, 2).map((e) => e.field)).toEqual(['0', '1']);
  const strings = `{"items":[${Array.from({ length: 6_000 }, () => '"\\ud800"').join(',')}]}`;
  expect(refusal(strings).errors.map((e) => e.field).slice(0, 2)).toEqual(['items.0', 'items.1']);
  expect(refusal(strings).errors).toHaveLength(MAX_PROBLEM_ERRORS);
});

test('every problem answer is bounded the same way, whatever named its problems (a schema with allErrors, a service)', () => {
  const errors = Array.from({ length: 8_000 }, (_, i) => ({ field: `${'k'.repeat(300)}${i}`, message: 'is not a field of this request' }));
  const problem = problemOf(400, 'validation_failed', 'the request body is invalid', 'req-1', errors);
  expect(problem.errors).toHaveLength(MAX_PROBLEM_ERRORS);
  expect(problem.errors![0]).toEqual({ field: `${'k'.repeat(100)}…`, message: 'is not a field of this request' });
  expect(problemOf(400, 'validation_failed', 'x', 'req-2', [{ field: 'amount', message: 'is required' }]).errors).toEqual([{ field: 'amount', message: 'is required' }]);
});
