/**
 * Starting while NATS is down (docs/architecture.md#starting-while-nats-is-down).
 */
import type { NatsConnection } from 'nats';
import type { Logger } from '../log';
import type { Worker } from '../worker';
import { pingNats } from './bus';

/** How long a process whose NATS was unreachable waits before it tries again. */
const NATS_RETRY_MS = 1_000;

/**
 * A server that did not answer (as opposed to one that refused us): nats.js's codes, and the
 * socket's own for a name not resolvable yet (a Kubernetes Service not created) or a network down.
 */
const UNREACHABLE: ReadonlySet<string> = new Set(['CONNECTION_REFUSED', 'CONNECTION_TIMEOUT', 'TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET']);
/** While NATS does not answer, the warning is repeated this often (attempts), so a wrong NATS_URL shows. */
const WARN_EVERY_ATTEMPTS = 60;

/** Whether `err` says NATS did not answer (rather than refused us). */
export function isNatsUnreachable(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && UNREACHABLE.has(String(err.code));
}

/**
 * A process's events side (docs/architecture.md#starting-while-nats-is-down): its NATS connection
 * and what needs it (a service's stream, outbox relay and consumers; the gateway's revocation
 * feed). Requests never need NATS, so a process whose NATS does not answer at start serves anyway
 * and sets its events side up in the background once NATS answers; any other failure at start
 * (credentials, permissions) stops the process, as a bad setting does.
 */
export class EventsSide {
  private nats: NatsConnection | undefined;
  private workers: Worker[] = [];
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  private attempting: Promise<void> | undefined;
  private failedAttempts = 0;

  constructor(
    private readonly options: {
      connect(): Promise<NatsConnection>;
      /** Everything that needs the connection: its workers, to be started. */
      setUp(nats: NatsConnection): Promise<Worker[]>;
      logger: Logger;
      /** Between attempts while NATS does not answer (default 1 s). */
      retryMs?: number;
      /** Called once when NATS did not answer at start (e.g. to read from elsewhere what its events would say). */
      onUnreachableAtStart?: () => void;
    },
  ) {}

  /** One attempt now: set up, or (NATS unreachable) serving without it and trying again in the background. */
  async start(): Promise<void> {
    try {
      await this.attempt();
    } catch (err) {
      if (!isNatsUnreachable(err)) throw err;
      this.options.logger.warn({ err }, 'nats does not answer: serving requests without it; trying again every second');
      this.options.onUnreachableAtStart?.();
      this.tryAgainLater();
    }
  }

  /** Resolves when NATS answers a round trip (health). */
  ping(): Promise<void> {
    return this.nats ? pingNats(this.nats) : Promise.reject(new Error('nats: not connected since the process started'));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.attempting?.catch(() => undefined);
    await Promise.all(this.workers.map((worker) => worker.stop()));
    await this.nats?.drain().catch(() => undefined);
  }

  private async attempt(): Promise<void> {
    const nats = await this.options.connect();
    const started: Worker[] = [];
    try {
      const workers = await this.options.setUp(nats);
      for (const worker of workers) {
        if (this.stopped) break;
        await worker.start();
        started.push(worker);
      }
    } catch (err) {
      await Promise.all(started.map((worker) => worker.stop().catch(() => undefined)));
      await nats.close().catch(() => undefined);
      throw err;
    }
    this.nats = nats;
    this.workers = started;
  }

  private tryAgainLater(): void {
    this.retry = setTimeout(() => {
      this.attempting = this.attempt().then(
        () => this.options.logger.info('nats answers: what needs it is set up now'),
        (err: unknown) => {
          if (this.stopped) return;
          this.failedAttempts++;
          if (!isNatsUnreachable(err)) this.options.logger.error({ err }, 'nats answers but what needs it could not be set up; trying again');
          else if (this.failedAttempts % WARN_EVERY_ATTEMPTS === 0) this.options.logger.warn({ err, attempts: this.failedAttempts }, 'nats still does not answer; serving requests without it');
          this.tryAgainLater();
        },
      );
    }, this.options.retryMs ?? NATS_RETRY_MS);
  }
}
