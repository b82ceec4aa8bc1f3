/**
 * The NATS JetStream side of events: connection, subject and stream naming, stream setup, health.
 *
 * Naming. Every subject and stream lives under an event namespace (default "coinvoice"), so a
 * test can isolate itself with a namespace of its own on a shared server:
 *   event type  `invoice.paid`  → subject `<ns>.invoice.paid`
 *   service     `invoice`       → stream  `<NS>_INVOICE` holding subjects `<ns>.invoice.>`
 * The first token of an event type is the service that owns (publishes) it.
 */
import {
  connect,
  DiscardPolicy,
  Events,
  NatsError,
  nanos,
  RetentionPolicy,
  StorageType,
  type JetStreamManager,
  type NatsConnection,
  type StreamConfig,
  type StreamInfo,
} from 'nats';
import type { Logger } from '../log';

export const DEFAULT_EVENT_NAMESPACE = 'coinvoice';

/** NATS headers our events carry besides `Nats-Msg-Id` (= the event id). */
export const EVENT_HEADERS = {
  requestId: 'x-request-id',
  eventType: 'event-type',
  eventKey: 'event-key',
  occurredAt: 'event-time',
} as const;

/** JetStream's de-duplication header: our event id travels in it (publish option `msgID`). */
export const MSG_ID_HEADER = 'Nats-Msg-Id';

