/**
 * The payout verification code (docs/architecture.md#payouts): the shared one-time code (runtime credentials),
 * bound to its payout id, 5 attempts, 15 minutes. It leaves the payout service only inside the
 * notifier call that emails it (never an outbox row, a stream message or a log line).
 */
import { hashOneTimeCode, isWellFormedOneTimeCode, issueOneTimeCode, ONE_TIME_CODE_DIGITS, oneTimeCodeMatches, type IssuedOneTimeCode } from '@coinvoice/domain/credentials/one-time-code';

export const CODE_DIGITS = ONE_TIME_CODE_DIGITS;
export const CODE_MAX_ATTEMPTS = 5;
export const DEFAULT_CODE_TTL_MS = 15 * 60_000;

export type IssuedCode = IssuedOneTimeCode;
export const issueCode = issueOneTimeCode;
export const hashCode = hashOneTimeCode;
export const codeMatches = oneTimeCodeMatches;
export const isWellFormedCode = isWellFormedOneTimeCode;
