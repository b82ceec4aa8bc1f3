/**
 * Runs the whole system as real processes: migrations, then the four services and the gateway,
 * each its own Node process; waits until the gateway's /readyz answers 200. Like Kubernetes with
 * restartPolicy Always, a process that dies is started again (so a crash test can kill one), and a
 * service can run several replicas (`<SERVICE>_REPLICAS=2`) that share its work.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import { createServer } from 'node:net';
import path from 'node:path';
import { SERVICE_PORTS, type ServiceName } from '@coinvoice/runtime';
import { stopChild } from './infrastructure';

export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
export const SERVICES: ServiceName[] = ['auth', 'invoice', 'payout', 'notifier'];

export function serviceEntry(name: ServiceName): string {
  return path.join(REPO_ROOT, 'services', name, 'dist', 'main.js');
}
export const GATEWAY_ENTRY = path.join(REPO_ROOT, 'gateway', 'dist', 'main.js');

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => (typeof address === 'object' && address ? resolve(address.port) : reject(new Error('no port'))));
    });
  });
}

export interface SystemOptions {
  databaseUrl: string;
  natsUrl: string;
  /** Folder for each process's log file. */
  logDir: string;
  /** 0 = pick free ports for everything (tests); otherwise the documented defaults. */
  gatewayPort: number;
  /** Passed to every process (EVENT_NAMESPACE, LOG_LEVEL, service settings, <SERVICE>_REPLICAS, …). */
  env: NodeJS.ProcessEnv;
  /** Told whenever a process (re)starts, e.g. to rewrite system.json. */
  onChange?: (system: RunningSystem) => void;
  /** Told when a process died and is being started again. */
  onRestart?: (name: string, reason: string) => void;
}

export interface ProcessInfo {
  pid: number;
  grpcUrl?: string;
  adminUrl?: string;
  url?: string;
  restarts: number;
}

export interface RunningSystem {
  gatewayUrl: string;
  /** Where each process listens and its current pid (also written to system.json). */
  describe(): Record<string, ProcessInfo>;
  stop(): Promise<void>;
}

function runToCompletion(entry: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(stderr.trim() || `${entry} ${args.join(' ')} exited ${code}`))));
  });
}

export async function migrateAll(databaseUrl: string, env: NodeJS.ProcessEnv): Promise<void> {
  for (const name of SERVICES) {
    await runToCompletion(serviceEntry(name), ['migrate'], { ...env, DATABASE_URL: databaseUrl });
  }
}

interface Managed {
  name: string;
  entry: string;
  env: NodeJS.ProcessEnv;
  info: Omit<ProcessInfo, 'pid' | 'restarts'>;
  child?: ChildProcess;
  restarts: number;
  recentCrashes: number[];
}

const MAX_CRASHES_PER_MINUTE = 5;

function replicasOf(name: ServiceName, env: NodeJS.ProcessEnv): number {
  const raw = env[`${name.toUpperCase()}_REPLICAS`];
  const n = raw === undefined ? 1 : Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 8) throw new Error(`${name.toUpperCase()}_REPLICAS=${raw} is invalid: expected 1 to 8`);
  return n;
}

async function waitReady(url: string, timeoutMs: number, failed: () => string | undefined): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    const failure = failed();
    if (failure) throw new Error(failure);
    try {
      const res = await fetch(`${url}/readyz`);
      if (res.status === 200) return;
      last = `${res.status} ${await res.text()}`;
    } catch (err) {
      last = err instanceof Error ? err.message : String(err);
    }
    await new Promise((r) => setTimeout(r, 150));
  }
  throw new Error(`the gateway was not ready within ${timeoutMs} ms: ${last}`);
}

export async function startSystem(options: SystemOptions): Promise<RunningSystem> {
  mkdirSync(options.logDir, { recursive: true });
  const auto = options.gatewayPort === 0;
  const shared = { ...options.env, DATABASE_URL: options.databaseUrl, NATS_URL: options.natsUrl };
  await migrateAll(options.databaseUrl, shared);

  const managed: Managed[] = [];
  const primaryUrl = new Map<ServiceName, string>();
  for (const name of SERVICES) {
    const replicas = replicasOf(name, options.env);
    for (let i = 0; i < replicas; i++) {
      const defaults = SERVICE_PORTS[name];
      const grpc = auto || i > 0 ? await freePort() : defaults.grpc;
      const admin = auto || i > 0 ? await freePort() : defaults.admin;
      const grpcUrl = `http://127.0.0.1:${grpc}`;
      if (i === 0) primaryUrl.set(name, grpcUrl);
      managed.push({
        name: i === 0 ? name : `${name}-${i + 1}`,
        entry: serviceEntry(name),
        // Services that call auth (the notifier) find it where it was started; auth comes first.
        env: { ...shared, AUTH_URL: primaryUrl.get('auth'), GRPC_PORT: String(grpc), ADMIN_PORT: String(admin) },
        info: { grpcUrl, adminUrl: `http://127.0.0.1:${admin}` },
        restarts: 0,
        recentCrashes: [],
      });
    }
  }
  const gatewayPort = auto ? await freePort() : options.gatewayPort;
  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  managed.push({
    name: 'gateway',
    entry: GATEWAY_ENTRY,
    env: {
      ...shared,
      GATEWAY_PORT: String(gatewayPort),
      AUTH_URL: primaryUrl.get('auth'),
      INVOICE_URL: primaryUrl.get('invoice'),
      PAYOUT_URL: primaryUrl.get('payout'),
      NOTIFIER_URL: primaryUrl.get('notifier'),
    },
    info: { url: gatewayUrl },
    restarts: 0,
    recentCrashes: [],
  });

  let stopping = false;
  let fatal: string | undefined;
  const describe = () =>
    Object.fromEntries(managed.map((m) => [m.name, { ...m.info, pid: m.child?.pid ?? 0, restarts: m.restarts }]));
  const system: RunningSystem = {
    gatewayUrl,
    describe,
    async stop() {
      stopping = true;
      await Promise.all(managed.map((m) => (m.child ? stopChild(m.child, 15_000) : Promise.resolve())));
    },
  };

  const launch = (m: Managed) => {
    const log = createWriteStream(path.join(options.logDir, `${m.name}.log`), { flags: 'a' });
    // The IPC channel lets a child notice when this launcher dies, and stop instead of lingering.
    // COINVOICE_NODE_ARGS: extra Node flags for every process, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
    const nodeArgs = (options.env.COINVOICE_NODE_ARGS ?? '').split(' ').filter((a) => a !== '');
    const child = spawn(process.execPath, [...nodeArgs, m.entry], { env: m.env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    m.child = child;
    child.once('exit', (code, signal) => {
      if (stopping) return;
      const reason = signal ?? `exit ${code}`;
      const now = Date.now();
      m.recentCrashes = [...m.recentCrashes.filter((t) => now - t < 60_000), now];
      if (m.recentCrashes.length > MAX_CRASHES_PER_MINUTE) {
        fatal = `${m.name} keeps dying (${reason}); see ${path.join(options.logDir, `${m.name}.log`)}`;
        options.onRestart?.(m.name, `${reason}; giving up`);
        return;
      }
      options.onRestart?.(m.name, reason);
      setTimeout(() => {
        if (stopping) return;
        m.restarts++;
        launch(m);
        options.onChange?.(system);
      }, 250);
    });
  };
  for (const m of managed) launch(m);

  try {
    await waitReady(gatewayUrl, 60_000, () => fatal);
  } catch (err) {
    await system.stop();
    throw err;
  }
  options.onChange?.(system);
  return system;
}
