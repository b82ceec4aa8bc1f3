/**
 * The whole system from the built image, started as the Kubernetes manifests say: the rendered
 * development overlay's migration Jobs first, then each Deployment's container — its arguments,
 * its environment (ConfigMaps, Secrets), its securityContext (numeric non-root user, read-only
 * root filesystem, no capabilities, no privilege escalation) and its volumes (an emptyDir as a
 * tmpfs, a Secret as read-only files) — as one podman container each.
 *
 * Where the development overlay cannot apply on one machine, and only there, the test says so
 * (`hostOverrides`): Postgres, NATS and the webhook receiver are this machine's, reached on the host
 * network, so every container shares one network and gets ports of its own instead of a pod's, and
 * reaches the others at 127.0.0.1 instead of through cluster DNS; the event namespace and database
 * are the test's own.
 */
import { execFile } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import { decodeSecret, loadContext, ofKind, resolveEnv, workloadsOf, type DeployContext, type Workload } from '../deploy/checks';
import { freePortForTest } from '../support/ports';

const run = promisify(execFile);

export const IMAGE = process.env.COINVOICE_IMAGE ?? 'localhost/coinvoice:test';
/** podman's runtime on this kind of machine: crun refuses cgroups in its hybrid mode. */
const PODMAN_GLOBAL = ['--runtime', 'runc'];

export async function podman(args: string[], options: { timeoutMs?: number } = {}): Promise<string> {
  const { stdout } = await run('podman', [...PODMAN_GLOBAL, ...args], { maxBuffer: 64 * 1024 * 1024, timeout: options.timeoutMs ?? 120_000 });
  return stdout;
}

export interface StartedContainer {
  /** The Deployment (or Job) it stands for. */
  workload: string;
  name: string;
  /** containerPort → the port it listens on here. */
  ports: Map<number, number>;
  env: Record<string, string>;
  args: string[];
}

export interface ImageSystem {
  /** The label every container of this run carries (`coinvoice-image-test=<run>`). */
  run: string;
  gatewayUrl: string;
  containers: Map<string, StartedContainer>;
  /** Host folders bound in place of an emptyDir, by Deployment (the notifier's mailbox). */
  dataDir: string;
  /** SIGKILL of the container's process (as a crash would), then the kubelet's restart. */
  kill(workload: string): Promise<void>;
  start(workload: string): Promise<void>;
  logs(workload: string): Promise<string>;
  /** Removes every container of this run and the files made for it. */
  stop(): Promise<void>;
}

export interface HostSettings {
  run: string;
  databaseUrl: string;
  natsUrl: string;
  eventNamespace: string;
  /** Extra values for every container (the test's, e.g. a chain node's URL): named, never silent. */
  extraEnv?: Record<string, string>;
  /** Deployments left out, with the reason (said in the test's output). */
  skip?: Record<string, string>;
}

/** Each Deployment's gRPC/admin/HTTP ports, as Services name them: `http://auth:50051` → Deployment auth, port 50051. */
function allocatePorts(workloads: Workload[]): Promise<Map<string, Map<number, number>>> {
  return Promise.all(
    workloads.map(async (w) => {
      const ports = new Map<number, number>();
      for (const port of w.pod.containers[0]?.ports ?? []) ports.set(port.containerPort, await freePortForTest());
      return [w.name, ports] as const;
    }),
  ).then((entries) => new Map(entries));
}

/**
 * The overrides of the host network (see the file's comment): a port variable naming one of the
 * container's ports gets its host port; a URL naming a Service (http://<deployment>:<port>) gets
 * 127.0.0.1 and that Deployment's host port.
 */
function hostOverrides(env: Map<string, string>, own: Map<number, number>, all: Map<string, Map<number, number>>): Map<string, string> {
  const out = new Map(env);
  for (const [name, value] of env) {
    if (/_PORT$/.test(name) && own.has(Number(value))) out.set(name, String(own.get(Number(value))));
    const url = /^(https?):\/\/([a-z0-9-]+):(\d+)$/.exec(value);
    const target = url ? all.get(url[2] ?? '')?.get(Number(url[3])) : undefined;
    if (url && target !== undefined) out.set(name, `${url[1]}://127.0.0.1:${target}`);
  }
  return out;
}

