/**
 * What the resilience tests share: the system on servers of the test's own, a webhook receiver,
 * timed calls through the gateway, and the readiness endpoints of every process.
 */
import { cpSync, existsSync, rmSync } from 'node:fs';
import path from 'node:path';
import { create } from '@bufbuild/protobuf';
import { createRpcClient } from '@coinvoice/runtime';
import { Health, HealthCheckRequestSchema, HealthCheckResponse_ServingStatus as ServingStatus } from '@coinvoice/runtime/gen/grpc/health/v1/health_pb';
import { Receiver, type ReceivedRequest } from '../../services/notifier/test/support/receiver';
import { apiKeyHeader, type GatewayClient, type JsonResponse } from '../support/http';
import { REPO_ROOT, type BootedSystem } from '../support/system';

export { eventually, Receiver, type ReceivedRequest } from '../../services/notifier/test/support/receiver';

export const SERVICES = ['auth', 'invoice', 'payout', 'notifier'] as const;
export type ServiceName = (typeof SERVICES)[number];

/** Settings that keep the system quick to test: cheap password hashing, short webhook retries. */
export const FAST_SYSTEM_ENV: NodeJS.ProcessEnv = {
  PASSWORD_HASH_MEMORY_KIB: '1024',
  WEBHOOK_RETRY_SCHEDULE: '200ms,500ms,1s,2s,5s',
  WEBHOOK_TIMEOUT_MS: '2000',
  LOG_LEVEL: 'info',
};

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

export interface Timed<T = any> extends JsonResponse<T> {
  ms: number;
}

/** A gateway call with its duration; a transport failure (no answer at all) becomes status 0. */
export async function timed<T = any>(call: () => Promise<JsonResponse<T>>): Promise<Timed<T>> {
  const started = Date.now();
  try {
    const res = await call();
    return { ...res, ms: Date.now() - started };
  } catch (err) {
    return { status: 0, headers: new Headers(), body: undefined as T, text: String(err), ms: Date.now() - started };
  }
}

export const INVOICE_BODY = {
  priceAmount: '25.00',
  priceCurrency: 'USD',
  payCurrency: 'BTC',
  successUrl: 'https://shop.example/thanks',
  cancelUrl: 'https://shop.example/cart',
};

export const createInvoice = (api: GatewayClient, key: string, extra: Record<string, unknown> = {}) =>
  timed(() => api.post('/api/invoice', { ...INVOICE_BODY, ...extra }, { headers: apiKeyHeader(key) }));

export const payInvoice = (api: GatewayClient, key: string, invoiceId: string) =>
  timed(() => api.post(`/api/invoice/${invoiceId}/sandbox/pay`, {}, { headers: apiKeyHeader(key) }));

/** The parsed invoice.paid body of a webhook request, or undefined for any other event. */
export function paidInvoiceIdOf(req: ReceivedRequest): string | undefined {
  try {
    const body = JSON.parse(req.body) as { invoiceId?: string; status?: string };
    return body.status === 'Paid' ? body.invoiceId : undefined;
  } catch {
    return undefined;
  }
}

export function webhookHeadersOf(req: ReceivedRequest): Record<string, string> {
  return {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  };
}

/** invoiceId → the invoice.paid requests the receiver got for it. */
export function paidWebhooksByInvoice(receiver: Receiver): Map<string, ReceivedRequest[]> {
  const byInvoice = new Map<string, ReceivedRequest[]>();
  for (const req of receiver.requests) {
    const id = paidInvoiceIdOf(req);
    if (id) byInvoice.set(id, [...(byInvoice.get(id) ?? []), req]);
  }
  return byInvoice;
}

export interface Readiness {
  status: number;
  body: any;
  ms: number;
}

async function getJson(url: string, timeoutMs = 5_000): Promise<Readiness> {
  const started = Date.now();
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(timeoutMs) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON */
    }
    return { status: res.status, body, ms: Date.now() - started };
  } catch (err) {
    return { status: 0, body: String(err), ms: Date.now() - started };
  }
}

/** The gateway's /readyz; scope 'traffic' is what Kubernetes routes on (requests can be served). */
export const gatewayReadiness = (system: BootedSystem, scope: 'all' | 'traffic' = 'all') =>
  getJson(`${system.gatewayUrl}/readyz${scope === 'traffic' ? '?scope=traffic' : ''}`);

/** Each service's admin /readyz (HTTP/1.1, what Prometheus-style probes read). */
export async function adminReadiness(system: BootedSystem, scope: 'all' | 'traffic' = 'all'): Promise<Record<ServiceName, Readiness>> {
  const answers = await Promise.all(SERVICES.map((name) => getJson(`${system.processes[name].adminUrl}/readyz${scope === 'traffic' ? '?scope=traffic' : ''}`)));
  return Object.fromEntries(SERVICES.map((name, i) => [name, answers[i]])) as Record<ServiceName, Readiness>;
}

/** Each service's grpc.health.v1 Check answer (what Kubernetes `grpc:` probes ask), for '' and 'liveness'. */
export async function grpcHealth(system: BootedSystem, service = ''): Promise<Record<ServiceName, string>> {
  const answers = await Promise.all(
    SERVICES.map(async (name) => {
      const client = createRpcClient(Health, system.processes[name].grpcUrl as string, { timeoutMs: 3_000 });
      try {
        const res = await client.check(create(HealthCheckRequestSchema, { service }));
        return ServingStatus[res.status] ?? 'UNKNOWN';
      } catch (err) {
        return `error: ${err instanceof Error ? err.message : String(err)}`;
      }
    }),
  );
  return Object.fromEntries(SERVICES.map((name, i) => [name, answers[i]])) as Record<ServiceName, string>;
}

/** pid and restart count of every process, to prove nothing was restarted. */
export function processSnapshot(system: BootedSystem): Record<string, { pid: number; restarts: number }> {
  return Object.fromEntries(Object.entries(system.current()).map(([name, p]) => [name, { pid: p.pid, restarts: p.restarts }]));
}

export function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))] ?? NaN;
}

/** Polls `check` every `everyMs` until it returns a value other than undefined; throws after `timeoutMs`. */
export async function waitUntil<T>(what: string, timeoutMs: number, check: () => Promise<T | undefined>, everyMs = 100): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not reached within ${timeoutMs} ms${last ? ` (${String(last)})` : ''}`);
    await sleep(everyMs);
  }
}

/**
 * Copies the processes' logs to test-artifacts/resilience/<label> (git-ignored) before the
 * system's folder is removed, so what happened during an outage can be read after the run.
 */
export function keepLogs(system: BootedSystem | undefined, label: string): void {
  if (!system) return;
  const from = path.join(system.dataDir, 'logs');
  const to = path.join(REPO_ROOT, 'test-artifacts', 'resilience', label);
  if (!existsSync(from)) return;
  rmSync(to, { recursive: true, force: true });
  cpSync(from, to, { recursive: true });
}