const NAMESPACE = /^[A-Za-z0-9_-]{1,32}$/;
const TOKEN = /^[a-z][a-z0-9_]*$/;
const EVENT_TYPE = /^[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+$/;

/** `invoice.paid` → ok; throws on anything that is not dot-separated lower-case tokens. */
export function assertEventType(eventType: string): void {
  if (!EVENT_TYPE.test(eventType)) {
    throw new Error(
      `invalid event type ${JSON.stringify(eventType)}: expected "<service>.<name>" in lower-case tokens, e.g. "invoice.paid"`,
    );
  }
}

/** A namespace as configured (EVENT_NAMESPACE) or already built. */
export type EventNamespaceLike = EventNamespace | string;

export class EventNamespace {
  static of(namespace: EventNamespaceLike): EventNamespace {
    return namespace instanceof EventNamespace ? namespace : new EventNamespace(namespace);
  }

  constructor(readonly name: string = DEFAULT_EVENT_NAMESPACE) {
    if (!NAMESPACE.test(name)) {
      throw new Error(`invalid event namespace ${JSON.stringify(name)}: expected 1 to 32 letters, digits, _ or -`);
    }
  }

  /** `invoice.paid` → `<ns>.invoice.paid` */
  subject(eventType: string): string {
    assertEventType(eventType);
    return `${this.name}.${eventType}`;
  }

  /** `<ns>.invoice.paid` → `invoice.paid`; undefined for a subject outside the namespace. */
  eventTypeOf(subject: string): string | undefined {
    const prefix = `${this.name}.`;
    return subject.startsWith(prefix) ? subject.slice(prefix.length) : undefined;
  }

  /** The stream holding the events that `service` publishes: `<NS>_<SERVICE>`. */
  streamName(service: string): string {
    assertToken(service, 'service');
    return `${this.name}_${service}`.toUpperCase();
  }

  /** The subjects of `service`'s stream: every event type `<service>.…`. */
  streamSubjects(service: string): string[] {
    assertToken(service, 'service');
    return [`${this.name}.${service}.>`];
  }
}

function assertToken(value: string, what: string): void {
  if (!TOKEN.test(value)) throw new Error(`invalid ${what} ${JSON.stringify(value)}: expected lower-case letters, digits and _`);
}

export interface ConnectNatsOptions {
  /** One URL or a comma-separated list, e.g. nats://127.0.0.1:4222 */
  url: string;
  /** Connection name shown by the server (e.g. "invoice"). */
  name: string;
  logger?: Logger;
  /**
   * Keep trying when no server answers at start instead of failing (default false: the caller
   * decides, docs/architecture.md#starting-while-nats-is-down).
   */
  waitOnFirstConnect?: boolean;
  /** How long one connection attempt may take (nats.js's default: 20 s). */
  connectTimeoutMs?: number;
}

/** Connects to NATS; once connected it reconnects forever, logging each disconnect and reconnect. */
/**
 * NATS_URL may carry the service's NATS user (nats://user:password@host:4222, per-service users
 * with their own permissions: deploy/nats/nats-server.conf); the client takes them as options.
 */
export function natsServersAndCredentials(url: string): { servers: string[]; user?: string; pass?: string } {
  let user: string | undefined;
  let pass: string | undefined;
  const servers = url
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((server) => {
      const parsed = URL.canParse(server) ? new URL(server) : undefined;
      if (!parsed || parsed.username === '') return server;
      user = decodeURIComponent(parsed.username);
      pass = decodeURIComponent(parsed.password);
      return `${parsed.protocol}//${parsed.host}`;
    });
  return { servers, ...(user === undefined ? {} : { user, pass }) };
}

export async function connectNats(options: ConnectNatsOptions): Promise<NatsConnection> {
  const nc = await connect({
    ...natsServersAndCredentials(options.url),
    name: options.name,
    maxReconnectAttempts: -1,
    reconnectTimeWait: 1000,
    // A server that stops answering without closing the connection (hung, a half-open link) is
    // taken for gone after two unanswered pings, 20-30 s, not nats.js' default 4-6 minutes: until
    // then the gateway trusts a revocation feed that no longer delivers (an outside review).
    pingInterval: 10_000,
    maxPingOut: 2,
    waitOnFirstConnect: options.waitOnFirstConnect ?? false,
    ...(options.connectTimeoutMs === undefined ? {} : { timeout: options.connectTimeoutMs }),
    // nats.js otherwise builds two Error objects (their stacks captured) for every request, each
    // JetStream publish and pull included, only to enrich a timeout's message: 3 % of the invoice
    // service's CPU in sandbox pay (docs/performance.md#events). A timeout still says what timed out.
    noAsyncTraces: true,
  });
  const logger = options.logger;
  if (logger) {
    void (async () => {
      for await (const status of nc.status()) {
        const fields = { natsStatus: status.type, data: typeof status.data === 'object' ? undefined : status.data };
        if (status.type === Events.Disconnect || status.type === Events.Error) logger.warn(fields, 'nats: connection trouble');
        else if (status.type === Events.Reconnect) logger.info(fields, 'nats: reconnected');
      }
    })().catch((err: unknown) => logger.warn({ err }, 'nats: status stream ended'));
    void nc.closed().then((err) => {
      if (err) logger.error({ err }, 'nats: connection closed with an error');
    });
  }
  return nc;
}

/** Health check: resolves when the server answers a round trip within `timeoutMs`. */
export async function pingNats(nc: NatsConnection, timeoutMs = 2000): Promise<void> {
  if (nc.isClosed()) throw new Error('nats connection is closed');
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`nats did not answer within ${timeoutMs} ms`)), timeoutMs);
  });
  try {
    await Promise.race([nc.flush(), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** JetStream API error codes we react to (see nats-server errors.json). */
export const JS_ERR = {
  streamNotFound: 10059,
  streamNameInUse: 10058,
  consumerNotFound: 10014,
  consumerNameExists: 10013,
  consumerAlreadyExists: 10148,
} as const;

export function isJetStreamApiError(err: unknown, errCode: number): boolean {
  return err instanceof NatsError && err.api_error?.err_code === errCode;
}

export interface EnsureStreamOptions {
  namespace: EventNamespaceLike;
  /** The service whose events the stream holds, e.g. "invoice". */
  service: string;
  /**
   * Window in which JetStream drops a message whose `Nats-Msg-Id` it already stored: covers a
   * relay that published, crashed before marking the row, and re-publishes after restart.
   * Default 10 minutes.
   */
  duplicateWindowMs?: number;
  /** How long events are kept (default 30 days, NATS_STREAM_MAX_AGE); 0 keeps them until limits say otherwise. */
  maxAgeMs?: number;
  /** Copies kept by a NATS cluster (default 1; 3 in a production cluster: NATS_STREAM_REPLICAS). */
  replicas?: number;
  /**
   * false for a consumer of another service's stream: it creates the stream when it starts first
   * (start order is free) but never reconfigures an existing one — that is the owner's, and the
   * consumer's NATS user may not update it (deploy/nats/nats-server.conf).
   */
  reconfigure?: boolean;
}

/**
 * The configured shape of every stream (NATS_STREAM_REPLICAS, NATS_STREAM_MAX_AGE). Every process
 * that ensures a stream, also one that only consumes it, passes the same values: a process with
 * other values would reconfigure the stream back and forth.
 */
export type StreamSettings = Pick<EnsureStreamOptions, 'replicas' | 'maxAgeMs'>;

const DEFAULT_DUPLICATE_WINDOW_MS = 10 * 60_000;
const DEFAULT_MAX_AGE_MS = 30 * 24 * 60 * 60_000;

/**
 * Creates the service's stream, or brings an existing one to this configuration. Safe to call
 * from every replica at start, also at the same moment.
 */
export async function ensureStream(jsm: JetStreamManager, options: EnsureStreamOptions): Promise<StreamInfo> {
  const namespace = EventNamespace.of(options.namespace);
  const name = namespace.streamName(options.service);
  const maxAgeMs = options.maxAgeMs ?? DEFAULT_MAX_AGE_MS;
  const duplicateWindowMs = Math.min(
    options.duplicateWindowMs ?? DEFAULT_DUPLICATE_WINDOW_MS,
    // JetStream refuses a duplicate window longer than the retention.
    maxAgeMs > 0 ? maxAgeMs : Number.MAX_SAFE_INTEGER,
  );
  const config: Partial<StreamConfig> & { name: string } = {
    name,
    subjects: namespace.streamSubjects(options.service),
    storage: StorageType.File,
    retention: RetentionPolicy.Limits,
    discard: DiscardPolicy.Old,
    max_age: nanos(maxAgeMs),
    duplicate_window: nanos(duplicateWindowMs),
    num_replicas: options.replicas ?? 1,
  };
  try {
    // Adding a stream whose identical copy exists is a no-op on the server, which makes the
    // common path (every replica at every start) one request.
    return await jsm.streams.add(config);
  } catch (err) {
    if (!isJetStreamApiError(err, JS_ERR.streamNameInUse)) throw err;
    if (options.reconfigure === false) return jsm.streams.info(name);
    // It exists with another configuration (an older release of ours): update what may change.
    const { storage: _storage, ...updatable } = config;
    return jsm.streams.update(name, updatable);
  }
}

/** `ensureStream` from a connection: what a service calls at start for its own stream (and, with `reconfigure: false`, a consumer for another's). */
export async function ensureServiceStream(nats: NatsConnection, options: EnsureStreamOptions): Promise<StreamInfo> {
  return ensureStream(await nats.jetstreamManager(), options);
}
