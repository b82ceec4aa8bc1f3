/**
 * Request validation shared by the services: each check answers a `Check` (the value or a reason),
 * `RequestFields` collects the reasons under the PUBLIC JSON field names, and `requireValid` turns
 * the result into the value or a validation_failed error the gateway maps to problem+json.
 */
import { errors, type Violation } from './errors';

export type Validated<T> = { ok: true; value: T } | { ok: false; violations: Violation[] };

/** One field's outcome: the value, or a reason fit for a violation message. */
export type Check<T> = { ok: true; value: T } | { ok: false; reason: string };
export const pass = <T>(value: T): Check<T> => ({ ok: true, value });
export const fail = <T = never>(reason: string): Check<T> => ({ ok: false, reason });

/**
 * Unicode bidirectional embedding, override and isolate controls (U+202A–U+202E, U+2066–U+2069).
 * Text shown to someone else (names, notes, order descriptions) must not carry them: an RLO
 * (U+202E) makes "Shop\u202Etxt.exe" display as "Shopexe.txt", so a name or a note could pass for
 * another one in a dashboard, the checkout page or an operator's queue.
 */
const BIDI_CONTROLS = /[\u202A-\u202E\u2066-\u2069]/;

/** The reason a displayed text is refused for bidi controls, or undefined when it has none. */
export function bidiControlViolation(text: string): string | undefined {
  return BIDI_CONTROLS.test(text) ? 'must not contain bidirectional control characters (U+202A–U+202E, U+2066–U+2069)' : undefined;
}

/** Collects violations field by field; `result` builds the value only when there were none. */
export class RequestFields {
  readonly violations: Violation[] = [];

  take<T>(field: string, check: Check<T>): T | undefined {
    if (check.ok) return check.value;
    this.violations.push({ field, message: check.reason });
    return undefined;
  }

  result<T>(build: () => T): Validated<T> {
    return this.violations.length > 0 ? { ok: false, violations: this.violations } : { ok: true, value: build() };
  }
}

/** A validation_failed error whose message lists every violation. */
export function invalidRequest(violations: Violation[]) {
  const summary = violations.map((v) => `${v.field} ${v.message}`).join('; ');
  return errors.validation(violations, `the request is invalid: ${summary}`);
}

/** Throws validation_failed with the violations, or returns the value. */
export function requireValid<T>(result: Validated<T>): T {
  if (result.ok) return result.value;
  throw invalidRequest(result.violations);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export function isUuid(value: unknown): value is string {
  return typeof value === 'string' && UUID.test(value);
}

/** A required UUID, answered in lower case. */
export function checkUuid(raw: unknown): Check<string> {
  if (raw === undefined || raw === null || raw === '') return fail('is required');
  return isUuid(raw) ? pass(raw.toLowerCase()) : fail('must be a UUID');
}

/** Undefined passes (no filter); anything else must be one of `allowed`. */
export function checkOptionalOneOf<T extends string>(raw: unknown, allowed: readonly T[]): Check<T | undefined> {
  if (raw === undefined) return pass(undefined);
  return (allowed as readonly unknown[]).includes(raw) ? pass(raw as T) : fail(`must be one of ${allowed.join(', ')}`);
}

/** Length in characters as people count them (code points), not UTF-16 units. */
export function codePoints(text: string): number {
  let n = 0;
  for (const _ of text) n += 1;
  return n;
}

/** A request made only of required UUIDs (projectId, invoiceId, …), each checked under its own name. */
export function validateUuidFields<Name extends string>(input: Partial<Record<Name, unknown>>, names: readonly Name[]): Validated<Record<Name, string>> {
  const fields = new RequestFields();
  const ids = names.map((name) => [name, fields.take(name, checkUuid(input[name]))] as const);
  return fields.result(() => Object.fromEntries(ids) as Record<Name, string>);
}
