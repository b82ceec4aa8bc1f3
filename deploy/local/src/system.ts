/**
 * Runs the whole system as real processes: migrations, then the four services and the gateway,
 * each its own Node process; waits until the gateway's /readyz answers 200.
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
  /** Passed to every process (EVENT_NAMESPACE, LOG_LEVEL, service settings, …). */
  env: NodeJS.ProcessEnv;
}

export interface ProcessInfo {
  pid: number;
  grpcUrl?: string;
  adminUrl?: string;
  url?: string;
}

export interface RunningSystem {
  gatewayUrl: string;
  processes: Map<string, ChildProcess>;
  /** Where each process listens, for operators and tests (also written to system.json). */
  describe(): Record<string, ProcessInfo>;
  stop(): Promise<void>;
}

function runToCompletion(entry: string, args: string[], env: NodeJS.ProcessEnv): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], { env, stdio: ['ignore', 'inherit', 'pipe'] });
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

async function waitReady(url: string, processes: Map<string, ChildProcess>, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    for (const [name, child] of processes) {
      if (child.exitCode !== null) throw new Error(`${name} exited with code ${child.exitCode} during start-up; see its log`);
    }
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
  const ports = new Map<ServiceName, { grpc: number; admin: number }>();
  for (const name of SERVICES) {
    ports.set(name, auto ? { grpc: await freePort(), admin: await freePort() } : SERVICE_PORTS[name]);
  }
  const gatewayPort = auto ? await freePort() : options.gatewayPort;
  const shared = { ...options.env, DATABASE_URL: options.databaseUrl, NATS_URL: options.natsUrl };

  await migrateAll(options.databaseUrl, shared);

  const processes = new Map<string, ChildProcess>();
  const launch = (name: string, entry: string, env: NodeJS.ProcessEnv) => {
    const log = createWriteStream(path.join(options.logDir, `${name}.log`), { flags: 'a' });
    // The IPC channel lets a child notice when this launcher dies, and stop instead of lingering.
    const child = spawn(process.execPath, [entry], { env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    processes.set(name, child);
  };
  const urlOf = (name: ServiceName) => `http://127.0.0.1:${ports.get(name)?.grpc}`;
  for (const name of SERVICES) {
    const p = ports.get(name)!;
    launch(name, serviceEntry(name), { ...shared, GRPC_PORT: String(p.grpc), ADMIN_PORT: String(p.admin) });
  }
  launch('gateway', GATEWAY_ENTRY, {
    ...shared,
    GATEWAY_PORT: String(gatewayPort),
    AUTH_URL: urlOf('auth'),
    INVOICE_URL: urlOf('invoice'),
    PAYOUT_URL: urlOf('payout'),
    NOTIFIER_URL: urlOf('notifier'),
  });

  const gatewayUrl = `http://127.0.0.1:${gatewayPort}`;
  const stop = async () => {
    await Promise.all([...processes.values()].map((child) => stopChild(child, 15_000)));
  };
  try {
    await waitReady(gatewayUrl, processes, 60_000);
  } catch (err) {
    await stop();
    throw err;
  }
  const describe = () => {
    const out: Record<string, ProcessInfo> = {};
    for (const name of SERVICES) {
      const p = ports.get(name)!;
      out[name] = { pid: processes.get(name)!.pid!, grpcUrl: urlOf(name), adminUrl: `http://127.0.0.1:${p.admin}` };
    }
    out.gateway = { pid: processes.get('gateway')!.pid!, url: gatewayUrl };
    return out;
  };
  return { gatewayUrl, processes, describe, stop };
}
