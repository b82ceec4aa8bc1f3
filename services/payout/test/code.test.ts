/** The verification code: format, randomness, salted hashing bound to its payout, constant-time check. */
import { randomUUID } from 'node:crypto';
import { codeMatches, hashCode, isWellFormedCode, issueCode } from '../src/domain/code';

test('codes are 6 digits, leading zeros kept, spread over the whole range', () => {
  const codes = Array.from({ length: 2000 }, () => issueCode(randomUUID()).code);
  for (const code of codes) expect(code).toMatch(/^\d{6}$/);
  expect(new Set(codes).size).toBeGreaterThan(1980);
  // Leading digits 0…9 all occur (a code is not a number above 100000).
  expect(new Set(codes.map((c) => c[0])).size).toBe(10);
});

test('the stored hash is salted per payout and matches only that payout and that code', () => {
  const payoutId = randomUUID();
  const issued = issueCode(payoutId);
  expect(issued.salt).toHaveLength(32);
  expect(issued.hash).toHaveLength(32);
  expect(issued.hash.toString('hex')).not.toContain(issued.code);
  expect(codeMatches(payoutId, issued.code, issued.salt, issued.hash)).toBe(true);
  expect(codeMatches(payoutId.toUpperCase(), issued.code, issued.salt, issued.hash)).toBe(true);
  expect(codeMatches(randomUUID(), issued.code, issued.salt, issued.hash)).toBe(false);
  const other = String((Number(issued.code) + 1) % 1e6).padStart(6, '0');
  expect(codeMatches(payoutId, other, issued.salt, issued.hash)).toBe(false);
  // The same code for another payout (or with another salt) hashes differently.
  const again = issueCode(payoutId);
  expect(hashCode(payoutId, issued.code, again.salt).equals(issued.hash)).toBe(false);
  // A truncated stored hash never matches (and never throws).
  expect(codeMatches(payoutId, issued.code, issued.salt, issued.hash.subarray(0, 16))).toBe(false);
});

test.each([
  ['123456', true],
  ['000000', true],
  ['12345', false],
  ['1234567', false],
  ['12345a', false],
  ['１２３４５６', false],
  [123456, false],
  ['', false],
])('isWellFormedCode(%j) = %s', (code, expected) => {
  expect(isWellFormedCode(code)).toBe(expected);
});
