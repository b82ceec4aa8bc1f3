/**
 * The OpenAPI 3.1 document, generated from the routes as registered — the same JSON Schemas that
 * validate requests — so the reference cannot drift from what the gateway does. Routes marked
 * `hide` (health, the checkout page's own assets) are operational and left out.
 */
import { OptionalKind } from '@sinclair/typebox';
import type { FastifyInstance, RouteOptions } from 'fastify';
import { ProblemSchema } from './schemas/common';
import { WEBHOOK_EVENTS } from './schemas/webhook-events';

type JsonObject = Record<string, unknown>;

const ERROR_STATUSES: Record<string, string> = {
  '400': 'Invalid input: the `errors` array names each offending field',
  '401': 'Missing or invalid credentials',
  '403': 'Not allowed (for example a live key on a sandbox-only route)',
  '404': 'Unknown resource, or one that belongs to another project or merchant',
  '409': 'The resource is not in a state that allows this',
  '413': 'Request body too large',
  '415': 'Request body is not application/json',
  '422': 'Idempotency-Key reused with a different body',
  '429': 'Too many requests (code rate_limited): wait Retry-After seconds. Limits are configurable (see the README)',
  '503': 'A dependency is unavailable; retry shortly',
  '504': 'A dependency did not answer in time (code service_unavailable): the request may or may not have taken effect; retry, writes with the same Idempotency-Key',
};

/**
 * Routes limited beyond the per-key limit every x-api-key route has (docs/architecture.md#rate-limits), with the limit's
 * setting and default; the services count these in Postgres, shared by every replica (the event
 * stream limit counts open streams in each gateway replica).
 */
const RATE_LIMITED_ROUTES: Record<string, string> = {
  'post /api/merchant/register': 'RATE_LIMIT_REGISTER_PER_IP (default 10 per hour per client IP)',
  'post /api/merchant/register/confirm': 'RATE_LIMIT_EMAIL_CODE_PER_ACCOUNT (default 10 per hour per email), besides 5 attempts per code',
  'post /api/merchant/login': 'RATE_LIMIT_LOGIN_PER_ACCOUNT (default 10 per 15 minutes per account and client IP, right or wrong password: another client’s failures never lock the owner out) and RATE_LIMIT_LOGIN_PER_IP (default 50 per 15 minutes)',
  'post /api/merchant/password': 'RATE_LIMIT_PASSWORD_CHANGE_PER_ACCOUNT (default 10 per 15 minutes per merchant, right or wrong current password)',
  'post /api/merchant/projects/{id}/api-keys': 'RATE_LIMIT_API_KEY_CREATE_PER_PROJECT (default 20 per hour per project, revoked keys included)',
  'post /api/merchant/email/verify': 'RATE_LIMIT_EMAIL_CODE_PER_ACCOUNT (default 10 per hour, with resends)',
  'post /api/merchant/email/verification': 'RATE_LIMIT_EMAIL_CODE_PER_ACCOUNT (default 10 per hour, with verify attempts)',
  'post /api/payout/request': 'RATE_LIMIT_PAYOUT_REQUEST_PER_PROJECT (default 30 per hour per project; a replay of an answered request’s Idempotency-Key does not count)',
  'post /api/payout/verify': 'RATE_LIMIT_PAYOUT_VERIFY_PER_PROJECT (default 20 per hour per project, across its payouts)',
  'get /api/checkout/{id}': 'RATE_LIMIT_CHECKOUT_PER_IP (default 300 per minute per client IP)',
  'post /api/merchant/projects/{id}/webhook-test': 'RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT (default 10 per minute per project)',
  'post /api/merchant/projects/{id}/webhook-deliveries/{deliveryId}/redeliver': 'RATE_LIMIT_WEBHOOK_REDELIVER_PER_PROJECT (default 60 per minute per project)',
  'get /api/events/stream': 'EVENT_STREAMS_PER_KEY (default 5 streams open at once per API key, or per merchant’s sessions) and EVENT_STREAMS_PER_MERCHANT (default 20 per merchant, over all its keys and sessions), per gateway replica',
};