function resolvedEnv(ctx: DeployContext, w: Workload, container: IContainer): Map<string, string> {
  const problems: string[] = [];
  const env = resolveEnv(ctx, container, w.id, problems);
  if (problems.length > 0) throw new Error(problems.join('\n'));
  const out = new Map<string, string>();
  for (const [name, entry] of env) {
    if (entry.value === undefined) throw new Error(`${w.id}: ${name} has no value in the development overlay`);
    out.set(name, entry.value);
  }
  return out;
}

/** The podman flags of the pod's and container's securityContext (what the manifests demand). */
function securityFlags(w: Workload, container: IContainer): string[] {
  const pod = w.pod.securityContext ?? {};
  const own = container.securityContext ?? {};
  const uid = own.runAsUser ?? pod.runAsUser;
  const gid = own.runAsGroup ?? pod.runAsGroup;
  if (uid === undefined || uid === 0 || (own.runAsNonRoot ?? pod.runAsNonRoot) !== true) throw new Error(`${w.id}: the manifest does not demand a non-root user`);
  const flags = ['--user', `${uid}:${gid ?? uid}`];
  if (pod.fsGroup !== undefined) flags.push('--group-add', String(pod.fsGroup));
  if (own.readOnlyRootFilesystem) flags.push('--read-only', '--read-only-tmpfs=false');
  if (own.allowPrivilegeEscalation === false) flags.push('--security-opt', 'no-new-privileges');
  for (const cap of own.capabilities?.drop ?? []) flags.push('--cap-drop', cap.toLowerCase());
  return flags;
}

/**
 * The pod's volumes as podman mounts: an emptyDir is a tmpfs of its sizeLimit (or a host folder
 * when `hostDir` names one: the notifier's mailbox, read by the test), a Secret is its keys as
 * files (mode defaultMode, group fsGroup, as the kubelet writes them), mounted read-only.
 */
function volumeFlags(ctx: DeployContext, w: Workload, container: IContainer, filesDir: string, hostDir: string | undefined): string[] {
  const flags: string[] = [];
  const fsGroup = w.pod.securityContext?.fsGroup;
  for (const mount of container.volumeMounts ?? []) {
    const volume = (w.pod.volumes ?? []).find((v) => v.name === mount.name);
    if (!volume) throw new Error(`${w.id}: volumeMount ${mount.name} names no volume`);
    if (volume.emptyDir) {
      if (hostDir) {
        flags.push('--volume', `${hostDir}:${mount.mountPath}:rw`);
      } else {
        const size = volume.emptyDir.sizeLimit ? `,size=${String(volume.emptyDir.sizeLimit).replace(/i$/, '').toLowerCase()}` : '';
        flags.push('--tmpfs', `${mount.mountPath}:rw,mode=1777,nosuid,nodev${size}`);
      }
    } else if (volume.secret) {
      const secret = ofKind<ISecret>(ctx.objects, 'Secret').find((s) => s.metadata.name === volume.secret?.secretName);
      if (!secret) throw new Error(`${w.id}: Secret ${volume.secret.secretName} is not in the development overlay`);
      const dir = path.join(filesDir, `${w.name}-${mount.name}`);
      mkdirSync(dir, { recursive: true, mode: 0o755 });
      for (const [key, value] of Object.entries(decodeSecret(secret))) {
        const file = path.join(dir, key);
        writeFileSync(file, value);
        if (fsGroup !== undefined) chownSync(file, 0, fsGroup);
        chmodSync(file, volume.secret.defaultMode ?? 0o644);
      }
      flags.push('--volume', `${dir}:${mount.mountPath}:ro`);
    } else {
      throw new Error(`${w.id}: volume ${mount.name} is neither an emptyDir nor a Secret: teach test/image/containers.ts to mount it`);
    }
  }
  return flags;
}

