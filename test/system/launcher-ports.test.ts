/**
 * `npm start` with a fixed GATEWAY_PORT gives the services their fixed ports (50051–50054,
 * 9051–9054): one of them taken — another checkout's system — stops it at once, naming the port,
 * before anything is migrated or started. Its services crash-looped while its gateway answered with
 * the other system's services and database, and it printed "coinvoice is ready" (an outside review).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { SERVICE_PORTS } from '@coinvoice/runtime';
import { testNatsUrl, uniqueName } from '../support/infra';
import { freePortForTest } from '../support/ports';
import { LAUNCHER } from '../support/system';

let holder: Server | undefined;

afterAll(async () => {
  await new Promise((resolve) => (holder ? holder.close(resolve) : resolve(undefined)));
});

test("a fixed GATEWAY_PORT with the auth service's port taken: the launcher exits 1 at once, naming the port and GATEWAY_PORT=0", async () => {
  // Held here (or already held by something else: taken either way).
  holder = await new Promise<Server | undefined>((resolve) => {
    const server = createServer();
    server.once('error', () => resolve(undefined));
    server.listen(SERVICE_PORTS.auth.grpc, '127.0.0.1', () => resolve(server));
  });
  const dataDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-ports-'));
  try {
    const launcher = spawn(process.execPath, [LAUNCHER], {
      env: {
        ...process.env,
        // Never reached: the check comes first (a database that does not exist would fail later).
        DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/coinvoice_never_created',
        NATS_URL: testNatsUrl(),
        EVENT_NAMESPACE: uniqueName('ports'),
        GATEWAY_PORT: String(await freePortForTest()),
        COINVOICE_DATA_DIR: dataDir,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    launcher.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    launcher.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const startedAt = Date.now();
    const code = await new Promise<number | null>((resolve) => launcher.once('exit', resolve));
    expect(code).toBe(1);
    expect(Date.now() - startedAt).toBeLessThan(15_000);
    // (Other fixed ports may be taken too on a shared machine: they are named in the same line.)
    expect(output).toMatch(new RegExp(`coinvoice could not start: ports? (\\S+ \\([^)]*\\), )*${SERVICE_PORTS.auth.grpc} \\(auth's gRPC\\)[^\\n]* in use: another coinvoice on this machine\\? Stop it, or start this one with GATEWAY_PORT=0`));
    expect(output).not.toContain('ready');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 30_000);

test('a NATS_URL where nothing answers stops the launcher within seconds, naming NATS_URL (it said, a minute later, only that the gateway was not ready)', async () => {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-nats-'));
  const natsPort = await freePortForTest();
  try {
    const launcher = spawn(process.execPath, [LAUNCHER], {
      env: {
        ...process.env,
        DATABASE_URL: 'postgres://postgres@127.0.0.1:5432/coinvoice_never_created',
        NATS_URL: `nats://user:S3CRET@127.0.0.1:${natsPort}`,
        EVENT_NAMESPACE: uniqueName('nats'),
        GATEWAY_PORT: '0',
        COINVOICE_DATA_DIR: dataDir,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    launcher.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    launcher.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    const code = await new Promise<number | null>((resolve) => launcher.once('exit', resolve));
    expect(code).toBe(1);
    expect(output).toContain(
      `coinvoice could not start: NATS_URL (nats://user:***@127.0.0.1:${natsPort}) does not answer: nothing accepts a connection on 127.0.0.1:${natsPort}. Start NATS with JetStream (-js) there, or leave NATS_URL unset`,
    );
    expect(output).not.toContain('S3CRET');
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}, 30_000);
