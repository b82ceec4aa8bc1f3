/**
 * The public REST gateway: Fastify over HTTP/1.1, JSON in and out, every error as
 * application/problem+json. `build(deps)` assembles it; main.ts listens.
 */
import { randomUUID } from 'node:crypto';
import { sanitizeRequestId, withRequestId, REQUEST_ID_HEADER, type Logger } from '@coinvoice/runtime';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Backends } from './backends';

export interface GatewayDeps {
  backends: Backends;
  logger: Logger;
  bodyLimitBytes: number;
}

export function build(deps: GatewayDeps): FastifyInstance {
  const app = Fastify({
    loggerInstance: deps.logger as FastifyBaseLogger,
    disableRequestLogging: false,
    bodyLimit: deps.bodyLimitBytes,
    genReqId: (req) => sanitizeRequestId(req.headers[REQUEST_ID_HEADER]) ?? randomUUID(),
    requestIdHeader: false,
    requestIdLogLabel: 'requestId',
    return503OnClosing: true,
  });

  // Every handler runs with the request id current, so RPCs and logs downstream carry it.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header(REQUEST_ID_HEADER, req.id);
    withRequestId(req.id, done);
  });

  app.get('/healthz', async () => ({ status: 'ok' }));

  app.get('/readyz', async (_req, reply) => {
    const { ready, backends } = await deps.backends.readiness();
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', backends });
  });

  app.setNotFoundHandler((req, reply) => {
    reply
      .code(404)
      .type('application/problem+json')
      .send({
        type: 'about:blank',
        title: 'Not Found',
        status: 404,
        detail: `no route ${req.method} ${req.url.split('?')[0]}`,
        code: 'not_found',
        requestId: req.id,
      });
  });

  return app;
}
