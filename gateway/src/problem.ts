/**
 * Every error the gateway answers is RFC 9457 application/problem+json:
 * {type, title, status, detail, code, requestId, errors?: [{field, message}]}.
 * Errors from services arrive as ConnectErrors; `errorFacts`/`httpStatusOf` (runtime) map them.
 */
import { STATUS_CODES } from 'node:http';
import { errorFacts, httpStatusOf, REQUEST_ID_HEADER, type Logger, type Violation } from '@coinvoice/runtime';
import { ConnectError } from '@connectrpc/connect';
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { wordsOfPattern } from './schemas/common';

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
const TYPE_BASE = 'https://docs.coinvoice.dev/errors/';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  code: string;
  requestId: string;
  errors?: Violation[];
}

/**
 * The most problems one answer names, and the longest field name it quotes
 * (docs/http-edge.md#bounded-answers): 64 KiB of repeated keys under a 32,000-character key once
 * made a 180 MB answer. The first problems are enough for a client to correct its request.
 */
export const MAX_PROBLEM_ERRORS = 50;
const MAX_FIELD_NAME = 100;

/** A field name cut at MAX_FIELD_NAME characters (a key of a body may be 64 KiB long). */
export function boundedFieldName(field: string): string {
  return field.length > MAX_FIELD_NAME ? `${field.slice(0, MAX_FIELD_NAME)}…` : field;
}

/** An error the gateway itself decides on (auth, validation it does before calling a service). */
export class HttpProblem extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    detail: string,
    readonly errors: Violation[] = [],
    readonly headers: Record<string, string> = {},
  ) {
    super(detail);
    this.name = 'HttpProblem';
  }
}

/**
 * A `projectId` the caller may not use (another merchant's, another key's, or none at all): 404 as
 * if the project did not exist (docs/architecture.md#errors: cross-project access answers 404), so the answer says
 * nothing about other merchants' projects.
 */
export function unknownProject(message: string): HttpProblem {
  return new HttpProblem(404, 'not_found', 'the request names a project this caller cannot use', [{ field: 'projectId', message }]);
}

export function problemOf(status: number, code: string, detail: string, requestId: string, errors: Violation[] = []): Problem {
  return {
    type: `${TYPE_BASE}${code}`,
    title: STATUS_CODES[status] ?? 'Error',
    status,
    detail,
    code,
    requestId,
    ...(errors.length > 0 ? { errors: errors.slice(0, MAX_PROBLEM_ERRORS).map((e) => ({ field: boundedFieldName(e.field), message: e.message })) } : {}),
  };
}

/**
 * The answer to a request Node's HTTP parser refused before any route saw it (Fastify's
 * `clientErrorHandler`): 408 for headers or body not arrived in time, 431 for headers too large, 400
 * for anything malformed (a bad header, an unknown HTTP version, Content-Length beside
 * Transfer-Encoding). problem+json like every other error (docs/architecture.md#errors); the connection is closed.
 */
