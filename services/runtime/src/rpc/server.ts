/**
 * The gRPC port of a service: HTTP/2 cleartext serving the Connect, gRPC and gRPC-Web protocols
 * (connect-node), grpc.health.v1, a request id in every log line, RPC metrics, and a close that
 * lets in-flight calls finish before the grace period runs out.
 */
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { Code, ConnectError, type ConnectRouter, type Interceptor } from '@connectrpc/connect';
import { connectNodeAdapter } from '@connectrpc/connect-node';
import { Counter, Histogram, type Registry } from 'prom-client';
import { isDatabaseUnavailableError } from '../db';
import { serviceError } from '../errors';
import { Health } from '../gen/grpc/health/v1/health_pb';
import { REQUEST_ID_HEADER, sanitizeRequestId, withRequestId, type Logger } from '../log';
import { HealthService, type HealthMonitor } from './health';

export interface RpcServerOptions {
  port: number;
  host?: string;
  /** Registers the service's own RPC implementations. */
  routes: (router: ConnectRouter) => void;
  health: HealthMonitor;
  logger: Logger;
  metrics: Registry;
}

export interface RpcServer {
  port: number;
  url: string;
  /** Stops accepting, lets open calls finish for up to graceMs, then cuts what is left. */
  close(graceMs: number): Promise<void>;
}

function requestIdInterceptor(): Interceptor {
  return (next) => (req) => withRequestId(sanitizeRequestId(req.header.get(REQUEST_ID_HEADER)), () => next(req));
}

/**
 * Unexpected errors are logged with their stack and answered as a bare `internal`, never leaked.
 * Postgres being unreachable (refused, restarting, connection dropped) is not unexpected: it
 * answers `unavailable` (503 at the gateway), so clients retry instead of seeing an internal error.
 */
function errorInterceptor(logger: Logger): Interceptor {
  return (next) => async (req) => {
    try {
      return await next(req);
    } catch (err) {
      if (err instanceof ConnectError) {
        if (err.code === Code.Internal || err.code === Code.Unknown) {
          logger.error({ err, procedure: req.url }, 'rpc failed');
        }
        throw err;
      }
      if (isDatabaseUnavailableError(err)) {
        logger.warn({ procedure: req.url, reason: err instanceof Error ? err.message : String(err) }, 'rpc failed: postgres unavailable');
        throw serviceError(Code.Unavailable, 'service_unavailable', 'the database is unavailable; try again shortly');
      }
      logger.error({ err, procedure: req.url }, 'rpc failed with an unexpected error');
      throw new ConnectError('internal error', Code.Internal);
    }
  };
}

function metricsInterceptor(registry: Registry): Interceptor {
  const handled = new Counter({
    name: 'rpc_server_handled_total',
    help: 'RPCs completed, by procedure and Connect code',
    labelNames: ['procedure', 'code'] as const,
    registers: [registry],
  });
  const duration = new Histogram({
    name: 'rpc_server_handling_seconds',
    help: 'RPC handling time',
    labelNames: ['procedure'] as const,
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  return (next) => async (req) => {
    const procedure = `${req.service.typeName}/${req.method.name}`;
    const end = duration.startTimer({ procedure });
    try {
      const res = await next(req);
      handled.inc({ procedure, code: 'ok' });
      return res;
    } catch (err) {
      handled.inc({ procedure, code: Code[ConnectError.from(err).code] ?? 'unknown' });
      throw err;
    } finally {
      end();
    }
  };
}

export async function startRpcServer(options: RpcServerOptions): Promise<RpcServer> {
  const handler = connectNodeAdapter({
    routes(router) {
      router.service(Health, new HealthService(options.health));
      options.routes(router);
    },
    interceptors: [requestIdInterceptor(), metricsInterceptor(options.metrics), errorInterceptor(options.logger)],
  });
  const server = http2.createServer(handler);
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '0.0.0.0', () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    url: `http://127.0.0.1:${port}`,
    close(graceMs) {
      return new Promise<void>((resolve) => {
        const force = setTimeout(() => {
          for (const session of sessions) session.destroy();
        }, graceMs);
        force.unref();
        server.close(() => {
          clearTimeout(force);
          resolve();
        });
        // GOAWAY: clients finish what they started and open no new streams here.
        for (const session of sessions) session.close();
      });
    },
  };
}
