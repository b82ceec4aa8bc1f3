/**
 * Boots the whole system for an end-to-end test exactly as `npm start` does: the launcher as a
 * real process, which starts the four services and the gateway as processes of their own, on free
 * ports, against a fresh database and an event namespace of the test's own.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createTestDatabase, testNatsUrl, uniqueName, type TestDatabase } from './infra';
import { mailboxFolder, rememberMailbox, type Mailbox } from './mail';
import { RELAXED_RATE_LIMITS } from './rate-limits';

export { RELAXED_RATE_LIMITS };

export const REPO_ROOT = path.resolve(__dirname, '..', '..');
export const LAUNCHER = path.join(REPO_ROOT, 'deploy', 'local', 'dist', 'start.js');


export interface ProcessInfo {
  pid: number;
  grpcUrl?: string;
  adminUrl?: string;
  url?: string;
  restarts: number;
}

export interface BootedSystem {
  gatewayUrl: string;
  launcher: ChildProcess;
  /** Where each process listens, as at start; `current()` re-reads it (pids change on restart). */
  processes: Record<'auth' | 'invoice' | 'payout' | 'notifier' | 'gateway', ProcessInfo>;
  current(): Record<string, ProcessInfo>;
  database: TestDatabase;
  namespace: string;
  dataDir: string;
  /** Where the system's email arrives (its mailbox folder, or the SMTP server the test gave it). */
  mail: Mailbox;
  /** The launcher's own output so far (for failure messages). */
  output(): string;
  /** SIGTERM to the launcher; resolves when it has exited. Drops the database. */
  stop(): Promise<void>;
}

export async function bootSystem(
  options: {
    env?: NodeJS.ProcessEnv;
    timeoutMs?: number;
    /** A database of the caller's (e.g. one a first boot left behind), kept on stop. Default: a new one, dropped on stop. */
    database?: TestDatabase;
    /** Where the email goes when `env` sets SMTP_URL (the test's SMTP server). Default: the mailbox folder. */
    mail?: Mailbox;
  } = {},
): Promise<BootedSystem> {
  const ownDatabase = options.database === undefined;
  const database = options.database ?? (await createTestDatabase('cve2e'));
  const namespace = uniqueName('e2e');
  const dataDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-e2e-'));
  const launcher = spawn(process.execPath, [LAUNCHER], {
    env: {
      ...process.env,
      DATABASE_URL: database.url,
      NATS_URL: testNatsUrl(),
      EVENT_NAMESPACE: namespace,
      GATEWAY_PORT: '0',
      COINVOICE_DATA_DIR: dataDir,
      LOG_LEVEL: 'info',
      // Tests of other features register, log in and pay from one IP far more than a person
      // would; test/e2e/security.test.ts sets the real limits and proves them.
      ...RELAXED_RATE_LIMITS,
      // Tests read the events a service wrote from its outbox: keep them there after publishing.
      OUTBOX_KEEP_PUBLISHED: '10m',
      // The tests' "ethereum" node is anvil at its default chain id (test/support/anvil.ts): the
      // watcher refuses a node whose eth_chainId is not CHAIN_ETHEREUM_CHAIN_ID (docs/networks.md).
      // (ANVIL_CHAIN_ID there; not imported, so that a test without anvil does not load viem.)
      // Production takes the main chain id only (requireMainChainIds): a production system has no anvil.
      ...(options.env?.APP_ENV === 'production' ? {} : { CHAIN_ETHEREUM_CHAIN_ID: '31337' }),
      ...options.env,
    },
    // The IPC channel is a lifeline: if this worker dies without stop(), the launcher sees the
    // channel close and stops the system (deploy/local/src/start.ts).
    stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
  });
  let output = '';
  launcher.stdout?.on('data', (chunk: Buffer) => (output += chunk.toString()));
  launcher.stderr?.on('data', (chunk: Buffer) => (output += chunk.toString()));

  const gatewayUrl = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      launcher.kill('SIGTERM'); // nobody will get a handle to stop it
      reject(new Error(`system not ready in time:\n${output}`));
    }, options.timeoutMs ?? 60_000);
    const onData = () => {
      const match = /coinvoice is ready at (http:\/\/\S+)/.exec(output);
      if (match?.[1]) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    launcher.stdout?.on('data', onData);
    launcher.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`launcher exited (${code}) before ready:\n${output}`));
    });
  });
  const readProcesses = () =>
    (JSON.parse(readFileSync(path.join(dataDir, 'system.json'), 'utf8')) as { processes: BootedSystem['processes'] }).processes;
  const described = { processes: readProcesses() };
  if (options.env?.SMTP_URL && !options.mail) throw new Error('bootSystem: with SMTP_URL, pass `mail` (the SMTP server the email goes to)');
  const mail = options.mail ?? mailboxFolder(path.join(dataDir, 'mailbox'));
  rememberMailbox(gatewayUrl, mail);

  return {
    gatewayUrl,
    launcher,
    processes: described.processes,
    current: readProcesses,
    database,
    namespace,
    dataDir,
    mail,
    output: () => output,
    async stop() {
      if (launcher.exitCode === null && launcher.signalCode === null) {
        const exited = new Promise((resolve) => launcher.once('exit', resolve));
        launcher.kill('SIGTERM');
        await exited;
      }
      if (ownDatabase) await database.drop().catch(() => undefined);
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** True while a process with this pid exists. */
export function isAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
