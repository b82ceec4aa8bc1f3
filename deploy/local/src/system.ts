/**
 * Runs the whole system as real processes: migrations, then the four services, a chain watcher
 * per configured chain (CHAIN_ETHEREUM_RPC_URL → `invoice watch ethereum`, CHAIN_BASE_RPC_URL →
 * `invoice watch base`…) and the gateway,
 * each its own Node process; waits until the gateway's /readyz answers 200. Like Kubernetes with
 * restartPolicy Always, a process that dies is started again (so a crash test can kill one), and a
 * service can run several replicas (`<SERVICE>_REPLICAS=2`) that share its work.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, mkdirSync } from 'node:fs';
import path from 'node:path';
import { chainSources, chainWatcherSettings, WATCHED_CHAINS } from '@coinvoice/chains/watchers';
import { SUPPORTED_CRYPTO } from '@coinvoice/chains/currencies';
import { loadConfig, SERVICE_PORTS, type ServiceName } from '@coinvoice/runtime';
import { ensureEventKeys } from './event-keys';
import { bindHostOf, canListen, freePort, stopChild, urlHostOf } from './infrastructure';


/**
 * Node flags of every service process, here and in the image (deploy/Dockerfile's NODE_OPTIONS;
 * test/deploy checks they agree). A young generation capped at 4 MB per semi-space keeps each
 * process's idle memory under 120 MB (the gateway: 123 → 103 MB) at no measured throughput cost
 * (bench/results.md): V8's default lets it grow to 16 MB on startup garbage alone.
 */
export const SERVICE_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=4'];

/**
 * Environment of every service process, here and in the image (deploy/Dockerfile's ENV; test/deploy
 * checks they agree). glibc raises its mmap threshold to the size of the largest block freed, so
 * after the first password hash (argon2id, 19 MiB, on a libuv thread) every later one is carved from
 * a thread's arena and stays resident once freed: auth's idle RSS grew by ~19 MB per thread that
 * hashed (auth 130 MB in every bench run). A fixed threshold keeps large blocks mmapped and gives
 * them back on free (docs/performance.md#memory).
 */
export const SERVICE_PROCESS_ENV: Readonly<Record<string, string>> = { MALLOC_MMAP_THRESHOLD_: '131072' };

/**
 * Node flags a chain watcher adds to SERVICE_NODE_FLAGS, here and in its manifest
 * (deploy/k8s/components/chain-watcher; test/deploy checks they agree). Its live data is the
 * watched set, ~30 MB at 100,000 open invoices; uncapped, V8 grows the old generation well past
 * that before collecting (peak RSS 349 MB at 100,000), capped at 192 MB it peaks at 213 MB at the
 * same speed (bench/results.md, docs/performance.md#the-watcher). A chain with far more open
 * invoices raises the cap with the limit.
 */
export const WATCHER_NODE_FLAGS: readonly string[] = ['--max-old-space-size=192'];

export { freePort };

export const REPO_ROOT = path.resolve(__dirname, '..', '..', '..');
export const SERVICES: ServiceName[] = ['auth', 'invoice', 'payout', 'notifier'];

export function serviceEntry(name: ServiceName): string {
  return path.join(REPO_ROOT, 'services', name, 'dist', 'main.js');
}
export const GATEWAY_ENTRY = path.join(REPO_ROOT, 'gateway', 'dist', 'main.js');


export interface SystemOptions {
  databaseUrl: string;
  natsUrl: string;
  /** Folder for each process's log file. */
  logDir: string;
  /** Folder of the services' event signing keys (made on first start, kept): docs/events.md. */
  eventKeyDir: string;
  /** 0 = pick free ports for everything (tests); otherwise the documented defaults. */
  gatewayPort: number;
  /** Passed to every process (EVENT_NAMESPACE, LOG_LEVEL, service settings, <SERVICE>_REPLICAS, …). */
  env: NodeJS.ProcessEnv;
  /** Told whenever a process (re)starts, e.g. to rewrite system.json. */
  onChange?: (system: RunningSystem) => void;
  /** Told when a process died and is being started again. */
  onRestart?: (name: string, reason: string) => void;
  /** Told when a process of the running system died too often to start again (the system is then incomplete). */
  onGiveUp?: (reason: string) => void;
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
  /** The coins whose live invoices get addresses of development key pairs (no INVOICE_XPUB_<COIN>). */
  developmentKeyCoins: readonly string[];
  stop(): Promise<void>;
}

