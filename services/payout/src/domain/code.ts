/**
 * The payout verification code (DESIGN.md §5): 6 digits from a CSPRNG, emailed in plain once, and
 * stored only as HMAC-SHA256 keyed with a fresh 32-byte salt of its own payout over
 * "<payout id>:<code>" — a stored hash says nothing about any other payout's code, and a code is
 * bound to its payout. Checking compares the digests in constant time.
 *
 * A 6-digit code has only 10^6 values, so the hash protects against casual disclosure (a database
 * dump read after the fact, logs), not against a brute force of a stolen row; what keeps guessing
 * out is the 5-attempt limit and the 15-minute lifetime. The plain code is never logged.
 */
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

export const CODE_DIGITS = 6;
export const CODE_MAX_ATTEMPTS = 5;
export const DEFAULT_CODE_TTL_MS = 15 * 60_000;

const CODE_PATTERN = /^[0-9]{6}$/;

export interface IssuedCode {
  /** The plain code: goes into the payout.verification_code_issued event, nowhere else. */
  code: string;
  salt: Buffer;
  hash: Buffer;
}

/** A uniformly random 6-digit code (leading zeros kept), its salt and its hash. */
export function issueCode(payoutId: string): IssuedCode {
  const code = String(randomInt(0, 10 ** CODE_DIGITS)).padStart(CODE_DIGITS, '0');
  const salt = randomBytes(32);
  return { code, salt, hash: hashCode(payoutId, code, salt) };
}

export function hashCode(payoutId: string, code: string, salt: Uint8Array): Buffer {
  return createHmac('sha256', salt).update(`${payoutId.toLowerCase()}:${code}`, 'utf8').digest();
}

/** Whether `code` is the payout's code; constant time in the code's value. */
export function codeMatches(payoutId: string, code: string, salt: Uint8Array, expectedHash: Uint8Array): boolean {
  const actual = hashCode(payoutId, code, salt);
  return actual.length === expectedHash.length && timingSafeEqual(actual, expectedHash);
}

/** A well-formed code: exactly 6 ASCII digits. A malformed one never costs an attempt. */
export function isWellFormedCode(code: unknown): code is string {
  return typeof code === 'string' && CODE_PATTERN.test(code);
}
