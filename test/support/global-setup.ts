import { useCompileCache } from '../../deploy/local/src/compile-cache';
import { portAnswers, RESOLVED_DB_ENV, RESOLVED_NATS_ENV } from './infra';

type Stoppable = { stop(): Promise<unknown> };
const started: Stoppable[] = [];

async function resolvePostgres(): Promise<string> {
  if (process.env.DATABASE_URL) return process.env.DATABASE_URL;
  if (await portAnswers('127.0.0.1', 5432)) return 'postgres://postgres@127.0.0.1:5432/postgres';
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer('postgres:17-alpine')
    .withEnvironment({ POSTGRES_HOST_AUTH_METHOD: 'trust' })
    .withExposedPorts(5432)
    .withWaitStrategy(Wait.forLogMessage(/ready to accept connections/, 2))
    .start();
  started.push(container);
  return `postgres://postgres@${container.getHost()}:${container.getMappedPort(5432)}/postgres`;
}

async function resolveNats(): Promise<string> {
  if (process.env.NATS_URL) return process.env.NATS_URL;
  if (await portAnswers('127.0.0.1', 4222)) return 'nats://127.0.0.1:4222';
  const { GenericContainer, Wait } = await import('testcontainers');
  const container = await new GenericContainer('nats:2.10')
    .withCommand(['-js'])
    .withExposedPorts(4222)
    .withWaitStrategy(Wait.forLogMessage(/Server is ready/))
    .start();
  started.push(container);
  return `nats://${container.getHost()}:${container.getMappedPort(4222)}`;
}

export default async function globalSetup(): Promise<void> {
  const [db, nats] = await Promise.all([resolvePostgres(), resolveNats()]);
  process.env[RESOLVED_DB_ENV] = db;
  process.env[RESOLVED_NATS_ENV] = nats;
  // The workers inherit it, and so does every process a test starts.
  useCompileCache();
  (globalThis as { __coinvoiceContainers?: Stoppable[] }).__coinvoiceContainers = started;
}
