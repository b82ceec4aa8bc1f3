/**
 * What every benchmark that starts the system needs first: a scratch folder, Postgres and NATS
 * (the machine's, or embedded ones: @coinvoice/local), and a database of its own, dropped at the end.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { resolveNats, resolvePostgres } from '@coinvoice/local';

export interface BenchInfrastructure {
  dataDir: string;
  natsUrl: string;
  /** The benchmark's own database. */
  databaseUrl: string;
  /** Drops the database, stops what was started, removes the scratch folder. */
  dispose(): Promise<void>;
}

export async function benchInfrastructure(name: string): Promise<BenchInfrastructure> {
  const dataDir = mkdtempSync(path.join(tmpdir(), `coinvoice-${name}-`));
  const pg = await resolvePostgres(process.env, dataDir);
  const nats = await resolveNats(process.env, dataDir);
  const dbName = `${name}_${randomBytes(4).toString('hex')}`;
  const admin = postgres(pg.url, { max: 1, onnotice: () => undefined });
  await admin.unsafe(`create database "${dbName}"`);
  const url = new URL(pg.url);
  url.pathname = `/${dbName}`;
  return {
    dataDir,
    natsUrl: nats.url,
    databaseUrl: url.toString(),
    async dispose() {
      await admin.unsafe(`drop database if exists "${dbName}" with (force)`).catch(() => undefined);
      await admin.end();
      await nats.stop();
      await pg.stop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Runs a benchmark's main: exit 0 when it resolves, 1 with its error when it throws. */
export function runBenchmark(name: string, main: () => Promise<void>): void {
  main().then(
    () => process.exit(0),
    (err: unknown) => {
      console.error(`${name} failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
      process.exit(1);
    },
  );
}
