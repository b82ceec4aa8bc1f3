import fc from 'fast-check';
import { API_KEY_PATTERN, API_KEY_PREFIXES, BASE62_ALPHABET, apiKeyDisplayPrefix, buildApiKey, generateApiKey, hashApiKey, issueApiKey, parseApiKey, randomBase62 } from '@coinvoice/domain/credentials/api-keys';
import type { ProjectEnvironment } from '@coinvoice/domain/environment';

const base62Char = fc.constantFrom(...BASE62_ALPHABET);
const randomPartArb = fc.string({ unit: base62Char, minLength: 34, maxLength: 34 });
const environmentArb = fc.constantFrom<ProjectEnvironment>('sandbox', 'live');
const keyArb = fc.tuple(environmentArb, randomPartArb).map(([environment, randomPart]) => buildApiKey(environment, randomPart));

function substitute(text: string, index: number, char: string): string {
  return text.slice(0, index) + char + text.slice(index + 1);
}

function swapAdjacent(text: string, index: number): string {
  return text.slice(0, index) + text.charAt(index + 1) + text.charAt(index) + text.slice(index + 2);
}

describe('API key generation and parsing', () => {
  test.each<[ProjectEnvironment, RegExp]>([
    ['sandbox', /^SBX_[0-9A-Za-z]{40}$/],
    ['live', /^LIVE_[0-9A-Za-z]{40}$/],
  ])('a generated %s key has the right prefix and shape and parses back', (environment, shape) => {
    for (let i = 0; i < 200; i++) {
      const key = generateApiKey(environment);
      expect(key).toMatch(shape);
      expect(parseApiKey(key)).toEqual({ wellFormed: true, environment });
    }
  });

  test('generated keys are unique', () => {
    const keys = new Set(Array.from({ length: 2000 }, () => generateApiKey('sandbox')));
    expect(keys.size).toBe(2000);
  });

  test('random base62 is uniform (no modulo bias towards the first 8 characters)', () => {
    const counts = new Map<string, number>();
    const sample = randomBase62(124_000);
    for (const char of sample) counts.set(char, (counts.get(char) ?? 0) + 1);
    // Expected 2000 per character, standard deviation ~44; modulo bias would give the first 8 about 2500.
    expect(counts.size).toBe(62);
    for (const count of counts.values()) {
      expect(count).toBeGreaterThan(1750);
      expect(count).toBeLessThan(2250);
    }
  });

  test('buildApiKey is deterministic and refuses a bad random part', () => {
    const randomPart = 'a'.repeat(34);
    expect(buildApiKey('live', randomPart)).toBe(buildApiKey('live', randomPart));
    expect(() => buildApiKey('live', 'a'.repeat(33))).toThrow(RangeError);
    expect(() => buildApiKey('live', `${'a'.repeat(33)}-`)).toThrow(RangeError);
  });

  test('issueApiKey returns the key with its storable hash and display prefix', () => {
    const issued = issueApiKey('live');
    expect(issued.hash).toBe(hashApiKey(issued.key));
    expect(issued.displayPrefix).toBe(apiKeyDisplayPrefix(issued.key));
    expect(issued.hash).not.toContain(issued.key.slice(5));
  });
});

describe('API key checksum', () => {
  test('every single-character substitution of some keys is refused (exhaustive)', () => {
    const candidates = `${BASE62_ALPHABET}_-+/= .`;
    for (const key of [generateApiKey('sandbox'), generateApiKey('live'), buildApiKey('sandbox', '0'.repeat(34))]) {
      for (let index = 0; index < key.length; index++) {
        for (const char of candidates) {
          if (char === key[index]) continue;
          expect(parseApiKey(substitute(key, index, char))).toMatchObject({ wellFormed: false });
        }
      }
    }
  });

  test('ANY single-character substitution in a valid key fails (property)', () => {
    fc.assert(
      fc.property(keyArb, fc.nat(), base62Char, (key, position, replacement) => {
        const index = position % key.length;
        fc.pre(key[index] !== replacement);
        const typo = substitute(key, index, replacement);
        expect(parseApiKey(typo)).toMatchObject({ wellFormed: false });
      }),
      { numRuns: 5000 },
    );
  });

  test('ANY adjacent transposition of unequal characters in a valid key fails (property)', () => {
    fc.assert(
      fc.property(keyArb, fc.nat(), (key, position) => {
        const index = position % (key.length - 1);
        fc.pre(key[index] !== key[index + 1]);
        expect(parseApiKey(swapAdjacent(key, index))).toMatchObject({ wellFormed: false });
      }),
      { numRuns: 5000 },
    );
  });

  test('the checksum scheme is pinned: changing it would invalidate every key ever issued', () => {
    const key = 'SBX_abcdefghijABCDEFGHIJ0123456789wxyzJukBwQ';
    expect(buildApiKey('sandbox', 'abcdefghijABCDEFGHIJ0123456789wxyz')).toBe(key);
    expect(parseApiKey(key)).toEqual({ wellFormed: true, environment: 'sandbox' });
  });

  test('a typo inside the body is reported as a bad checksum', () => {
    const key = buildApiKey('sandbox', 'abcdefghijABCDEFGHIJ0123456789wxyz');
    const typo = substitute(key, 10, key[10] === 'Q' ? 'R' : 'Q');
    expect(parseApiKey(typo)).toEqual({ wellFormed: false, reason: 'bad_checksum' });
  });

  test('the checksum binds the prefix: a sandbox body under LIVE_ is refused', () => {
    const sandboxKey = buildApiKey('sandbox', 'abcdefghijABCDEFGHIJ0123456789wxyz');
    const relabelled = API_KEY_PREFIXES.live + sandboxKey.slice(API_KEY_PREFIXES.sandbox.length);
    expect(parseApiKey(relabelled)).toEqual({ wellFormed: false, reason: 'bad_checksum' });
  });
});

