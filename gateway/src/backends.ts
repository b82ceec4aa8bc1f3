/** The gateway's gRPC clients, one per backend service, and their combined readiness. */
import { create } from '@bufbuild/protobuf';
import { createRpcClient, READINESS_SERVICE, ServingStatus, type Logger, type RpcTls } from '@coinvoice/runtime';
import { Health, HealthCheckRequestSchema } from '@coinvoice/runtime/gen/grpc/health/v1/health_pb';
import { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import type { Client } from '@connectrpc/connect';

/**
 * The invoice calls the gateway makes once per API request, sent in batches when several are made
 * in one turn (docs/performance.md#batched-calls). Lists stay out: a batch of their pages could
 * pass gRPC's 4 MB message limit.
 */
export const GATEWAY_BATCHED_INVOICE_CALLS = [
  InvoiceService.method.createInvoice,
  InvoiceService.method.getInvoice,
  InvoiceService.method.payInvoice,
  InvoiceService.method.getInvoiceProject,
  InvoiceService.method.getCheckout,
];

export type BackendName = 'auth' | 'invoice' | 'payout' | 'notifier';

export interface BackendUrls {
  auth: string;
  invoice: string;
  payout: string;
  notifier: string;
}

export class Backends {
  private readonly health: Record<BackendName, Client<typeof Health>>;
  /** The backends that answered the traffic check SERVING at least once. */
  private readonly servedOnce = new Set<BackendName>();

  constructor(
    readonly urls: BackendUrls,
    private readonly options: { tls?: RpcTls; logger?: Logger } = {},
  ) {
    const client = (url: string) => createRpcClient(Health, url, { timeoutMs: 1_000, tls: options.tls });
    this.health = { auth: client(urls.auth), invoice: client(urls.invoice), payout: client(urls.payout), notifier: client(urls.notifier) };
  }

  /**
   * Each backend's grpc.health.v1 answer: SERVING, NOT_SERVING, or why it could not be asked.
   * scope 'all' asks the overall health (every dependency of every backend answers); 'traffic'
   * asks `readiness` (requests can be served: what a load balancer should route on).
   */
  async readiness(scope: 'all' | 'traffic' = 'all'): Promise<{ ready: boolean; backends: Record<BackendName, string> }> {
    const names = Object.keys(this.health) as BackendName[];
    const service = scope === 'traffic' ? READINESS_SERVICE : '';
    const answers = await Promise.all(
      names.map(async (name) => {
        try {
          const res = await this.health[name].check(create(HealthCheckRequestSchema, { service }));
          return ServingStatus[res.status] ?? 'UNKNOWN';
        } catch (err) {
          // The reason goes to the log only: /readyz is public and must not describe the network.
          this.options.logger?.warn({ backend: name, error: err instanceof Error ? err.message : String(err) }, 'readiness: backend unreachable');
          return 'UNREACHABLE';
        }
      }),
    );
    const backends = Object.fromEntries(names.map((n, i) => [n, answers[i] as string])) as Record<BackendName, string>;
    if (scope === 'all') return { ready: answers.every((a) => a === 'SERVING'), backends };
    // Traffic: ready once every backend has answered SERVING since this process started (its
    // addresses, TLS and keys work: a misconfigured new replica gets no traffic), and ready from
    // then on. A backend's outage later answers 503 on the requests that need it; it must not take
    // every gateway replica out of the Service, and with them the requests that do not (invoices
    // and checkout while the notifier is down — an outside review's cascade).
    // Not one backend answering is this replica cut off (its node's network, its certificates):
    // then the other replicas should have the traffic.
    names.forEach((name, i) => answers[i] === 'SERVING' && this.servedOnce.add(name));
    return { ready: this.servedOnce.size === names.length && answers.includes('SERVING'), backends };
  }
}