/** Runs a command to its end; resolves with its standard output, rejects with its standard error. */
function runToCompletion(entry: string, args: string[], env: NodeJS.ProcessEnv): Promise<string> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [entry, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    child.once('error', reject);
    child.once('exit', (code) => (code === 0 ? resolve(stdout) : reject(new Error(stderr.trim() || `${entry} ${args.join(' ')} exited ${code}`))));
  });
}

/**
 * The local developer's merchant, sandbox project and a new sandbox key, made by the auth
 * service's `local-developer` command (services/auth/src/operators/local-developer.ts).
 */
export async function createLocalDeveloper(
  databaseUrl: string,
  env: NodeJS.ProcessEnv,
  email: string,
  password: string,
): Promise<{ projectId: string; apiKey: string }> {
  const out = await runToCompletion(serviceEntry('auth'), ['local-developer', email], {
    ...env,
    DATABASE_URL: databaseUrl,
    LOCAL_DEVELOPER_PASSWORD: password,
  });
  const developer = JSON.parse(out.trim()) as { projectId?: unknown; apiKey?: unknown };
  if (typeof developer.projectId !== 'string' || typeof developer.apiKey !== 'string') {
    throw new Error(`auth local-developer printed no project and key: ${out.trim()}`);
  }
  return { projectId: developer.projectId, apiKey: developer.apiKey };
}

/**
 * Every service's migrations, at once: each service has a schema of its own and locks only it
 * (services/runtime/src/migrations.ts), as the Kubernetes Jobs run them side by side.
 */
export async function migrateAll(databaseUrl: string, env: NodeJS.ProcessEnv): Promise<void> {
  await Promise.all(SERVICES.map((name) => runToCompletion(serviceEntry(name), ['migrate'], { ...env, DATABASE_URL: databaseUrl })));
}

interface Managed {
  name: string;
  entry: string;
  /** Arguments after the entry (e.g. `watch ethereum`). */
  args?: string[];
  /** Node flags of this role, after SERVICE_NODE_FLAGS. */
  nodeFlags?: readonly string[];
  env: NodeJS.ProcessEnv;
  info: Omit<ProcessInfo, 'pid' | 'restarts'>;
  child?: ChildProcess;
  restarts: number;
  recentCrashes: number[];
}

const MAX_CRASHES_PER_MINUTE = 5;

function replicasOf(name: string, env: NodeJS.ProcessEnv): number {
  const variable = `${name.toUpperCase()}_REPLICAS`;
  const raw = env[variable];
  const n = raw === undefined ? 1 : Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > 8) throw new Error(`${variable}=${raw} is invalid: expected 1 to 8`);
  return n;
}

/**
 * The chain watchers to run (the invoice service's `watch <chain>` role): one per chain whose
 * source is configured. The chains and the variable naming each one's source are the registry's
 * (services/chains/src/watchers.ts: every EVM network of evm/networks.ts, bitcoin, litecoin, tron),
 * so a network added there is watched here with no edit. WATCHER_REPLICAS=2 runs a standby next to
 * each active watcher.
 */
export const CHAIN_SOURCES: Readonly<Record<string, string>> = (() => {
  // The source variable does not depend on the values: the defaults are enough to read it.
  const sources = chainSources(loadConfig(chainWatcherSettings, {}));
  return Object.fromEntries(
    WATCHED_CHAINS.map((chain) => {
      const source = sources[chain];
      if (!source) throw new Error(`the registry lists ${chain} as watched but gives it no source`);
      return [chain, source.sourceVariable];
    }),
  );
})();

export function configuredChains(env: NodeJS.ProcessEnv): string[] {
  return Object.entries(CHAIN_SOURCES)
    .filter(([, variable]) => (env[variable] ?? '') !== '')
    .map(([chain]) => chain);
}

/**
 * The treasury's processes (docs/treasury.md): with SIGNER_SEED_FILE set, the payout service's
 * signer (`payout sign`) and a processor (`payout process <network>`) for each network whose node
 * is configured and whose payouts the processor sends.
 */
