/**
 * Where tests find real Postgres and NATS: DATABASE_URL / NATS_URL when set, else the local
 * servers on 127.0.0.1:5432 / :4222 when they answer, else containers started by testcontainers.
 * Global setup resolves this once and hands the answer to every worker through the environment.
 */
import { randomBytes } from 'node:crypto';
import postgres from 'postgres';

export const RESOLVED_DB_ENV = 'COINVOICE_TEST_DATABASE_URL';
export const RESOLVED_NATS_ENV = 'COINVOICE_TEST_NATS_URL';

/** The launcher's probe: does anything accept a TCP connection there? */
export { portAnswers } from '../../deploy/local/src/infrastructure';

/** The admin URL of the Postgres server the tests use (its `postgres` database). */
export function testDatabaseServerUrl(): string {
  const url = process.env[RESOLVED_DB_ENV];
  if (!url) throw new Error(`${RESOLVED_DB_ENV} is not set: run tests through jest (global setup resolves it)`);
  return url;
}

export function testNatsUrl(): string {
  const url = process.env[RESOLVED_NATS_ENV];
  if (!url) throw new Error(`${RESOLVED_NATS_ENV} is not set: run tests through jest (global setup resolves it)`);
  return url;
}

/** A short random name, safe as a Postgres identifier and a NATS token. */
export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

/** A fresh database of its own for one test file, so files run in parallel and in any order. */
export async function createTestDatabase(prefix = 'cvtest'): Promise<TestDatabase> {
  const serverUrl = testDatabaseServerUrl();
  const name = uniqueName(prefix);
  const admin = postgres(serverUrl, { max: 1, onnotice: () => undefined });
  try {
    await admin.unsafe(`CREATE DATABASE "${name}"`);
  } finally {
    await admin.end();
  }
  const url = new URL(serverUrl);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    name,
    async drop() {
      const conn = postgres(serverUrl, { max: 1, onnotice: () => undefined });
      try {
        await conn.unsafe(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
      } finally {
        await conn.end();
      }
    },
  };
}