export async function startImageSystem(settings: HostSettings, log: (line: string) => void = () => undefined): Promise<ImageSystem> {
  const ctx = loadContext('development');
  const workloads = workloadsOf(ctx.objects);
  const jobs = workloads.filter((w) => w.kind === 'Job');
  const deployments = workloads.filter((w) => w.kind === 'Deployment' && !(w.name in (settings.skip ?? {})));
  const ports = await allocatePorts(deployments);
  const filesDir = mkdtempSync(path.join(tmpdir(), `coinvoice-image-${settings.run}-`));
  chmodSync(filesDir, 0o755);
  const dataDir = path.join(filesDir, 'notifier-tmp');
  mkdirSync(dataDir);
  chownSync(dataDir, 10001, 10001);
  const containers = new Map<string, StartedContainer>();
  const label = `coinvoice-image-test=${settings.run}`;

  const podmanArgs = (w: Workload, container: IContainer, detached: boolean) => {
    const own = ports.get(w.name) ?? new Map<number, number>();
    const env = hostOverrides(resolvedEnv(ctx, w, container), own, ports);
    env.set('DATABASE_URL', settings.databaseUrl);
    env.set('NATS_URL', settings.natsUrl);
    env.set('EVENT_NAMESPACE', settings.eventNamespace);
    // One NATS server here, not the three the ConfigMaps' R3 streams need.
    if (env.has('NATS_STREAM_REPLICAS')) env.set('NATS_STREAM_REPLICAS', '1');
    for (const [k, v] of Object.entries(settings.extraEnv ?? {})) env.set(k, v);
    const name = `cvimg-${settings.run}-${w.name}`;
    const started: StartedContainer = { workload: w.name, name, ports: own, env: Object.fromEntries(env), args: container.args ?? [] };
    const hostDir = w.name === 'notifier' ? dataDir : undefined;
    const args = [
      'run',
      ...(detached ? ['--detach'] : ['--rm']),
      '--name',
      name,
      '--label',
      label,
      '--network',
      'host',
      ...securityFlags(w, container),
      ...volumeFlags(ctx, w, container, filesDir, hostDir),
      ...[...env].flatMap(([k, v]) => ['--env', `${k}=${v}`]),
      ...(container.command ? ['--entrypoint', container.command.join(' ')] : []),
      IMAGE,
      ...(container.args ?? []),
    ];
    return { args, started };
  };

  const system: ImageSystem = {
    run: settings.run,
    gatewayUrl: '',
    containers,
    dataDir,
    async kill(workload) {
      const c = containers.get(workload);
      if (!c) throw new Error(`no container for ${workload}`);
      await podman(['kill', '--signal', 'KILL', c.name]);
      await podman(['wait', c.name]);
    },
    async start(workload) {
      const c = containers.get(workload);
      if (!c) throw new Error(`no container for ${workload}`);
      await podman(['start', c.name]);
    },
    async logs(workload) {
      const c = containers.get(workload);
      if (!c) return '';
      const { stdout, stderr } = await run('podman', [...PODMAN_GLOBAL, 'logs', c.name], { maxBuffer: 64 * 1024 * 1024 }).catch(() => ({ stdout: '', stderr: '' }));
      return stdout + stderr;
    },
    async stop() {
      await removeContainers(settings.run);
      rmSync(filesDir, { recursive: true, force: true });
    },
  };

  try {
    // The migration Jobs, to completion, before any Deployment (as the rollout says).
    await Promise.all(
      jobs.map(async (w) => {
        const container = w.pod.containers[0];
        if (!container) throw new Error(`${w.id} has no container`);
        const { args } = podmanArgs(w, container, false);
        log(`job ${w.name}: podman ${args.slice(0, 2).join(' ')} … ${(container.args ?? []).join(' ')}`);
        await podman(args, { timeoutMs: 180_000 }).catch((err: Error & { stderr?: string }) => {
          throw new Error(`${w.id} failed: ${err.stderr ?? err.message}`);
        });
      }),
    );
    for (const w of deployments) {
      const container = w.pod.containers[0];
      if (!container) throw new Error(`${w.id} has no container`);
      const { args, started } = podmanArgs(w, container, true);
      await podman(args);
      containers.set(w.name, started);
      log(`deployment ${w.name}: ${started.args.join(' ')} (ports ${[...started.ports].map(([c, h]) => `${c}→${h}`).join(', ')})`);
    }
    const gateway = containers.get('gateway');
    if (!gateway?.env.GATEWAY_PORT) throw new Error('no gateway Deployment with GATEWAY_PORT in the development overlay');
    system.gatewayUrl = `http://127.0.0.1:${gateway.env.GATEWAY_PORT}`;
    return system;
  } catch (err) {
    await system.stop().catch(() => undefined);
    throw err;
  }
}

/** Removes every container carrying this run's label (also what test/image/run.sh does on exit). */
export async function removeContainers(runId: string): Promise<void> {
  const ids = (await podman(['ps', '--all', '--quiet', '--filter', `label=coinvoice-image-test=${runId}`])).split('\n').filter(Boolean);
  if (ids.length > 0) await podman(['rm', '--force', '--time', '0', ...ids]);
}
