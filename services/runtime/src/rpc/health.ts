/**
 * grpc.health.v1 served as an ordinary Connect service. A process is SERVING only while every
 * dependency it cannot work without (Postgres) answers and it is not shutting down, so Kubernetes
 * `grpc:` probes and the gateway's /readyz see the truth rather than "process is up". A
 * dependency it can do without for a while (NATS: events wait in the outbox, consumers catch up)
 * is checked and reported too, but its outage does not make the process NOT_SERVING: an unready
 * pod gets no traffic, so that would turn a NATS blip into an outage of the whole API.
 */
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError, type ServiceImpl } from '@connectrpc/connect';
import {
  Health,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthCheckResponseSchema,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from '../gen/grpc/health/v1/health_pb';

export { ServingStatus };

export interface DependencyCheck {
  name: string;
  /** Resolves when the dependency answers; rejects (or times out) otherwise. */
  check(): Promise<void>;
  /**
   * false: requests are still served while this dependency is down (NATS: events wait in the
   * outbox), so its outage makes the process NOT_SERVING overall but leaves it ready for traffic
   * (the `readiness` health name Kubernetes routes on). Default true.
   */
  neededForRequests?: boolean;
}

export interface HealthReport {
  /** Every dependency answers and the process is not stopping: the overall health. */
  serving: boolean;
  /** The dependencies requests need answer: the process should keep receiving traffic. */
  acceptingRequests: boolean;
  dependencies: Record<string, 'up' | string>;
}

const CHECK_TIMEOUT_MS = 1_000;
/**
 * A dependency requests do not need must not delay the readiness answer: callers (the gateway's
 * /readyz, Kubernetes probes) give up after about a second, and a NATS client that is reconnecting
 * can leave a ping unanswered for that long.
 */
const OPTIONAL_CHECK_TIMEOUT_MS = 250;
/** The health "service" name Kubernetes liveness probes ask for (`grpc: {service: liveness}`). */
export const LIVENESS_SERVICE = 'liveness';
/**
 * The name Kubernetes readiness probes ask for: SERVING while requests can be served, which
 * needs Postgres but not NATS. The overall check ("") stays strict: it reports a NATS outage.
 */
export const READINESS_SERVICE = 'readiness';
/** Probes and /readyz poll often; a fresh answer this recent is reused. */
const CACHE_MS = 250;

function withTimeout(promise: Promise<void>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<void>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

export class HealthMonitor {
  private shuttingDown = false;
  private cached: { at: number; report: Promise<HealthReport> } | undefined;

  constructor(
    /** Fully-qualified gRPC service names this process serves, e.g. coinvoice.auth.v1.AuthService. */
    readonly services: readonly string[],
    private readonly dependencies: readonly DependencyCheck[],
  ) {}

  markShuttingDown(): void {
    this.shuttingDown = true;
    this.cached = undefined;
  }

  report(): Promise<HealthReport> {
    const now = Date.now();
    if (this.cached && now - this.cached.at < CACHE_MS) return this.cached.report;
    const report = this.evaluate();
    this.cached = { at: now, report };
    return report;
  }

  private async evaluate(): Promise<HealthReport> {
    const results = await Promise.all(
      this.dependencies.map(async (dep) => {
        try {
          await withTimeout(dep.check(), dep.neededForRequests === false ? OPTIONAL_CHECK_TIMEOUT_MS : CHECK_TIMEOUT_MS);
          return [dep.name, 'up', dep.neededForRequests ?? true] as const;
        } catch (err) {
          return [dep.name, err instanceof Error ? err.message : String(err), dep.neededForRequests ?? true] as const;
        }
      }),
    );
    const dependencies = Object.fromEntries(results.map(([name, state]) => [name, state]));
    const serving = !this.shuttingDown && results.every(([, state]) => state === 'up');
    const acceptingRequests = !this.shuttingDown && results.every(([, state, needed]) => state === 'up' || !needed);
    return { serving, acceptingRequests, dependencies };
  }

  async status(service: string): Promise<ServingStatus> {
    // Liveness asks only whether this process should keep running: a Postgres or NATS outage
    // makes it not ready (no traffic), but restarting every pod would not bring the database back.
    if (service === LIVENESS_SERVICE) return this.shuttingDown ? ServingStatus.NOT_SERVING : ServingStatus.SERVING;
    if (service === READINESS_SERVICE) {
      return (await this.report()).acceptingRequests ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
    }
    if (service !== '' && !this.services.includes(service)) return ServingStatus.SERVICE_UNKNOWN;
    const { serving } = await this.report();
    return serving ? ServingStatus.SERVING : ServingStatus.NOT_SERVING;
  }
}

const WATCH_INTERVAL_MS = 1_000;

export class HealthService implements ServiceImpl<typeof Health> {
  constructor(private readonly monitor: HealthMonitor) {}

  async check(request: HealthCheckRequest): Promise<HealthCheckResponse> {
    const status = await this.monitor.status(request.service);
    if (status === ServingStatus.SERVICE_UNKNOWN) {
      throw new ConnectError(`unknown service ${request.service}`, Code.NotFound);
    }
    return create(HealthCheckResponseSchema, { status });
  }

  /** Sends the status now and again whenever it changes, until the caller goes away. */
  async *watch(request: HealthCheckRequest, context: { signal: AbortSignal }): AsyncIterable<HealthCheckResponse> {
    let last: ServingStatus | undefined;
    while (!context.signal.aborted) {
      const status = await this.monitor.status(request.service);
      if (status !== last) {
        last = status;
        yield create(HealthCheckResponseSchema, { status });
      }
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, WATCH_INTERVAL_MS);
        context.signal.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve();
        }, { once: true });
      });
    }
  }
}
