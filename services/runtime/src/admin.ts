/**
 * The HTTP/1.1 admin port every process has next to its gRPC port: Prometheus and HTTP probes
 * cannot speak h2c gRPC. /healthz = the process is up; /readyz = every dependency answers;
 * /readyz?scope=traffic = requests can be served (a NATS outage delays events, not requests).
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { HealthReport } from './rpc/health';

export interface AdminServerOptions {
  port: number;
  host?: string;
  metrics: Registry;
  readiness: () => Promise<HealthReport>;
}

export interface AdminServer {
  port: number;
  close(): Promise<void>;
}

function json(res: http.ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

export async function startAdminServer(options: AdminServerOptions): Promise<AdminServer> {
  const server = http.createServer((req, res) => {
    const [path, query = ''] = (req.url ?? '/').split('?');
    const trafficOnly = new URLSearchParams(query).get('scope') === 'traffic';
    if (req.method !== 'GET') return json(res, 405, { status: 'method not allowed' });
    if (path === '/healthz') return json(res, 200, { status: 'ok' });
    if (path === '/readyz') {
      options.readiness().then(
        (report) => {
          const ready = trafficOnly ? report.acceptingRequests : report.serving;
          json(res, ready ? 200 : 503, { status: ready ? 'ready' : 'not ready', ...report });
        },
        () => json(res, 503, { status: 'not ready' }),
      );
      return;
    }
    if (path === '/metrics') {
      options.metrics.metrics().then(
        (text) => {
          res.writeHead(200, { 'content-type': options.metrics.contentType });
          res.end(text);
        },
        () => json(res, 500, { status: 'metrics unavailable' }),
      );
      return;
    }
    json(res, 404, { status: 'not found' });
  });
  server.keepAliveTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host ?? '127.0.0.1', () => {
      server.off('error', reject);
      resolve();
    });
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
