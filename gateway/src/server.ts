/**
 * The public REST gateway: Fastify over HTTP/1.1, JSON in and out, every error as
 * application/problem+json. `build(deps)` assembles it from injected clients; main.ts connects
 * them, listens and handles signals.
 */
import { isUtf8 } from 'node:buffer';
import { randomUUID } from 'node:crypto';
import { REQUEST_ID_HEADER, sanitizeRequestId, withRequestId, type Logger } from '@coinvoice/runtime';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import type { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import type { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type { PayoutService } from '@coinvoice/runtime/gen/coinvoice/payout/v1/payout_pb';
import type { Client } from '@connectrpc/connect';
import { OptionalKind } from '@sinclair/typebox';
import Fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import { ApiKeyVerifier } from './auth/api-keys';
import { authHooks } from './auth/hooks';
import { SessionVerifier } from './auth/sessions';
import type { Backends } from './backends';
import { parseJsonExactly } from './exact-json';
import { plainNumberSerializerFactory } from './json-numbers';
import { clientErrorResponse, handleError, HttpProblem, problemOf, sendProblem } from './problem';
import { OpenApiRegistry } from './openapi';
import { checkoutRoutes, docsRoutes } from './routes/checkout';
import { dashboardRoutes } from './routes/dashboard';
import { rateRoutes } from './routes/rates';
import { currencyRoutes } from './routes/currencies';
import { invoiceRoutes } from './routes/invoices';
import { merchantRoutes } from './routes/merchant';
import { payoutRoutes } from './routes/payouts';
import { treasuryRoutes } from './routes/treasury';
import { eventStreamRoutes } from './routes/events-stream';
import { webhookRoutes } from './routes/webhooks';
import type { GatewayRateLimits } from './rate-limits';
import { RouteMethods } from './route-methods';
import { queryIntegers } from './schemas/common';

export interface GatewayClients {
  auth: Client<typeof AuthService>;
  invoices: Client<typeof InvoiceService>;
  notifier: Client<typeof NotifierService>;
  payouts: Client<typeof PayoutService>;
}

export interface GatewayDeps {
  backends: Backends;
  clients: GatewayClients;
  apiKeys: ApiKeyVerifier;
  sessions: SessionVerifier;
  logger: Logger;
  http: HttpEdge;
  rateLimits: GatewayRateLimits;
  /** Event streams one API key (one merchant's sessions) may hold open at once (EVENT_STREAMS_PER_KEY). */
  eventStreamsPerKey: number;
  /** Event streams one merchant may hold open at once, over all its keys and sessions (EVENT_STREAMS_PER_MERCHANT). */
  eventStreamsPerMerchant: number;
  /** Fastify's trustProxy: which X-Forwarded-For hops give the client IP. */
  trustProxy?: boolean | string[];
  /** Where the dashboard's built files are; default the dashboard workspace's dist/. */
  dashboardDir?: string;
}

/**
 * What the edge allows a connection (docs/http-edge.md): a slow client cannot hold a connection
 * open by trickling a request, nor an idle one forever.
 */
export interface HttpEdge {
  /** Largest request body (413 payload_too_large beyond). */
  bodyLimitBytes: number;
  /** Headers and body must all have arrived within this, else 408 and the connection closes. */
  requestTimeoutMs: number;
  /** An idle keep-alive connection closes after this. */
  keepAliveTimeoutMs: number;
}

/**
 * Node's server options for the edge. Node checks request timeouts only every
 * connectionsCheckingInterval (30 s by default): a 30 s timeout could hold for up to 60 s, so it is
 * checked every second (or more often for a shorter timeout). The headers' own limit may not
 * exceed the whole request's.
 */
function httpServerOptions(edge: HttpEdge): { connectionsCheckingInterval: number; headersTimeout: number } {
  return {
    connectionsCheckingInterval: Math.max(50, Math.min(1_000, Math.floor(edge.requestTimeoutMs / 4))),
    headersTimeout: edge.requestTimeoutMs,
  };
}

/**
 * JSON bodies: an empty body is "no body" (optional bodies), malformed JSON a 400 problem, a number
 * the parser would round a 400 naming its field (exact-json.ts), bytes that are not UTF-8 a 400 and
 * a charset other than UTF-8 a 415.
 */
function parseJsonBody(req: { headers: Record<string, string | string[] | undefined> }, raw: Buffer, done: (err: Error | null, value?: unknown) => void): void {
  // JSON is UTF-8 (RFC 8259): another charset is refused rather than read as UTF-8, and bytes that
  // are not UTF-8 are refused rather than turned into U+FFFD on their way to a service.
  const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(String(req.headers['content-type'] ?? ''))?.[1];
  if (charset !== undefined && !/^utf-?8$/i.test(charset)) {
    return done(new HttpProblem(415, 'unsupported_media_type', `send the request body as application/json in UTF-8, not ${charset}`));
  }
  if (!isUtf8(raw)) {
    return done(new HttpProblem(400, 'validation_failed', 'the request body is invalid', [{ field: 'body', message: 'must be UTF-8 text: it holds bytes that are not' }]));
  }
  const body = raw.toString('utf8');
  if (body.trim() === '') return done(null, undefined);
  try {
    done(null, parseJsonExactly(body));
  } catch (error) {
    if (error instanceof HttpProblem) return done(error);
    const err = Object.assign(new Error('the request body is not valid JSON'), { statusCode: 400, code: 'FST_ERR_CTP_INVALID_JSON_BODY' });
    done(err);
  }
}

export function build(deps: GatewayDeps): { app: FastifyInstance; openapi: OpenApiRegistry } {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    bodyLimit: deps.http.bodyLimitBytes,
    requestTimeout: deps.http.requestTimeoutMs,
    keepAliveTimeout: deps.http.keepAliveTimeoutMs,
    http: httpServerOptions(deps.http),
    trustProxy: deps.trustProxy ?? false,
    genReqId: (req) => sanitizeRequestId(req.headers[REQUEST_ID_HEADER]) ?? randomUUID(),
    requestIdHeader: false,
    // A request that reaches a closing gateway on a kept-alive connection is served, its
    // connection then closed (docs/http-edge.md#shutdown): Fastify's own 503 body is neither
    // problem+json nor carries a request id.
    return503OnClosing: false,
    // A path Fastify's router cannot decode (a malformed percent-encoding) is refused before any
    // hook runs: problem+json and the request id as for every other refusal.
    frameworkErrors(error, req, reply) {
      reply.header(REQUEST_ID_HEADER, req.id);
      const detail = error.code === 'FST_ERR_BAD_URL' ? 'the request path is not a valid URL: a percent-encoding in it is malformed' : 'the request could not be routed';
      sendProblem(reply, problemOf(400, 'bad_request', detail, req.id));
    },
    // Requests the HTTP parser refuses get problem+json too, and their connection is closed.
    clientErrorHandler(err: NodeJS.ErrnoException, socket) {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      if (socket.writable) socket.write(clientErrorResponse(err.code, randomUUID()));
      socket.destroy(err);
    },
    // Amounts in plain notation in every schema-serialized body (json-numbers.ts).
    schemaController: { compilersFactory: { buildSerializer: plainNumberSerializerFactory() } },
    ajv: {
      // Strict at the edge: no coercion, no silently dropped fields, every problem reported.
      customOptions: { removeAdditional: false, coerceTypes: false, useDefaults: false, allErrors: true },
    },
  });

  const openapi = new OpenApiRegistry();
  openapi.attach(app);

  // JSON only: Fastify's default text/plain parser would hand a string to the JSON Schema (a 400)
  // where the contract promises 415 for a body that is not JSON.
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, parseJsonBody);
  // An empty body has no media type to refuse: curl -d '', Python's urllib and PHP's curl send
  // `application/x-www-form-urlencoded` with Content-Length 0 on a POST that needs no body
  // (sandbox pay, payout cancel), and were answered 415 (an outside review). Any other type with
  // bytes is still 415, without reading them.
  app.addContentTypeParser('*', (req, _payload, done) => {
    if (req.headers['content-length'] === '0') return done(null, undefined);
    done(new HttpProblem(415, 'unsupported_media_type', 'send the request body as application/json'));
  });

  // Every handler runs with the request id current, so RPCs and logs downstream carry it.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header(REQUEST_ID_HEADER, req.id);
    withRequestId(req.id, done);
  });

  // Once the gateway is closing, every answer closes its connection: Node's server.close() ends
  // only the connections idle at that moment, so one kept alive past an in-flight answer held the
  // close (and the process) until the grace period's hard exit.
  let closing = false;
  app.addHook('preClose', (done) => {
    closing = true;
    done();
  });
  app.addHook('onSend', (_req, reply, payload, done) => {
    if (closing) reply.header('connection', 'close');
    done(null, payload);
  });

  // A route whose body schema is optional (sandbox pay) takes "no body" as an empty object;
  // Fastify would otherwise validate `undefined` against the object schema and refuse it.
  app.addHook('preValidation', (req, _reply, done) => {
    const bodySchema = req.routeOptions.schema?.body as Record<symbol, unknown> | undefined;
    if (req.body === undefined && bodySchema?.[OptionalKind] === 'Optional') req.body = {};
    // `?limit=20` is an integer to the schema and to a typed client (schemas/common.ts).
    queryIntegers(req.routeOptions.schema?.querystring, req.query);
    done();
  });

  app.setErrorHandler(handleError(deps.logger));
  const routeMethods = new RouteMethods();
  app.addHook('onRoute', (route) => routeMethods.add(route.url, route.method));
  const methodNotAllowed = (req: FastifyRequest, reply: FastifyReply, path: string, allowed: string[]) =>
    sendProblem(reply, problemOf(405, 'method_not_allowed', `${path} answers ${allowed.join(', ')}, not ${req.method}`, req.id), { allow: allowed.join(', ') });
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0]!;
    const allowed = routeMethods.allowed(path);
    if (allowed.length > 0) return methodNotAllowed(req, reply, path, allowed);
    return sendProblem(reply, problemOf(404, 'not_found', `no route ${req.method} ${path}`, req.id));
  });
  // A parameter route matched a path that is a route of its own for other methods (route-methods.ts).
  app.addHook('onRequest', (req, reply, done) => {
    if (!req.routeOptions.url?.includes(':')) return done();
    const path = req.url.split('?')[0]!;
    const allowed = routeMethods.shadowedStaticRoute(path, req.method);
    if (allowed === undefined) return done();
    methodNotAllowed(req, reply, path, allowed);
  });

  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));
  // Browsers ask for it on every page (checkout, docs, dashboard): no icon, and no 404 in their console.
  app.get('/favicon.ico', { schema: { hide: true } }, async (_req, reply) => reply.code(204).header('cache-control', 'public, max-age=86400').send());
  // /readyz: every backend fully healthy. /readyz?scope=traffic: every backend can serve requests
  // (what Kubernetes routes on: a NATS outage delays events but must not take the API down).
  app.get<{ Querystring: { scope?: string } }>('/readyz', { schema: { hide: true } }, async (req, reply) => {
    const { ready, backends } = await deps.backends.readiness(req.query.scope === 'traffic' ? 'traffic' : 'all');
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', backends });
  });

  const hooks = authHooks({ apiKeys: deps.apiKeys, sessions: deps.sessions, rateLimits: deps.rateLimits });
  merchantRoutes(app, { auth: deps.clients.auth, hooks });
  invoiceRoutes(app, { auth: deps.clients.auth, invoices: deps.clients.invoices, hooks });
  checkoutRoutes(app, { invoices: deps.clients.invoices, rateLimits: deps.rateLimits });
  rateRoutes(app, { invoices: deps.clients.invoices });
  currencyRoutes(app, { invoices: deps.clients.invoices });
  webhookRoutes(app, { auth: deps.clients.auth, notifier: deps.clients.notifier, hooks });
  eventStreamRoutes(app, {
    auth: deps.clients.auth,
    notifier: deps.clients.notifier,
    hooks,
    apiKeys: deps.apiKeys,
    sessions: deps.sessions,
    streamsPerKey: deps.eventStreamsPerKey,
    streamsPerMerchant: deps.eventStreamsPerMerchant,
    isClosing: () => closing,
  });
  payoutRoutes(app, { auth: deps.clients.auth, payouts: deps.clients.payouts, hooks });
  treasuryRoutes(app, { auth: deps.clients.auth, payouts: deps.clients.payouts, hooks });
  dashboardRoutes(app, { logger: deps.logger, dir: deps.dashboardDir });
  let document: unknown;
  docsRoutes(app, () => (document ??= openapi.document()), () => deps.clients.invoices.listCurrencies({}), deps.logger);

  return { app, openapi };
}
