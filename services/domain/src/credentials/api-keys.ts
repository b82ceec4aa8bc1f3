/**
 * API keys: `SBX_` (sandbox project) or `LIVE_` (live project) followed by 40 base62 characters.
 *
 *   SBX_ | 34 random | 4 hash tag | 2 check digits
 *
 * - 34 random characters: uniform base62 from the CSPRNG (~202 bits).
 * - Hash tag: SHA-256 of prefix + random part, reduced to 4 base62 digits. It binds the key to its
 *   prefix and makes arbitrary corruption fail with probability ~1 - 62^-4.
 * - Check digits: a weighted sum modulo the prime 3833 over the 38 characters before them, which
 *   makes a single-character substitution or a transposition (adjacent or not) fail with CERTAINTY,
 *   not just with high probability as a truncated hash alone would (proof at `checkDigits`).
 *
 * Together the 6 checksum characters carry ~35.7 bits, as much as 6 base62 hash characters, so a
 * random string passes with probability ~1.8e-11. A secret scanner or the gateway therefore rejects
 * a mistyped key without a database lookup. Only `hashApiKey(key)` and `apiKeyDisplayPrefix(key)`
 * are ever stored; the plain key is shown once.
 */
import { createHash, hash, randomBytes } from 'node:crypto';
import type { ProjectEnvironment } from '../environment';

export const BASE62_ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz';

export const API_KEY_PREFIXES: Readonly<Record<ProjectEnvironment, string>> = { sandbox: 'SBX_', live: 'LIVE_' };

/** Base62 characters after the prefix. */
export const API_KEY_BODY_LENGTH = 40;
export const API_KEY_RANDOM_LENGTH = 34;
const HASH_TAG_LENGTH = 4;
const CHECK_DIGITS_LENGTH = 2;
/** Random characters shown after the prefix in listings (~48 bits of the ~202, so nothing usable). */
const DISPLAY_RANDOM_LENGTH = 8;

/** Finds keys in text (log redaction, secret scanning). Well-formedness still needs `parseApiKey`. */
export const API_KEY_PATTERN = /\b(?:SBX|LIVE)_[0-9A-Za-z]{40}\b/;

export type ApiKeyRejection =
  /** Not a string, or empty. */
  | 'missing'
  /** Neither `SBX_` nor `LIVE_`. */
  | 'unknown_prefix'
  /** Not exactly 40 characters after the prefix. */
  | 'wrong_length'
  /** A character outside base62 after the prefix. */
  | 'invalid_character'
  /** Well-shaped but the checksum does not match: a typo, truncation or made-up key. */
  | 'bad_checksum';

export type ParsedApiKey =
  | { wellFormed: true; environment: ProjectEnvironment }
  | { wellFormed: false; reason: ApiKeyRejection };

/** A freshly generated key with what may be stored about it. */
export interface IssuedApiKey {
  /** The plain key: returned to the merchant once, never stored or logged. */
  key: string;
  /** `hashApiKey(key)`: the lookup column. */
  hash: string;
  /** `apiKeyDisplayPrefix(key)`: shown in listings. */
  displayPrefix: string;
}

const BASE62_VALUE = new Map<string, number>([...BASE62_ALPHABET].map((char, value) => [char, value]));

/** Uniform random base62 string: rejection sampling (bytes >= 248 = 4 * 62 are discarded) avoids modulo bias. */
export function randomBase62(length: number): string {
  let out = '';
  while (out.length < length) {
    // 25% headroom covers the ~3% rejected bytes in almost every round.
    for (const byte of randomBytes(Math.ceil((length - out.length) * 1.25) + 4)) {
      if (byte >= 248) continue;
      out += BASE62_ALPHABET[byte % 62];
      if (out.length === length) break;
    }
  }
  return out;
}

/** A new crypto-random key for a project of `environment`. */
export function generateApiKey(environment: ProjectEnvironment): string {
  return buildApiKey(environment, randomBase62(API_KEY_RANDOM_LENGTH));
}

/** A new key plus its storable hash and display prefix. */
export function issueApiKey(environment: ProjectEnvironment): IssuedApiKey {
  const key = generateApiKey(environment);
  return { key, hash: hashApiKey(key), displayPrefix: apiKeyDisplayPrefix(key) };
}

/**
 * The key whose random part is `randomPart` (34 base62 characters), with its checksum appended.
 * Exposed for tests and fixtures; real keys come from `generateApiKey`.
 */
export function buildApiKey(environment: ProjectEnvironment, randomPart: string): string {
  if (randomPart.length !== API_KEY_RANDOM_LENGTH || !isBase62(randomPart)) {
    throw new RangeError(`an API key's random part is ${API_KEY_RANDOM_LENGTH} base62 characters`);
  }
  const prefix = API_KEY_PREFIXES[environment];
  return prefix + randomPart + checksumOf(prefix, randomPart);
}

