/** The gateway's gRPC clients, one per backend service, and their combined readiness. */
import { create } from '@bufbuild/protobuf';
import { createRpcClient, READINESS_SERVICE, ServingStatus } from '@coinvoice/runtime';
import { Health, HealthCheckRequestSchema } from '@coinvoice/runtime/gen/grpc/health/v1/health_pb';
import type { Client } from '@connectrpc/connect';

export type BackendName = 'auth' | 'invoice' | 'payout' | 'notifier';

export interface BackendUrls {
  auth: string;
  invoice: string;
  payout: string;
  notifier: string;
}

export class Backends {
  private readonly health: Record<BackendName, Client<typeof Health>>;

  constructor(readonly urls: BackendUrls) {
    this.health = {
      auth: createRpcClient(Health, urls.auth, { timeoutMs: 1_000 }),
      invoice: createRpcClient(Health, urls.invoice, { timeoutMs: 1_000 }),
      payout: createRpcClient(Health, urls.payout, { timeoutMs: 1_000 }),
      notifier: createRpcClient(Health, urls.notifier, { timeoutMs: 1_000 }),
    };
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
          return `unreachable: ${err instanceof Error ? err.message : String(err)}`;
        }
      }),
    );
    const backends = Object.fromEntries(names.map((n, i) => [n, answers[i] as string])) as Record<BackendName, string>;
    return { ready: answers.every((a) => a === 'SERVING'), backends };
  }
}
