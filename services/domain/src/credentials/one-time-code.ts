/**
 * Short numeric one-time codes sent by email (payout verification, email verification): digits
 * from a CSPRNG, stored only as HMAC-SHA256 keyed with a fresh 32-byte salt over
 * "<subject id>:<code>", so a stored hash says nothing about another subject's code and a code is
 * bound to its subject. Checking compares digests in constant time.
 *
 * A 6-digit code has only 10^6 values: the hash protects against casual disclosure (a dump read
 * after the fact), not a brute force of a stolen row; attempt limits, rate limits and lifetimes
 * keep guessing out. The plain code is never logged or stored.
 */
import { createHmac, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';

export const ONE_TIME_CODE_DIGITS = 6;

const CODE_PATTERN = /^[0-9]{6}$/;

export interface IssuedOneTimeCode {
  /** The plain code: goes into the email, nowhere else. */
  code: string;
  salt: Buffer;
  hash: Buffer;
}

/** A uniformly random 6-digit code (leading zeros kept), its salt and its hash. */
export function issueOneTimeCode(subjectId: string): IssuedOneTimeCode {
  const code = String(randomInt(0, 10 ** ONE_TIME_CODE_DIGITS)).padStart(ONE_TIME_CODE_DIGITS, '0');
  const salt = randomBytes(32);
  return { code, salt, hash: hashOneTimeCode(subjectId, code, salt) };
}

export function hashOneTimeCode(subjectId: string, code: string, salt: Uint8Array): Buffer {
  return createHmac('sha256', salt).update(`${subjectId.toLowerCase()}:${code}`, 'utf8').digest();
}

/** Whether `code` is the subject's code; constant time in the code's value. */
export function oneTimeCodeMatches(subjectId: string, code: string, salt: Uint8Array, expectedHash: Uint8Array): boolean {
  const actual = hashOneTimeCode(subjectId, code, salt);
  return actual.length === expectedHash.length && timingSafeEqual(actual, expectedHash);
}

/** A well-formed code: exactly 6 ASCII digits. A malformed one never costs an attempt. */
export function isWellFormedOneTimeCode(code: unknown): code is string {
  return typeof code === 'string' && CODE_PATTERN.test(code);
}