const RATE_LIMIT_HEADERS: JsonObject = {
  'Retry-After': { description: 'Seconds to wait before trying again', schema: { type: 'integer', minimum: 1 } },
  'RateLimit-Policy': { description: 'The limit that refused the call: `"<name>";q=<limit>;w=<window seconds>`', schema: { type: 'string' } },
  RateLimit: { description: 'Its state: `"<name>";r=<remaining>;t=<seconds until reset>`', schema: { type: 'string' } },
};

/** Plain JSON of a TypeBox schema (drops its symbol keys) without its `$id`. */
function plain(schema: unknown): JsonObject {
  const json = JSON.parse(JSON.stringify(schema)) as JsonObject;
  delete json.$id;
  return json;
}

function openapiPath(url: string): string {
  return url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
}

function parametersOf(schema: unknown, location: 'path' | 'query' | 'header'): JsonObject[] {
  if (!schema || typeof schema !== 'object') return [];
  const s = plain(schema);
  const properties = (s.properties ?? {}) as Record<string, JsonObject>;
  const required = new Set((s.required as string[] | undefined) ?? []);
  return Object.entries(properties).map(([name, prop]) => ({
    name,
    in: location,
    required: location === 'path' ? true : required.has(name),
    ...(prop.description ? { description: prop.description } : {}),
    schema: prop,
  }));
}

export class OpenApiRegistry {
  private readonly routes: RouteOptions[] = [];

  /** Call before any route is registered. */
  attach(app: FastifyInstance): void {
    app.addHook('onRoute', (route) => {
      if (!route.schema?.hide) this.routes.push(route);
    });
  }

  /** Every registered method + path (for the test that checks the document covers them). */
  registered(): Array<{ method: string; path: string }> {
    return this.routes.flatMap((r) =>
      (Array.isArray(r.method) ? r.method : [r.method]).filter((m) => m !== 'HEAD').map((m) => ({ method: m.toLowerCase(), path: openapiPath(r.url) })),
    );
  }