export const TREASURY_NETWORKS: Readonly<Record<string, string>> = {
  ethereum: 'CHAIN_ETHEREUM_RPC_URL',
  // Bitcoin and Litecoin send through the Esplora node their watchers follow (docs/treasury.md#utxo).
  bitcoin: 'CHAIN_BITCOIN_ESPLORA_URL',
  litecoin: 'CHAIN_LITECOIN_ESPLORA_URL',
  // Tron sends through the full node its watcher follows (docs/treasury.md#tron).
  tron: 'CHAIN_TRON_API_URL',
};

export function treasuryNetworks(env: NodeJS.ProcessEnv): string[] {
  if ((env.SIGNER_SEED_FILE ?? '') === '') return [];
  return Object.entries(TREASURY_NETWORKS)
    .filter(([, variable]) => (env[variable] ?? '') !== '')
    .map(([network]) => network);
}

/**
 * Where a chain source points, for the console: scheme, host and port only. A node URL often
 * carries a secret (user:password@, or a provider key in its path), which is never printed.
 */
export function shownSource(url: string): string {
  const parsed = URL.parse(url);
  if (!parsed) return '(not a URL)';
  const more = parsed.pathname !== '/' || parsed.search !== '' || parsed.username !== '';
  return `${parsed.origin}${more ? '/…' : ''}`;
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

/**
 * With a fixed GATEWAY_PORT the services take their fixed ports (SERVICE_PORTS): each, and the
 * gateway's, must be free. Taken, this system's services crash-looped while its gateway answered
 * with whatever held them — another checkout's services and database — and it said it was ready
 * (an outside review). Undefined when all are free; else what to tell the operator.
 */
export async function fixedPortsTaken(gatewayPort: number): Promise<string | undefined> {
  if (gatewayPort === 0) return undefined;
  const wanted = [
    ...SERVICES.flatMap((name) => [
      { port: SERVICE_PORTS[name].grpc, what: `${name}'s gRPC` },
      { port: SERVICE_PORTS[name].admin, what: `${name}'s admin` },
    ]),
    { port: gatewayPort, what: 'the gateway' },
  ];
  const taken: string[] = [];
  for (const { port, what } of wanted) if (!(await canListen(port))) taken.push(`${port} (${what})`);
  if (taken.length === 0) return undefined;
  return `port${taken.length > 1 ? 's' : ''} ${taken.join(', ')} ${taken.length > 1 ? 'are' : 'is'} in use: another coinvoice on this machine? Stop it, or start this one with GATEWAY_PORT=0 (free ports for every process)`;
}

export async function startSystem(options: SystemOptions): Promise<RunningSystem> {
  mkdirSync(options.logDir, { recursive: true });
  const auto = options.gatewayPort === 0;
  // Every process listens on BIND_HOST, loopback unless it says otherwise: development gRPC has no
  // mutual TLS and must not face a network. The others are reached at that address.
  const bindHost = bindHostOf(options.env);
  const host = urlHostOf(bindHost);
  const eventKeys = ensureEventKeys(options.eventKeyDir, SERVICES);
  const shared: NodeJS.ProcessEnv = {
    ...SERVICE_PROCESS_ENV,
    // Every process of this system runs this one version: all of them verify batch signatures.
    EVENT_SIGNATURES: 'batch',
    ...options.env,
    DATABASE_URL: options.databaseUrl,
    NATS_URL: options.natsUrl,
    BIND_HOST: bindHost,
    EVENT_VERIFY_KEYS: eventKeys.verifyKeys,
  };
  await migrateAll(options.databaseUrl, shared);
  const networks = treasuryNetworks(options.env);
  if (networks.length > 0) {
    // The signer's own schema, and the invoice keys it can spend: unless the account xpubs are
    // configured, the invoice service gives out addresses of the seed's account (printed by the
    // signer role itself: one piece of code derives keys), so every deposit can be swept.
    await runToCompletion(serviceEntry('payout'), ['sign', 'migrate'], shared);
    // Every coin with EVM addresses (ETH, USDT, USDC, POL, BNB: one key on every EVM network).
    const evmXpubs = SUPPORTED_CRYPTO.filter((coin) => coin.addressFormat === 'eip55').map((coin) => `INVOICE_XPUB_${coin.code}`);
    if (evmXpubs.every((name) => (options.env[name] ?? '') === '')) {
      const xpub = (await runToCompletion(serviceEntry('payout'), ['sign', 'xpub'], shared)).trim();
      for (const name of evmXpubs) shared[name] = xpub;
    }
    // TRX and the TRC-20 tokens: the seed's m/44'/195'/0' (`sign xpub tron`).
    if (networks.includes('tron') && (options.env.INVOICE_XPUB_TRX ?? '') === '') {
      shared.INVOICE_XPUB_TRX = (await runToCompletion(serviceEntry('payout'), ['sign', 'xpub', 'tron'], shared)).trim();
    }
  }

  const managed: Managed[] = [];
  const primaryUrl = new Map<ServiceName, string>();
  // Mutual TLS when TLS_CA_FILE is given: https URLs, and each process's own certificate from
  // <NAME>_TLS_CERT_FILE / <NAME>_TLS_KEY_FILE (else the shared TLS_CERT_FILE / TLS_KEY_FILE).
  const scheme = options.env.TLS_CA_FILE ? 'https' : 'http';
  const tlsOf = (name: string) => ({
    TLS_CERT_FILE: options.env[`${name.toUpperCase()}_TLS_CERT_FILE`] ?? options.env.TLS_CERT_FILE,
    TLS_KEY_FILE: options.env[`${name.toUpperCase()}_TLS_KEY_FILE`] ?? options.env.TLS_KEY_FILE,
  });
  // Ports first, so every service knows where the others are (auth and payout call the notifier).
  const planned: { name: ServiceName; replica: number; grpc: number; admin: number }[] = [];
  for (const name of SERVICES) {
    const replicas = replicasOf(name, options.env);
    for (let i = 0; i < replicas; i++) {
      const defaults = SERVICE_PORTS[name];
      const grpc = auto || i > 0 ? await freePort() : defaults.grpc;
      const admin = auto || i > 0 ? await freePort() : defaults.admin;
      if (i === 0) primaryUrl.set(name, `${scheme}://${host}:${grpc}`);
      planned.push({ name, replica: i, grpc, admin });
    }
  }
  for (const { name, replica, grpc, admin } of planned) {
    managed.push({
      name: replica === 0 ? name : `${name}-${replica + 1}`,
      entry: serviceEntry(name),
      env: {
        ...shared,
        AUTH_URL: primaryUrl.get('auth'),
        INVOICE_URL: primaryUrl.get('invoice'),
        NOTIFIER_URL: primaryUrl.get('notifier'),
        // Per-service NATS users (deploy/nats): <SERVICE>_NATS_URL replaces NATS_URL for that service.
        NATS_URL: options.env[`${name.toUpperCase()}_NATS_URL`] ?? options.natsUrl,
        ...tlsOf(name),
        EVENT_SIGNING_KEY_FILE: eventKeys.signingKeyFile(name),
        GRPC_PORT: String(grpc),
        ADMIN_PORT: String(admin),
      },
      info: { grpcUrl: `${scheme}://${host}:${grpc}`, adminUrl: `http://${host}:${admin}` },
      restarts: 0,
      recentCrashes: [],
    });
  }
  for (const chain of configuredChains(options.env)) {
    const replicas = replicasOf('watcher', options.env);
    for (let i = 0; i < replicas; i++) {
      // Watchers serve only health and /metrics: always on free ports, next to the invoice API.
      // They are the invoice service in another role: its NATS user and its certificate.
      const grpc = await freePort();
      const admin = await freePort();
      managed.push({
        name: i === 0 ? `watch-${chain}` : `watch-${chain}-${i + 1}`,
        entry: serviceEntry('invoice'),
        args: ['watch', chain],
        nodeFlags: WATCHER_NODE_FLAGS,
        env: {
          ...shared,
          NATS_URL: options.env.INVOICE_NATS_URL ?? options.natsUrl,
          ...tlsOf('invoice'),
          EVENT_SIGNING_KEY_FILE: eventKeys.signingKeyFile('invoice'),
          GRPC_PORT: String(grpc),
          ADMIN_PORT: String(admin),
        },
        info: { grpcUrl: `${scheme}://${host}:${grpc}`, adminUrl: `http://${host}:${admin}` },
        restarts: 0,
        recentCrashes: [],
      });
    }
  }
  if (networks.length > 0) {
    // The signer first: each processor is told where it is. Both are the payout service in other
    // roles (its NATS user, its event key); the signer listens on loopback only, and without mutual
    // TLS (development) it is told so explicitly (SIGNER_ALLOW_PLAINTEXT).
    const signerGrpc = await freePort();
    const signerAdmin = await freePort();
    const signerUrl = `${scheme}://${host}:${signerGrpc}`;
    const payoutEnv = {
      ...shared,
      NATS_URL: options.env.PAYOUT_NATS_URL ?? options.natsUrl,
      EVENT_SIGNING_KEY_FILE: eventKeys.signingKeyFile('payout'),
      AUTH_URL: primaryUrl.get('auth'),
      INVOICE_URL: primaryUrl.get('invoice'),
      NOTIFIER_URL: primaryUrl.get('notifier'),
    };
    managed.push({
      name: 'payout-sign',
      entry: serviceEntry('payout'),
      args: ['sign'],
      env: {
        ...payoutEnv,
        ...tlsOf('payout_signer'),
        ...(scheme === 'http' ? { SIGNER_ALLOW_PLAINTEXT: 'true' } : {}),
        GRPC_PORT: String(signerGrpc),
        ADMIN_PORT: String(signerAdmin),
      },
      info: { grpcUrl: signerUrl, adminUrl: `http://${host}:${signerAdmin}` },
      restarts: 0,
      recentCrashes: [],
    });
    for (const network of networks) {
      const grpc = await freePort();
      const admin = await freePort();
      managed.push({
        name: `payout-process-${network}`,
        entry: serviceEntry('payout'),
        args: ['process', network],
        env: { ...payoutEnv, ...tlsOf('payout_processor'), SIGNER_URL: signerUrl, GRPC_PORT: String(grpc), ADMIN_PORT: String(admin) },
        info: { grpcUrl: `${scheme}://${host}:${grpc}`, adminUrl: `http://${host}:${admin}` },
        restarts: 0,
        recentCrashes: [],
      });
    }
  }
  const gatewayPort = auto ? await freePort() : options.gatewayPort;
  const gatewayUrl = `http://${host}:${gatewayPort}`;
  managed.push({
    name: 'gateway',
    entry: GATEWAY_ENTRY,
    env: {
      ...shared,
      GATEWAY_PORT: String(gatewayPort),
      NATS_URL: options.env.GATEWAY_NATS_URL ?? options.natsUrl,
      ...tlsOf('gateway'),
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
  let ready = false;
  let fatal: string | undefined;
  const describe = () =>
    Object.fromEntries(managed.map((m) => [m.name, { ...m.info, pid: m.child?.pid ?? 0, restarts: m.restarts }]));
  const system: RunningSystem = {
    gatewayUrl,
    describe,
    developmentKeyCoins: SUPPORTED_CRYPTO.filter((coin) => (shared[`INVOICE_XPUB_${coin.code}`] ?? '') === '').map((coin) => coin.code),
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
    const child = spawn(process.execPath, [...SERVICE_NODE_FLAGS, ...(m.nodeFlags ?? []), ...nodeArgs, m.entry, ...(m.args ?? [])], { env: m.env, stdio: ['ignore', 'pipe', 'pipe', 'ipc'] });
    child.stdout?.pipe(log);
    child.stderr?.pipe(log);
    m.child = child;
    child.once('exit', (code, signal) => {
      if (stopping) return;
      const reason = signal ?? `exit ${code}`;
      const now = Date.now();
      m.recentCrashes = [...m.recentCrashes.filter((t) => now - t < 60_000), now];
      if (m.recentCrashes.length > MAX_CRASHES_PER_MINUTE) {
        fatal = `${m.name} keeps dying (${reason}, ${m.recentCrashes.length} times in a minute); see ${path.join(options.logDir, `${m.name}.log`)}`;
        // Before ready, waitReady reports it; after, the whole system goes down with it: a system
        // missing one of its processes must not look up (it said "starting it again" and stayed
        // without its gateway or watcher — outside reviews).
        if (ready) options.onGiveUp?.(fatal);
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
  ready = true;
  options.onChange?.(system);
  return system;
}
