/**
 * JSON Schemas (TypeBox) shared by routes. They validate requests at the edge and are the source
 * of the OpenAPI document, so a field is described once.
 */
import { Type, type StringOptions } from '@sinclair/typebox';

/** What each input pattern means, in the words a refusal says (problem.ts), never "must match pattern …". */
const PATTERN_WORDS = new Map<string, string>();

/** A string schema with a pattern, and the words a value that does not match it is refused with. */
export function patternString(pattern: string, words: string, options: Omit<StringOptions, 'pattern'> = {}) {
  PATTERN_WORDS.set(pattern, words);
  return Type.String({ ...options, pattern });
}

export function wordsOfPattern(pattern: string): string | undefined {
  return PATTERN_WORDS.get(pattern);
}

export const Uuid = Type.String({ format: 'uuid', description: 'A UUID' });
export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601 UTC timestamp' });
export const EnvironmentName = Type.Union([Type.Literal('live'), Type.Literal('sandbox')]);

export const IdParams = Type.Object({ id: Uuid }, { additionalProperties: false });

export const ProblemSchema = Type.Object(
  {
    type: Type.String(),
    title: Type.String(),
    status: Type.Integer(),
    detail: Type.String(),
    code: Type.String({ description: 'Stable snake_case error code' }),
    requestId: Type.String(),
    errors: Type.Optional(Type.Array(Type.Object({ field: Type.String(), message: Type.String() }))),
  },
  { $id: 'Problem', description: 'RFC 9457 problem details (application/problem+json)' },
);

/**
 * An integer of the query string: declared an integer (a typed client passes a number), written in
 * plain digits on the wire — only those become a number before validation (queryIntegers,
 * docs/http-edge.md#query-integers); "1e1", "0x10", " 5" stay strings and are refused.
 * 1 to 100 exactly: a larger page size is refused (400), never cut down to 100 silently.
 */
export const LimitParam = Type.Optional(Type.Integer({ minimum: 1, maximum: 100, description: 'Page size, 1 to 100 (default 20)' }));
export const CursorParam = Type.Optional(Type.String({ maxLength: 512, description: 'Opaque cursor from nextCursor' }));

/** The page size of a schema-validated LimitParam (1 to 100), 20 when absent. */
export function parseLimit(limit: number | undefined): number {
  return limit ?? 20;
}

const PLAIN_DIGITS = /^(0|[1-9]\d{0,14})$/;

/**
 * The query string's integers, parsed once before validation: a property the route's querystring
 * schema declares `integer`, written in plain digits (at most 15: every one an exact double),
 * becomes that number; anything else is left as it came, for the schema to refuse.
 */
export function queryIntegers(schema: unknown, query: unknown): void {
  if (typeof schema !== 'object' || schema === null || typeof query !== 'object' || query === null) return;
  const properties = (schema as { properties?: Record<string, { type?: unknown }> }).properties;
  if (!properties) return;
  const values = query as Record<string, unknown>;
  for (const [name, property] of Object.entries(properties)) {
    const value = values[name];
    if (property.type === 'integer' && typeof value === 'string' && PLAIN_DIGITS.test(value)) values[name] = Number(value);
  }
}

/** Documentation metadata on routes, read when the OpenAPI document is generated. */
declare module 'fastify' {
  interface FastifySchema {
    tags?: string[];
    summary?: string;
    description?: string;
    security?: Array<Record<string, string[]>>;
    /** Operational routes (health) are left out of the public document. */
    hide?: boolean;
  }
}
