/**
 * Runs one service in this test process, as its main.ts would, against a fresh database of the
 * test's own and an event namespace of its own, on free ports. For gRPC-level tests of a service;
 * end-to-end tests through the gateway use ./system.
 */
import type { ServiceDefinition, Settings } from '@coinvoice/runtime';
import { migrateService, startService } from '@coinvoice/runtime';
import { eventKeyEnv } from './event-keys';
import { createTestDatabase, testNatsUrl, uniqueName, type TestDatabase } from './infra';

export interface TestService {
  /** Base URL of the gRPC port (h2c), for createRpcClient. */
  url: string;
  adminUrl: string;
  database: TestDatabase;
  namespace: string;
  env: NodeJS.ProcessEnv;
  /** Graceful stop, as on SIGTERM. Keeps the database (restart with startAgain). */
  stop(): Promise<void>;
  /** Starts the service again on the same database and namespace (e.g. after stop). */
  startAgain(): Promise<TestService>;
  /** Stops the service and drops the database. */
  dispose(): Promise<void>;
}

export interface TestServiceOptions {
  /** Extra settings, e.g. AUTH_URL or a compressed retry schedule. */
  env?: NodeJS.ProcessEnv;
  /** Reuse a database / namespace (several services of one system in one test). */
  database?: TestDatabase;
  namespace?: string;
}

export async function startTestService<S extends Settings>(
  definition: ServiceDefinition<S>,
  options: TestServiceOptions = {},
): Promise<TestService> {
  const database = options.database ?? (await createTestDatabase(`cv${definition.name}`));
  const namespace = options.namespace ?? uniqueName('t');
  const env: NodeJS.ProcessEnv = {
    APP_ENV: 'development',
    DATABASE_URL: database.url,
    NATS_URL: testNatsUrl(),
    EVENT_NAMESPACE: namespace,
    GRPC_PORT: '0',
    ADMIN_PORT: '0',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_POOL_MAX: '5',
    SHUTDOWN_GRACE_MS: '2000',
    // Tests read the events a service wrote from its outbox: keep them there after publishing.
    OUTBOX_KEEP_PUBLISHED: '10m',
    // Real key files, as npm start and the manifests give them (test/support/event-keys.ts).
    ...eventKeyEnv(definition.name),
    ...options.env,
  };
  await migrateService(definition, env);
  const boot = async (): Promise<TestService> => {
    const started = await startService(definition, env);
    let stopped = false;
    const stop = async () => {
      if (stopped) return;
      stopped = true;
      await started.running.stop();
    };
    return {
      url: `http://127.0.0.1:${started.grpcPort}`,
      adminUrl: `http://127.0.0.1:${started.adminPort}`,
      database,
      namespace,
      env,
      stop,
      startAgain: boot,
      async dispose() {
        await stop();
        if (!options.database) await database.drop().catch(() => undefined);
      },
    };
  };
  return boot();
}
