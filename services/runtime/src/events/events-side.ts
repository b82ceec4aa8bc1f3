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
 * How long one connection attempt of an events side may take: a NATS_URL whose port accepts and
 * never answers (another service's port, a proxy with nothing behind it) must neither hold the
 * start for nats.js's 20 s nor a shutdown past its grace period.
 */
export const EVENTS_CONNECT_TIMEOUT_MS = 5_000;

/**
 * A server that did not answer (as opposed to one that refused us): nats.js's codes, and the
 * socket's own for a name not resolvable yet (a Kubernetes Service not created) or a network down.
 */
const UNREACHABLE: ReadonlySet<string> = new Set(['CONNECTION_REFUSED', 'CONNECTION_TIMEOUT', 'TIMEOUT', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'ECONNRESET']);
/** While NATS does not answer or the set-up fails, the warning is repeated this often, so a wrong NATS_URL shows. */
const WARN_EVERY_MS = 60_000;

/** A main's `onRefused`: the process exits 1, as a start refused by NATS does (lifecycle.ts). */
export function exitRefusedByNats(logger: Logger): never {
  logger.flush?.();
  process.exit(1);
}

/** Whether `err` says NATS did not answer (rather than refused us). */
export function isNatsUnreachable(err: unknown): boolean {
  return typeof err === 'object' && err !== null && 'code' in err && UNREACHABLE.has(String(err.code));
}

/**
 * A process's events side (docs/architecture.md#starting-while-nats-is-down): its NATS connection
 * and what needs it (a service's stream, outbox relay and consumers; the gateway's revocation
 * feed). Requests never need NATS, so a process whose NATS does not answer at start serves anyway
 * and sets its events side up in the background once NATS answers. NATS refusing us (credentials)
 * stops the process, at start or later (`onRefused`); a set-up that fails once connected (no
 * JetStream yet, a missing permission) fails the start, and later is tried again, its error shown
 * by the health check and logged once a minute.
 */
export class EventsSide {
  private nats: NatsConnection | undefined;
  private workers: Worker[] = [];
  private stopped = false;
  private retry: NodeJS.Timeout | undefined;
  private attempting: Promise<void> | undefined;
  private lastError: unknown;
  private lastWarnedAt = 0;

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
      /**
       * NATS answered and refused us after the start (credentials): the process should stop, as it
       * would have at start, so that its orchestrator shows it. Not called for a set-up failure.
       */
      onRefused(err: unknown): void;
    },
  ) {}

  /** One attempt now: set up, or (NATS unreachable) serving without it and trying again in the background. */
  async start(): Promise<void> {
    try {
      await this.attempt();
    } catch (failure) {
      const err = causeOf(failure);
      if (!(failure instanceof ConnectFailure) || !isNatsUnreachable(err)) throw err;
      this.options.logger.warn({ err }, 'nats does not answer: serving requests without it; trying again every second');
      this.lastError = err;
      this.lastWarnedAt = Date.now();
      this.options.onUnreachableAtStart?.();
      this.tryAgainLater();
    }
  }

  /** Resolves when NATS answers a round trip (health). */
  ping(): Promise<void> {
    if (this.nats) return pingNats(this.nats);
    const last = this.lastError instanceof Error ? `: ${this.lastError.message}` : '';
    return Promise.reject(new Error(`nats: not set up since the process started${last}`));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.retry);
    await this.attempting?.catch(() => undefined);
    await Promise.all(this.workers.map((worker) => worker.stop()));
    await this.nats?.drain().catch(() => undefined);
  }

  private async attempt(): Promise<void> {
    let nats: NatsConnection;
    try {
      nats = await this.options.connect();
    } catch (err) {
      throw new ConnectFailure(err);
    }
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
      throw new SetUpFailure(err);
    }
    this.nats = nats;
    this.workers = started;
  }

  private tryAgainLater(): void {
    this.retry = setTimeout(() => {
      this.attempting = this.attempt().then(
        () => {
          this.lastError = undefined;
          this.options.logger.info('nats answers: what needs it is set up now');
        },
        (failure: unknown) => {
          if (this.stopped) return;
          const err = causeOf(failure);
          this.lastError = err;
          if (failure instanceof ConnectFailure && !isNatsUnreachable(err)) {
            this.options.logger.error({ err }, 'nats refused us (credentials?): stopping, as at a start');
            this.options.onRefused(err);
            return;
          }
          if (Date.now() - this.lastWarnedAt >= WARN_EVERY_MS) {
            this.lastWarnedAt = Date.now();
            const what = failure instanceof SetUpFailure ? 'nats answers but what needs it could not be set up' : 'nats still does not answer';
            this.options.logger.warn({ err }, `${what}; serving requests without it, trying again every second`);
          }
          this.tryAgainLater();
        },
      );
    }, this.options.retryMs ?? NATS_RETRY_MS);
  }
}

/** The connection itself failed (as opposed to what is set up on it). */
class ConnectFailure {
  constructor(readonly cause: unknown) {}
}

/** Connected, and setting up what needs the connection failed. */
class SetUpFailure {
  constructor(readonly cause: unknown) {}
}

function causeOf(failure: unknown): unknown {
  return failure instanceof ConnectFailure || failure instanceof SetUpFailure ? failure.cause : failure;
}