  document(): JsonObject {
    const paths: Record<string, Record<string, JsonObject>> = {};
    for (const route of this.routes) {
      const schema = route.schema ?? {};
      for (const method of (Array.isArray(route.method) ? route.method : [route.method]).filter((m) => m !== 'HEAD')) {
        const responses: Record<string, JsonObject> = {};
        for (const [status, responseSchema] of Object.entries((schema.response ?? {}) as Record<string, unknown>)) {
          const json = plain(responseSchema);
          responses[status] =
            status === '204'
              ? { description: 'No content' }
              : status === '304'
                ? { description: 'Not modified: the ETag named in If-None-Match is still current' }
                : // Fastify's per-content-type form (e.g. text/event-stream) is already a response object.
                json.content !== undefined
                ? { description: json.description ?? 'Success', content: json.content }
                : { description: 'Success', content: { 'application/json': { schema: json } } };
        }
        const errorStatuses = ['400', '404', '503', '504'];
        if (schema.security) errorStatuses.push('401', '403');
        if (schema.body) errorStatuses.push('413', '415');
        // A write on a resource, or by an authenticated caller (payout request: insufficient
        // balance; payout verify: not verifiable; email verify: code expired), may meet a state
        // that refuses it.
        if (['post', 'patch', 'delete'].includes(method.toLowerCase()) && (route.url.includes(':') || schema.security)) errorStatuses.push('409');
        if (schema.headers && JSON.stringify(schema.headers).includes('idempotency-key')) errorStatuses.push('422');
        const routeLimit = RATE_LIMITED_ROUTES[`${method.toLowerCase()} ${openapiPath(route.url)}`];
        const apiKeyLimited = JSON.stringify(schema.security ?? []).includes('apiKeyAuth');
        if (routeLimit || apiKeyLimited) errorStatuses.push('429');
        for (const status of errorStatuses.sort()) {
          const limits = [routeLimit, apiKeyLimited ? 'RATE_LIMIT_API_PER_KEY (default 6000 per minute per API key); RATE_LIMIT_API_KEY_LOOKUPS_PER_IP (default 120 unknown keys a minute per client address)' : undefined].filter(Boolean);
          responses[status] = {
            description: status === '429' ? `${ERROR_STATUSES[status]}: ${limits.join('; ')}` : ERROR_STATUSES[status],
            ...(status === '429' ? { headers: RATE_LIMIT_HEADERS } : {}),
            content: { 'application/problem+json': { schema: { $ref: '#/components/schemas/Problem' } } },
          };
        }
        const operation: JsonObject = {
          operationId: `${method.toLowerCase()}${openapiPath(route.url).replace(/[{}]/g, '').replace(/[^A-Za-z0-9]+(.)?/g, (_m, c: string | undefined) => (c ?? '').toUpperCase())}`,
          ...(schema.summary ? { summary: schema.summary } : {}),
          ...(schema.description ? { description: schema.description } : {}),
          ...(schema.tags ? { tags: schema.tags } : {}),
          // Public routes say so (an empty list) rather than leaving the reader to guess.
          security: schema.security ?? [],
          parameters: [
            ...parametersOf(schema.params, 'path'),
            ...parametersOf(schema.querystring, 'query'),
            ...parametersOf(schema.headers, 'header'),
          ],
          ...(schema.body
            ? { requestBody: { required: (schema.body as Record<symbol, unknown>)[OptionalKind] !== 'Optional', content: { 'application/json': { schema: plain(schema.body) } } } }
            : {}),
          responses,
        };
        const path = openapiPath(route.url);
        paths[path] = { ...(paths[path] ?? {}), [method.toLowerCase()]: operation };
      }
    }
    const webhooks: Record<string, JsonObject> = {};
    for (const [name, event] of Object.entries(WEBHOOK_EVENTS)) {
      webhooks[name] = {
        post: {
          operationId: `webhook${name.replace(/(^|[._])(.)/g, (_m, _sep: string, c: string) => c.toUpperCase())}`,
          summary: event.summary,
          description:
            'Signed per the Standard Webhooks specification: headers webhook-id (the event id, the same on every retry), webhook-timestamp (unix seconds) and webhook-signature (v1,<base64 HMAC-SHA256 of "id.timestamp.body"> with the project’s whsec_ secret; for a while after a rotation more, space-separated v1 signatures made with the replaced secrets, and any one verifies); webhook-event-type names the event. Answer 2xx within 10 s; anything else is retried with backoff.',
          // Sent by coinvoice to the merchant's URL: the signature authenticates it, not a credential.
          security: [],
          parameters: [
            ...['webhook-id', 'webhook-timestamp', 'webhook-signature'].map((header) => ({ name: header, in: 'header', required: true, schema: { type: 'string' } })),
            { name: 'webhook-event-type', in: 'header', required: true, description: 'The event type', schema: { type: 'string', const: name } },
          ],
          requestBody: { required: true, content: { 'application/json': { schema: plain(event.body) } } },
          responses: { '200': { description: 'Any 2xx acknowledges the delivery' } },
        },
      };
    }
    return {
      openapi: '3.1.0',
      info: {
        title: 'coinvoice API',
        version: '1.0.0',
        license: { name: 'Proprietary', identifier: 'LicenseRef-coinvoice' },
        description:
          'Accept cryptocurrency payments: invoices priced in fiat and paid in a chosen coin, a hosted checkout page at /pay/{invoiceId}, a sandbox that simulates payments and sends signed webhooks, and payouts. Every error is application/problem+json (RFC 9457).',
      },
      servers: [{ url: '/' }],
      tags: [
        { name: 'invoices', description: 'Create and look up invoices (x-api-key)' },
        { name: 'sandbox', description: 'Simulated payments for sandbox projects' },
        { name: 'payouts', description: 'Balances and withdrawals (x-api-key or merchant JWT)' },
        { name: 'checkout', description: 'What the hosted checkout page reads (public)' },
        { name: 'rates', description: 'The exchange rates invoices are priced at now (public)' },
        { name: 'currencies', description: 'The assets and networks invoices can be paid in (public)' },
        { name: 'dashboard', description: 'Merchant dashboard (Bearer session token); not meant for public integrations' },
        { name: 'admin', description: 'Operators' },
        { name: 'events', description: 'The project’s webhook events as a stream, for development without a public URL (x-api-key)' },
      ],
      paths,
      webhooks,
      components: {
        securitySchemes: {
          apiKeyAuth: { type: 'apiKey', in: 'header', name: 'x-api-key', description: 'A project API key: SBX_… (sandbox) or LIVE_…' },
          bearerAuth: { type: 'http', scheme: 'bearer', bearerFormat: 'JWT', description: 'Merchant session token from /api/merchant/login' },
        },
        schemas: { Problem: plain(ProblemSchema) },
      },
    };
  }
}