describe('malformed keys are refused with a reason', () => {
  const valid = buildApiKey('sandbox', 'abcdefghijABCDEFGHIJ0123456789wxyz');
  const body = valid.slice(4);

  test.each<[string, unknown, string]>([
    ['undefined', undefined, 'missing'],
    ['null', null, 'missing'],
    ['empty', '', 'missing'],
    ['a number', 12345, 'missing'],
    ['an array (repeated header)', [valid, valid], 'missing'],
    ['lowercase prefix', `sbx_${body}`, 'unknown_prefix'],
    ['another vendor prefix', `sk_live_${body}`, 'unknown_prefix'],
    ['no prefix', body, 'unknown_prefix'],
    ['TEST_ prefix', `TEST_${body}`, 'unknown_prefix'],
    ['prefix only', 'SBX_', 'wrong_length'],
    ['one character short', valid.slice(0, -1), 'wrong_length'],
    ['one character too many', `${valid}a`, 'wrong_length'],
    ['surrounding whitespace', ` ${valid}`, 'unknown_prefix'],
    ['trailing newline', `${valid.slice(0, -1)}\n`, 'invalid_character'],
    ['non-base62 character', substitute(valid, 20, '-'), 'invalid_character'],
    ['non-ASCII lookalike', substitute(valid, 20, 'а'), 'invalid_character'],
  ])('%s', (_label, raw, reason) => {
    expect(parseApiKey(raw)).toEqual({ wellFormed: false, reason });
  });
});

describe('what is stored', () => {
  test('the hash is the stable SHA-256 hex of the whole key', () => {
    // printf %s 'SBX_abcdefghijABCDEFGHIJ0123456789wxyzJukBwQ' | sha256sum
    const key = 'SBX_abcdefghijABCDEFGHIJ0123456789wxyzJukBwQ';
    expect(hashApiKey(key)).toBe('dfa55007b9fea1f3ab7488099cc4b0457bb4b2ad01ce9e0f85022fc713da63bf');
    expect(hashApiKey(key)).toBe(hashApiKey(key));
    expect(hashApiKey(key)).toMatch(/^[0-9a-f]{64}$/);
    expect(hashApiKey(generateApiKey('sandbox'))).not.toBe(hashApiKey(generateApiKey('sandbox')));
  });

  test('the display prefix is the environment prefix plus 8 characters, a literal prefix of the key', () => {
    const sandboxKey = generateApiKey('sandbox');
    const liveKey = generateApiKey('live');
    expect(apiKeyDisplayPrefix(sandboxKey)).toMatch(/^SBX_[0-9A-Za-z]{8}$/);
    expect(apiKeyDisplayPrefix(liveKey)).toMatch(/^LIVE_[0-9A-Za-z]{8}$/);
    expect(sandboxKey.startsWith(apiKeyDisplayPrefix(sandboxKey))).toBe(true);
    expect(() => apiKeyDisplayPrefix('nope')).toThrow(RangeError);
  });

  test('API_KEY_PATTERN finds keys in text for redaction', () => {
    const key = generateApiKey('live');
    expect(API_KEY_PATTERN.test(`request with x-api-key=${key} failed`)).toBe(true);
    expect(API_KEY_PATTERN.test('SBX_short')).toBe(false);
  });
});
