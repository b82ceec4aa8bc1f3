/**
 * The one way a coinvoice service process runs: configuration validated at start, its own
 * Postgres schema, its JetStream stream, an outbox relay, the gRPC port with health, the admin
 * port, and an orderly stop. Each service's main.ts only describes what is its own.
 *
 * `node main.js migrate` applies the service's migrations and exits (a Kubernetes Job, npm run
 * migrate, and the local launcher use it; migrate-service.ts); `node main.js` serves.
 */
import type { NatsConnection } from 'nats';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { registerOutboxMetrics } from './events/outbox-metrics';
import { startAdminServer } from './admin';
import { bindHostSetting, commonSettings, ConfigError, loadConfig, setting, type ConfigOf, type Env, type Settings } from './config';
import { createDb, pingDb, type Sql } from './db';
import { connectNats, ensureServiceStream, type StreamSettings } from './events/bus';
import { EVENTS_CONNECT_TIMEOUT_MS, EventsSide, exitRefusedByNats } from './events/events-side';
import { processedEventsRetention } from './events/consumer';
import { OutboxRelay } from './events/outbox';
import { eventKeySettings, EventVerifier, signerOf } from './events/signing';
import { runMain, type Running } from './lifecycle';
import { createLogger, type Logger } from './log';
import type { ServiceSchema } from './migrate-service';
import { callerPolicy, grpcHealthPortSetting, rpcTlsOf, rpcTlsSettings, type ServiceCallers } from './internal-calls';
import { HealthMonitor } from './rpc/health';
import { startRpcServer, type RpcRouter } from './rpc/server';
import type { Worker } from './worker';
import type { RpcTls } from './rpc/tls';

export type ServiceName = 'auth' | 'invoice' | 'payout' | 'notifier';

/** Default ports: gRPC 5005x, admin 9005x, so one machine runs them all side by side. */
export const SERVICE_PORTS: Record<ServiceName, { grpc: number; admin: number }> = {
  auth: { grpc: 50051, admin: 9051 },
  invoice: { grpc: 50052, admin: 9052 },
  payout: { grpc: 50053, admin: 9053 },
  notifier: { grpc: 50054, admin: 9054 },
};

export type CommonConfig = ConfigOf<typeof commonSettings> &
  ConfigOf<typeof rpcTlsSettings> &
  ConfigOf<typeof eventKeySettings> & { GRPC_PORT: number; ADMIN_PORT: number; GRPC_HEALTH_PORT: number; BIND_HOST: string };

export interface ServiceDeps<C> {
  config: C & CommonConfig;
  sql: Sql;
  logger: Logger;
  metrics: Registry;
  /** Mutual TLS material for this process's RPC clients (undefined: plaintext, development). */
  rpcTls: RpcTls | undefined;
  /** The producers' public keys (EVENT_VERIFY_KEYS), for every IdempotentConsumer of the service. */
  eventVerifier: EventVerifier;
}

/** Background work a service runs next to its RPCs (relays, consumers, sweepers). */

export interface ServiceParts {
  routes(router: RpcRouter): void;
  workers?: Worker[];
  /**
   * The workers that need NATS (consumers, listeners), built once it answers: at start, or later
   * when it was unreachable then (docs/architecture.md#starting-while-nats-is-down).
   */
  eventWorkers?(nats: NatsConnection): Worker[];
}

/** A service: its schema (migrate-service.ts) and how it serves. */
export interface ServiceDefinition<S extends Settings> extends ServiceSchema {
  name: ServiceName;
  /** Fully-qualified names of the gRPC services served, for grpc.health.v1 per-service checks. */
  rpcServices: string[];
  settings: S;
  /**
   * Which processes may call each RPC (by certificate name), checked on every call when mutual
   * TLS is on (always in production).
   */
  callers: ServiceCallers[];
  /**
   * The services whose events this one consumes: EVENT_VERIFY_KEYS must hold a key of each, checked
   * at start (docs/events.md), so a consumer never starts unable to verify what it reads.
   */
  consumesEventsOf?: readonly ServiceName[];
  build(deps: ServiceDeps<ConfigOf<S>>): ServiceParts | Promise<ServiceParts>;
  /**
   * Rules across settings (e.g. what APP_ENV=production refuses, docs/architecture.md#production-refuses-what-is-unsafe), run right after
   * parsing and before any connection: throw a ConfigError naming the variable.
   */
  checkConfig?(config: ConfigOf<S> & CommonConfig): void;
  /**
   * The variables checkConfig needs non-empty when APP_ENV=production, from the raw environment:
   * lets a manifest check find a missing one without starting the process.
   */
  requiredInProduction?(env: Env): string[];
}

export function serviceSettings(name: ServiceName) {
  return {
    ...commonSettings,
    GRPC_PORT: setting.port(SERVICE_PORTS[name].grpc),
    GRPC_HEALTH_PORT: grpcHealthPortSetting,
    ...rpcTlsSettings,
    ...eventKeySettings,
    ADMIN_PORT: setting.port(SERVICE_PORTS[name].admin),
    BIND_HOST: bindHostSetting,
  };
}

/** The stream shape every process of the system configures alike (see StreamSettings). */
export function streamSettingsOf(config: CommonConfig): StreamSettings {
  return { replicas: config.NATS_STREAM_REPLICAS, maxAgeMs: config.NATS_STREAM_MAX_AGE };
}