/** Checks a presented key's shape and checksum; no database involved. */
export function parseApiKey(raw: unknown): ParsedApiKey {
  if (typeof raw !== 'string' || raw.length === 0) return rejected('missing');
  const environment = environmentOfPrefix(raw);
  if (!environment) return rejected('unknown_prefix');
  const prefix = API_KEY_PREFIXES[environment];
  const body = raw.slice(prefix.length);
  if (body.length !== API_KEY_BODY_LENGTH) return rejected('wrong_length');
  if (!isBase62(body)) return rejected('invalid_character');
  const randomPart = body.slice(0, API_KEY_RANDOM_LENGTH);
  if (body.slice(API_KEY_RANDOM_LENGTH) !== checksumOf(prefix, randomPart)) return rejected('bad_checksum');
  return { wellFormed: true, environment };
}

/** SHA-256 of the whole key as lowercase hex: what the database stores and looks keys up by. */
export function hashApiKey(key: string): string {
  return hash('sha256', key, 'hex');
}

/** The environment prefix and the first 8 random characters, e.g. `SBX_a1B2c3D4`; a literal prefix of the key. */
export function apiKeyDisplayPrefix(key: string): string {
  const environment = environmentOfPrefix(key);
  if (!environment) throw new RangeError('not an API key');
  return key.slice(0, API_KEY_PREFIXES[environment].length + DISPLAY_RANDOM_LENGTH);
}

function rejected(reason: ApiKeyRejection): ParsedApiKey {
  return { wellFormed: false, reason };
}

function environmentOfPrefix(raw: string): ProjectEnvironment | undefined {
  if (raw.startsWith(API_KEY_PREFIXES.sandbox)) return 'sandbox';
  if (raw.startsWith(API_KEY_PREFIXES.live)) return 'live';
  return undefined;
}

function isBase62(text: string): boolean {
  return /^[0-9A-Za-z]*$/.test(text);
}

/** The 6 checksum characters: the hash tag, then the check digits over random part + tag. */
function checksumOf(prefix: string, randomPart: string): string {
  const tag = hashTag(prefix, randomPart);
  return tag + checkDigits(randomPart + tag);
}

function hashTag(prefix: string, randomPart: string): string {
  const digest = createHash('sha256').update(prefix + randomPart, 'utf8').digest();
  // 48 bits reduced mod 62^4: the bias (< 2^-24) is irrelevant for an integrity tag.
  return toBase62(digest.readUIntBE(0, 6) % 62 ** HASH_TAG_LENGTH, HASH_TAG_LENGTH);
}

/** Prime modulus of the check digits: the largest prime that two base62 digits (< 3844) can hold. */
const CHECK_MODULUS = 3833;

/**
 * Two check digits c, d for the 38 characters `head` such that, over the whole 40-character body
 * b_0..b_39 (values 0..61), W = sum(w_i * b_i) ≡ 0 (mod 3833) with weights
 * w = 2, 3, …, 39 for the head, then 62 and 1 for c and d (so 62c + d = V, V ≡ -sum of head).
 *
 * Why every single-character typo is caught: all weights are distinct and non-zero, and every
 * difference of two weights and of two character values is below the prime 3833 in magnitude.
 * - Substituting b_i by b_i' changes W by w_i * (b_i' - b_i): a product of two non-zero numbers
 *   each smaller than the prime, hence non-zero mod 3833.
 * - Swapping unequal b_i, b_j changes W by (w_i - w_j) * (b_j - b_i): likewise non-zero.
 * Either way W ≠ 0 afterwards, while every key `buildApiKey` produces has W = 0, so the
 * recomputed checksum cannot match.
 */
function checkDigits(head: string): string {
  let sum = 0;
  for (let i = 0; i < head.length; i++) {
    sum += (i + 2) * base62Value(head[i]);
  }
  return toBase62((CHECK_MODULUS - (sum % CHECK_MODULUS)) % CHECK_MODULUS, CHECK_DIGITS_LENGTH);
}

function base62Value(char: string | undefined): number {
  const value = char === undefined ? undefined : BASE62_VALUE.get(char);
  if (value === undefined) throw new RangeError('not a base62 character');
  return value;
}

/** Fixed-width big-endian base62. */
function toBase62(value: number, width: number): string {
  let out = '';
  let rest = value;
  for (let i = 0; i < width; i++) {
    out = BASE62_ALPHABET[rest % 62] + out;
    rest = Math.floor(rest / 62);
  }
  return out;
}