export function clientErrorResponse(errorCode: string | undefined, requestId: string): string {
  const [status, code, detail] =
    errorCode === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request_timeout', 'the request did not arrive in time']
      : errorCode === 'HPE_HEADER_OVERFLOW'
        ? [431, 'headers_too_large', 'the request headers are too large']
        : [400, 'malformed_request', 'the request is not valid HTTP/1.1'];
  const body = JSON.stringify(problemOf(status, code, detail, requestId));
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: ${PROBLEM_CONTENT_TYPE}\r\nContent-Length: ${Buffer.byteLength(body)}\r\n` +
    `Connection: close\r\n${REQUEST_ID_HEADER}: ${requestId}\r\n\r\n${body}`
  );
}

export function sendProblem(reply: FastifyReply, problem: Problem, headers: Record<string, string> = {}): FastifyReply {
  return reply.code(problem.status).headers(headers).type(PROBLEM_CONTENT_TYPE).send(problem);
}

/** `/body/priceAmount` → `priceAmount`; `/items/0/name` → `items.0.name`. */
function fieldOfInstancePath(instancePath: string, missingProperty?: string, additionalProperty?: string): string {
  const base = instancePath.replace(/^\//, '').split('/').filter(Boolean).join('.');
  const leaf = missingProperty ?? additionalProperty;
  return leaf ? (base ? `${base}.${leaf}` : leaf) : base || 'body';
}

export interface AjvIssue {
  instancePath: string;
  message?: string;
  keyword: string;
  params: Record<string, unknown>;
}

/**
 * A field that may be one of several types (`anyOf`, e.g. an amount as a string or a number) fails
 * in every branch: Ajv reports each branch's complaint. Keep what the value's own type broke
 * (`-1` → "must be greater than 0", not also "must be string"); a value of none of the types gets one line,
 * and so does a value that is none of a union's literals ("must be one of a, b, c").
 */
function collapseAnyOf(issues: AjvIssue[]): AjvIssue[] {
  const anyOfPaths = new Set(issues.filter((i) => i.keyword === 'anyOf').map((i) => i.instancePath));
  if (anyOfPaths.size === 0) return issues;
  const out: AjvIssue[] = [];
  for (const issue of issues) {
    if (!anyOfPaths.has(issue.instancePath)) {
      out.push(issue);
      continue;
    }
    const group = issues.filter((i) => i.instancePath === issue.instancePath);
    const own = group.filter((i) => i.keyword !== 'type' && i.keyword !== 'anyOf');
    if (own.length > 0 && own.every((i) => i.keyword === 'const')) {
      // A union of literals (an enumeration): one line naming every allowed value.
      if (issue.keyword === 'anyOf') out.push({ ...issue, message: `must be one of ${own.map((i) => String(i.params.allowedValue)).join(', ')}` });
    } else if (own.length > 0) {
      if (own.includes(issue)) out.push(issue);
    } else if (issue.keyword === 'anyOf') {
      const types = group.filter((i) => i.keyword === 'type').map((i) => String(i.params.type));
      out.push({ ...issue, message: `must be ${types.join(' or ')}` });
    }
  }
  return out;
}

/**
 * The schema's words for a broken rule. Bounds are said as the services say them ("must be greater
 * than 0", not Ajv's "must be > 0"): one wording for one rule, whichever side checked it; a pattern
 * by what it means (patternString), never by its regular expression.
 */
function messageOf(issue: AjvIssue): string {
  const limit = String(issue.params.limit);
  switch (issue.keyword) {
    case 'additionalProperties':
      return 'is not a known field';
    case 'required':
      return 'is required';
    case 'exclusiveMinimum':
      return `must be greater than ${limit}`;
    case 'minimum':
      return `must be at least ${limit}`;
    case 'exclusiveMaximum':
      return `must be less than ${limit}`;
    case 'maximum':
      return `must be at most ${limit}`;
    case 'minLength':
      return limit === '1' ? 'must not be empty' : `must be at least ${limit} characters`;
    case 'maxLength':
      return `must be at most ${limit} characters`;
    case 'pattern':
      return wordsOfPattern(String(issue.params.pattern)) ?? 'is not in the expected form';
    case 'type':
      // A query integer not in plain digits (queryIntegers left it a string).
      return issue.params.type === 'integer' ? 'must be a whole number' : (issue.message ?? 'is invalid');
    default:
      return issue.message ?? 'is invalid';
  }
}

export function violationsOfValidation(issues: AjvIssue[]): Violation[] {
  const seen = new Set<string>();
  const out: Violation[] = [];
  for (const issue of collapseAnyOf(issues)) {
    const field = fieldOfInstancePath(
      issue.instancePath,
      typeof issue.params.missingProperty === 'string' ? issue.params.missingProperty : undefined,
      typeof issue.params.additionalProperty === 'string' ? issue.params.additionalProperty : undefined,
    );
    const message = messageOf(issue);
    const key = `${field}\u0000${message}`;
    if (!seen.has(key)) {
      seen.add(key);
      out.push({ field, message });
    }
  }
  return out;
}

/**
 * A body the schema refused (an unknown field, a value of the wrong type) gets one answer naming
 * every problem: the schema's, and what the service's rules say of the fields the schema did not
 * name. `askRules` makes the service's validate-only call (nothing is done) with the body's fields
 * of the right type; its validation_failed violations are added. Without this,
 * `{"memo":"x","amount":"-1",…}` named memo alone, and the amount's problem only on the next try.
 * Whatever else goes wrong asking (no project, a service down) leaves the schema's answer alone.
 */
export async function withRuleViolations(
  error: Error & { validation?: AjvIssue[]; validationContext?: string },
  body: unknown,
  askRules: (fields: Record<string, unknown>, flagged: ReadonlySet<string>) => Promise<unknown>,
): Promise<Error> {
  if (error.validationContext !== 'body' || !error.validation || typeof body !== 'object' || body === null || Array.isArray(body)) return error;
  const schemaViolations = violationsOfValidation(error.validation);
  const flagged = new Set(schemaViolations.map((v) => v.field));
  const ruleViolations = await askRules(body as Record<string, unknown>, flagged).then(
    () => [],
    (err: unknown) => (err instanceof ConnectError && errorFacts(err).code === 'validation_failed' ? errorFacts(err).violations : []),
  );
  // A field the schema named keeps the schema's words; the rules add the fields it did not name.
  const errors = [...schemaViolations, ...ruleViolations.filter((v) => !flagged.has(v.field))];
  return new HttpProblem(400, 'validation_failed', 'the request body is invalid', errors);
}

/**
 * The headers of a 429: Retry-After (RFC 9110) and the IETF RateLimit fields
 * (draft-ietf-httpapi-ratelimit-headers): `RateLimit-Policy: "<name>";q=<limit>;w=<window s>` and
 * `RateLimit: "<name>";r=<remaining>;t=<seconds until reset>`.
 */
export function rateLimitHeaders(limit: { policy: string; limit: number; windowSeconds: number; retryAfterSeconds: number; remaining?: number }): Record<string, string> {
  const name = JSON.stringify(limit.policy);
  return {
    ...(limit.remaining === undefined || limit.remaining === 0 ? { 'retry-after': String(limit.retryAfterSeconds) } : {}),
    'ratelimit-policy': `${name};q=${limit.limit};w=${limit.windowSeconds}`,
    ratelimit: `${name};r=${limit.remaining ?? 0};t=${limit.retryAfterSeconds}`,
  };
}

/**
 * The words of a dependency's transport failure (docs/integration-guide.md, the error table): a 503
 * never reached the service; a 504 may have taken effect (no answer in time, or the connection
 * lost mid-call).
 */
const UNAVAILABLE_DETAIL = {
  503: 'a dependency is unavailable; try again shortly',
  504: 'a dependency did not answer: the request may or may not have taken effect; read it back, or retry with the same Idempotency-Key',
} as const;

/** Fastify's error handler: every failure, whatever its source, leaves as one problem document. */
export function handleError(logger: Logger) {
  return (error: FastifyError | Error, request: FastifyRequest, reply: FastifyReply): FastifyReply => {
    const requestId = request.id;
    if (error instanceof HttpProblem) {
      return sendProblem(reply, problemOf(error.status, error.code, error.message, requestId, error.errors), error.headers);
    }
    if (error instanceof ConnectError) {
      const facts = errorFacts(error);
      const status = httpStatusOf(facts.connectCode, facts.code);
      if (status >= 500) logger.error({ err: error, requestId }, 'backend call failed');
      // A service's own deliberate 503 (e.g. rates_unavailable) keeps its code and message; a
      // transport failure says only that a dependency is unavailable.
      const deliberateUnavailable = status === 503 && facts.code !== 'service_unavailable';
      const detail = status >= 500 && status !== 503 ? 'an internal error occurred' : facts.message;
      const unavailable = (status === 503 || status === 504) && !deliberateUnavailable;
      const code = unavailable ? 'service_unavailable' : facts.code;
      const headers = facts.rateLimit ? rateLimitHeaders(facts.rateLimit) : undefined;
      return sendProblem(reply, problemOf(status, code, unavailable ? UNAVAILABLE_DETAIL[status as 503 | 504] : detail, requestId, facts.violations), headers);
    }
    const fastifyError = error as FastifyError & { validation?: AjvIssue[]; validationContext?: string };
    if (fastifyError.validation) {
      const context = fastifyError.validationContext ?? 'body';
      const errors = violationsOfValidation(fastifyError.validation).map((v) =>
        context === 'body' ? v : { field: v.field === 'body' ? context : v.field, message: v.message },
      );
      const part = context === 'body' ? 'the request body is' : context === 'params' ? 'the path parameters are' : context === 'querystring' ? 'the query parameters are' : `the request ${context} are`;
      return sendProblem(reply, problemOf(400, 'validation_failed', `${part} invalid`, requestId, errors));
    }
    switch (fastifyError.code) {
      case 'FST_ERR_CTP_BODY_TOO_LARGE':
        return sendProblem(reply, problemOf(413, 'payload_too_large', 'the request body is too large', requestId));
      case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
        return sendProblem(reply, problemOf(415, 'unsupported_media_type', 'send the request body as application/json', requestId));
      case 'FST_ERR_CTP_EMPTY_JSON_BODY':
        return sendProblem(reply, problemOf(400, 'validation_failed', 'the request body is empty', requestId, [{ field: 'body', message: 'must be a JSON object' }]));
      case 'FST_ERR_CTP_INVALID_JSON_BODY':
        return sendProblem(reply, problemOf(400, 'invalid_json', 'the request body is not valid JSON', requestId, [{ field: 'body', message: 'must be valid JSON' }]));
    }
    if (fastifyError.statusCode && fastifyError.statusCode >= 400 && fastifyError.statusCode < 500) {
      // Fastify's own client errors (e.g. malformed JSON): the status is right, the message is safe.
      const code = fastifyError.statusCode === 400 ? 'bad_request' : 'client_error';
      return sendProblem(reply, problemOf(fastifyError.statusCode, code, fastifyError.message, requestId));
    }
    logger.error({ err: error, requestId }, 'unhandled error');
    return sendProblem(reply, problemOf(500, 'internal_error', 'an internal error occurred', requestId));
  };
}