export function loadServiceConfig<S extends Settings>(definition: ServiceDefinition<S>, env: Env = process.env) {
  const config = loadConfig({ ...serviceSettings(definition.name), ...definition.settings }, env) as ConfigOf<S> & CommonConfig;
  const unverifiable = new EventVerifier(config.EVENT_VERIFY_KEYS).missingProducers(definition.consumesEventsOf ?? []);
  if (unverifiable.length > 0) {
    throw new ConfigError(
      'EVENT_VERIFY_KEYS',
      `${eventKeySettings.EVENT_VERIFY_KEYS.expected}, with a key of ${new Intl.ListFormat('en', { type: 'conjunction' }).format(unverifiable)} (${definition.name} consumes its events)`,
      undefined,
    );
  }
  // A consumer that forgot an event its stream still holds would apply it again on a replay.
  if (config.PROCESSED_EVENTS_RETENTION_DAYS * 86_400_000 <= config.NATS_STREAM_MAX_AGE) {
    throw new ConfigError(
      'PROCESSED_EVENTS_RETENTION_DAYS',
      `more days than NATS_STREAM_MAX_AGE keeps events (${Math.ceil(config.NATS_STREAM_MAX_AGE / 86_400_000)} d): a consumer must remember every event its stream can still deliver`,
      String(config.PROCESSED_EVENTS_RETENTION_DAYS),
    );
  }
  definition.checkConfig?.(config);
  return config;
}

/** Starts everything; resolves once the process is serving. */
export async function startService<S extends Settings>(
  definition: ServiceDefinition<S>,
  env: Env = process.env,
): Promise<{ running: Running; logger: Logger; grpcPort: number; adminPort: number }> {
  const config = loadServiceConfig(definition, env);
  const signer = signerOf(config);
  const logger = createLogger({ service: definition.name, level: config.LOG_LEVEL });
  const metrics = new Registry();
  collectDefaultMetrics({ register: metrics });
  const eventVerifier = new EventVerifier(config.EVENT_VERIFY_KEYS, metrics);

  const sql = createDb({ url: config.DATABASE_URL, schema: definition.name, max: config.DATABASE_POOL_MAX, logger });
  registerOutboxMetrics(metrics, sql);
  const rpcTls = rpcTlsOf(config);
  const parts = await definition.build({ config, sql, logger, metrics, rpcTls, eventVerifier });
  const events = new EventsSide({
    logger,
    connect: () => connectNats({ url: config.NATS_URL, name: definition.name, logger, connectTimeoutMs: EVENTS_CONNECT_TIMEOUT_MS }),
    // Refused by NATS after a start without it: exit, as a start would have (the orchestrator shows it).
    onRefused: () => exitRefusedByNats(logger),
    async setUp(nats) {
      const ensureOwnStream = () => ensureServiceStream(nats, { namespace: config.EVENT_NAMESPACE, service: definition.name, ...streamSettingsOf(config) });
      await ensureOwnStream();
      const relay = new OutboxRelay({
        sql,
        nats,
        namespace: config.EVENT_NAMESPACE,
        signer,
        logger,
        keepPublishedMs: config.OUTBOX_KEEP_PUBLISHED,
        signatures: config.EVENT_SIGNATURES,
        restoreStream: ensureOwnStream,
      });
      return [relay, ...(parts.eventWorkers?.(nats) ?? [])];
    },
  });
  const pruner = processedEventsRetention({ sql, logger, retentionMs: config.PROCESSED_EVENTS_RETENTION_DAYS * 24 * 60 * 60_000 });
  const workers: Worker[] = [pruner, ...(parts.workers ?? [])];

  const health = new HealthMonitor(definition.rpcServices, [
    { name: 'postgres', check: () => pingDb(sql) },
    // Requests never need NATS (events wait in the outbox): its outage makes the process NOT_SERVING
    // overall, and still ready for traffic (the `readiness` health name).
    { name: 'nats', check: () => events.ping(), neededForRequests: false },
  ]);
  const rpc = await startRpcServer({
    host: config.BIND_HOST,
    port: config.GRPC_PORT,
    routes: parts.routes,
    health,
    logger,
    metrics,
    tls: rpcTls,
    // Without TLS there is no caller identity to check (development): everything is allowed.
    authorize: rpcTls ? callerPolicy(...definition.callers) : undefined,
    healthPort: rpcTls && config.GRPC_HEALTH_PORT > 0 ? config.GRPC_HEALTH_PORT : undefined,
  });
  const admin = await startAdminServer({ host: config.BIND_HOST, port: config.ADMIN_PORT, metrics, readiness: () => health.report() });
  for (const worker of workers) await worker.start();
  await events.start();
  logger.info({ grpcPort: rpc.port, adminPort: admin.port }, `${definition.name} service serving`);

  const running: Running = {
    async stop() {
      health.markShuttingDown();
      await rpc.close(config.SHUTDOWN_GRACE_MS);
      // The events side first: a consumer's message in hand may still hand a worker more work.
      await events.stop();
      await Promise.all(workers.map((w) => w.stop()));
      await admin.close();
      await sql.end({ timeout: 5 });
    },
  };
  return { running, logger, grpcPort: rpc.port, adminPort: admin.port };
}

/** A service's serve command (its run.ts): `runService(definition)`. `migrate` never gets here: main.ts runs it (migrate-service.ts). */
export function runService<S extends Settings>(definition: ServiceDefinition<S>): void {
  runMain({ name: definition.name, start: () => startService(definition) });
}
