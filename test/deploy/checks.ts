/**
 * The checks behind test/deploy/manifests.test.ts: each takes the rendered objects of one
 * kustomize overlay (plus what the repository says about the processes) and returns a list of
 * problems, one readable line each; [] means the manifests are right. The test runs them on the
 * real render and on copies broken on purpose, so each check is shown to catch what it claims.
 *
 * Sources of truth, read at test time rather than copied here:
 * - the settings objects of every process (commonSettings + serviceSettings(name) + the service's
 *   own settings, gatewaySettings, the payout service's signerSettings and processorService's):
 *   what each process requires and how it parses values;
 * - deploy/k8s/secret-keys.yaml: the Secrets the manifests reference but never create;
 * - deploy/Dockerfile: base images, the user, what the final image contains.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { commonSettings, ConfigError, serviceSettings, type ServiceName, type Settings } from '@coinvoice/runtime';
import { Deployment, type IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import { HorizontalPodAutoscaler, type IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { Job, type IJob } from 'kubernetes-models/batch/v1/Job';
import { NetworkPolicy, type INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { INetworkPolicyPeer } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicyPeer';
import type { INetworkPolicyPort } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicyPort';
import { PodDisruptionBudget, type IPodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ConfigMap, type IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { IContainerPort } from 'kubernetes-models/v1/ContainerPort';
import { Namespace, type INamespace } from 'kubernetes-models/v1/Namespace';
import type { IPodSpec } from 'kubernetes-models/v1/PodSpec';
import type { IProbe } from 'kubernetes-models/v1/Probe';
import { Secret, type ISecret } from 'kubernetes-models/v1/Secret';
import { Service, type IService } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import { parse as parseYaml, parseAllDocuments } from 'yaml';
import { authService } from '../../services/auth/src/server';
import { invoiceService } from '../../services/invoice/src/server';
import { chainSources, chainWatcherSettings, WATCHED_CHAINS as CHAINS_WITH_WATCHER } from '@coinvoice/chains/watchers';
import { isEvmChain } from '@coinvoice/chains/evm/networks';
import { loadConfig } from '@coinvoice/runtime';
import { notifierService } from '../../services/notifier/src/server';
import { payoutService } from '../../services/payout/src/server';
import { PROCESSED_NETWORKS, processorDefinition } from '../../services/payout/src/processor/role';
import { SIGNER_XPUB_VARIABLES, signerSettings } from '../../services/payout/src/signer/settings';
import { gatewaySettings } from '../../gateway/src/config';
import { SERVICE_NODE_FLAGS, SERVICE_PROCESS_ENV, WATCHER_NODE_FLAGS } from '../../deploy/local/src/system';

export const REPO_ROOT = path.resolve(__dirname, '../..');
export const OVERLAYS = ['development', 'production'] as const;
export type OverlayName = (typeof OVERLAYS)[number];

// ---------------------------------------------------------------------------------------------
// Rendering and context

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

export interface DeployContext {
  overlay: OverlayName;
  objects: K8sObject[];
  /** Secret name → keys, for the Secrets created outside kustomize (deploy/k8s/secret-keys.yaml). */
  externalSecrets: Record<string, string[]>;
  /** The numeric USER of the image's final stage. */
  imageUid: number | undefined;
}

export function renderOverlay(overlay: OverlayName): K8sObject[] {
  let out: string;
  try {
    out = execFileSync('kubectl', ['kustomize', path.join(REPO_ROOT, 'deploy/k8s/overlays', overlay)], {
      encoding: 'utf8',
      maxBuffer: 32 * 1024 * 1024,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
  } catch (err) {
    const e = err as NodeJS.ErrnoException & { stderr?: string };
    if (e.code === 'ENOENT') throw new Error('kubectl is not on PATH: the manifest test renders the overlays with `kubectl kustomize`');
    throw new Error(`kubectl kustomize ${overlay} failed: ${e.stderr ?? e.message}`);
  }
  return parseAllDocuments(out)
    .map((doc) => doc.toJS() as K8sObject | null)
    .filter((obj): obj is K8sObject => obj !== null);
}

export function readExternalSecrets(): Record<string, string[]> {
  const doc = parseYaml(readFileSync(path.join(REPO_ROOT, 'deploy/k8s/secret-keys.yaml'), 'utf8')) as Record<string, Record<string, string>>;
  return Object.fromEntries(Object.entries(doc).map(([name, keys]) => [name, Object.keys(keys)]));
}

export function readDockerfile(): string {
  return readFileSync(path.join(REPO_ROOT, 'deploy/Dockerfile'), 'utf8');
}

export function loadContext(overlay: OverlayName): DeployContext {
  return {
    overlay,
    objects: renderOverlay(overlay),
    externalSecrets: readExternalSecrets(),
    imageUid: parseDockerfile(readDockerfile()).finalUid,
  };
}

/** A deep copy whose objects can be broken without touching the original. */
export function cloneContext(ctx: DeployContext): DeployContext {
  return { ...ctx, objects: structuredClone(ctx.objects) };
}

export function ofKind<T>(objects: K8sObject[], kind: string): (T & K8sObject)[] {
  return objects.filter((o) => o.kind === kind) as (T & K8sObject)[];
}

export function findObject<T>(objects: K8sObject[], kind: string, name: string): T & K8sObject {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} in the render`);
  return found as T & K8sObject;
}

// ---------------------------------------------------------------------------------------------
// The processes and what they read

export type ProcessName = ServiceName | 'gateway';
export const SERVICES: readonly ServiceName[] = ['auth', 'invoice', 'payout', 'notifier'];
export const PROCESSES: readonly ProcessName[] = [...SERVICES, 'gateway'];

/** What a container runs: the image's entrypoint contract (deploy/entrypoint.sh). */
export interface Role {
  process: ProcessName;
  /**
   * `watch`: the invoice service's chain watcher role (`invoice watch <chain>`), same settings as serve.
   * The payout service's treasury roles (docs/treasury.md): `sign` (`payout sign`, signerSettings),
   * `sign-migrate` (`payout sign migrate`: the signer's schema) and `process` (`payout process <network>`).
   */
  mode: 'serve' | 'migrate' | 'watch' | 'sign' | 'sign-migrate' | 'process';
  /** The network of a `process` role. */
  network?: string;
}

/** The role as the entrypoint's arguments name it, for messages: `payout sign`, `invoice migrate`… */
export function roleName(role: Role): string {
  switch (role.mode) {
    case 'migrate': return `${role.process} migrate`;
    case 'sign': return `${role.process} sign`;
    case 'sign-migrate': return `${role.process} sign migrate`;
    case 'process': return `${role.process} process ${role.network ?? ''}`;
    default: return role.process;
  }
}

/** Chains the invoice service can watch (their family modules in services/chains give each a source). */
export const WATCHED_CHAINS: readonly string[] = CHAINS_WITH_WATCHER;

const DEFINITIONS: Record<ServiceName, { settings: Settings; requiredInProduction?: (env: Record<string, string | undefined>) => string[] }> = {
  auth: authService,
  invoice: invoiceService,
  payout: payoutService,
  notifier: notifierService,
};

/** `<service> migrate` reads these only (migrateService in services/runtime/src/migrate-service.ts). */
const MIGRATE_SETTINGS: Settings = {
  APP_ENV: commonSettings.APP_ENV,
  DATABASE_URL: commonSettings.DATABASE_URL,
  LOG_LEVEL: commonSettings.LOG_LEVEL,
};

/** Every environment variable the process reads, with its default and parser. */
export function settingsOf(role: Role): Settings {
  if (role.process === 'gateway') return gatewaySettings;
  // `payout sign migrate` reads the same three (migrateSigner in services/payout/src/signer/role.ts).
  if (role.mode === 'migrate' || role.mode === 'sign-migrate') return MIGRATE_SETTINGS;
  // The signer is not a runtime service: signerSettings is everything it reads (no NATS, no event key).
  if (role.mode === 'sign') return signerSettings;
  // The processor is one: the payout service's common settings plus its own (loadServiceConfig).
  if (role.mode === 'process') return { ...serviceSettings('payout'), ...processorDefinition(role.network ?? '').settings };
  return { ...serviceSettings(role.process), ...DEFINITIONS[role.process].settings };
}

/** Read by Node itself, not by our configuration. */
const NODE_VARIABLES = new Set(['NODE_ENV', 'NODE_OPTIONS', 'NODE_EXTRA_CA_CERTS', 'TZ']);

export function roleOf(container: IContainer): Role | string {
  if (container.command !== undefined) return 'sets command: the image entrypoint (deploy/entrypoint.sh) must choose the process';
  const [first, second, ...rest] = container.args ?? [];
  if (first === 'gateway' && second === undefined) return { process: 'gateway', mode: 'serve' };
  if (first === 'invoice' && second === 'watch' && rest.length === 1 && WATCHED_CHAINS.includes(rest[0] ?? '')) {
    return { process: 'invoice', mode: 'watch' };
  }
  if (first === 'payout' && second === 'sign') {
    if (rest.length === 0) return { process: 'payout', mode: 'sign' };
    if (rest.length === 1 && rest[0] === 'migrate') return { process: 'payout', mode: 'sign-migrate' };
  }
  if (first === 'payout' && second === 'process' && rest.length === 1 && (PROCESSED_NETWORKS as readonly string[]).includes(rest[0] ?? '')) {
    return { process: 'payout', mode: 'process', network: rest[0] };
  }
  if (SERVICES.includes(first as ServiceName) && rest.length === 0) {
    if (second === undefined) return { process: first as ServiceName, mode: 'serve' };
    if (second === 'migrate') return { process: first as ServiceName, mode: 'migrate' };
  }
  return (
    `args ${JSON.stringify(container.args ?? [])} are not a process of the image (auth|invoice|payout|notifier [migrate] | ` +
    'invoice watch <chain> | payout sign [migrate] | payout process <network> | gateway)'
  );
}

// ---------------------------------------------------------------------------------------------
// Workloads: every pod template (Deployments and Jobs)

export interface Workload {
  kind: 'Deployment' | 'Job';
  name: string;
  /** How paths name it: the Deployment's name, or job/<name>. */
  id: string;
  namespace: string;
  labels: Record<string, string>;
  pod: IPodSpec;
}

export function workloadsOf(objects: K8sObject[]): Workload[] {
  const out: Workload[] = [];
  for (const d of ofKind<IDeployment>(objects, 'Deployment')) {
    out.push({
      kind: 'Deployment',
      name: d.metadata.name,
      id: d.metadata.name,
      namespace: d.metadata.namespace ?? 'default',
      labels: d.spec?.template.metadata?.labels ?? {},
      pod: d.spec?.template.spec ?? { containers: [] },
    });
  }
  for (const j of ofKind<IJob>(objects, 'Job')) {
    out.push({
      kind: 'Job',
      name: j.metadata.name,
      id: `job/${j.metadata.name}`,
      namespace: j.metadata.namespace ?? 'default',
      labels: j.spec?.template.metadata?.labels ?? {},
      pod: j.spec?.template.spec ?? { containers: [] },
    });
  }
  return out;
}

function containersOf(pod: IPodSpec): IContainer[] {
  return [...(pod.initContainers ?? []), ...pod.containers];
}

// ---------------------------------------------------------------------------------------------
// 1. Every object validates against the Kubernetes schema (kubernetes-models)

type Validatable = { validate(): void };
const MODELS: Record<string, new (data: never) => Validatable> = {
  'v1/ConfigMap': ConfigMap,
  'v1/Namespace': Namespace,
  'v1/Secret': Secret,
  'v1/Service': Service,
  'v1/ServiceAccount': ServiceAccount,
  'apps/v1/Deployment': Deployment,
  'batch/v1/Job': Job,
  'autoscaling/v2/HorizontalPodAutoscaler': HorizontalPodAutoscaler,
  'policy/v1/PodDisruptionBudget': PodDisruptionBudget,
  'networking.k8s.io/v1/NetworkPolicy': NetworkPolicy,
};

export function checkSchemas(ctx: DeployContext): string[] {
  const problems: string[] = [];
  for (const obj of ctx.objects) {
    const Model = MODELS[`${obj.apiVersion}/${obj.kind}`];
    const where = `${obj.kind} ${obj.metadata?.name ?? '(no name)'}`;
    if (!Model) {
      problems.push(`${where}: ${obj.apiVersion} ${obj.kind} has no schema in this check (add its kubernetes-models class)`);
      continue;
    }
    // Kubernetes decodes a Secret's base64 values ignoring line breaks (Go's encoding/base64), and
    // kustomize folds long values over several lines; the schema's "byte" format does not.
    const data = obj.kind === 'Secret' ? (obj as { data?: Record<string, string> }).data : undefined;
    const normalized = data
      ? { ...obj, data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, v.replace(/[\r\n]/g, '')])) }
      : obj;
    try {
      new Model(normalized as never).validate();
    } catch (err) {
      problems.push(`${where}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  const seen = new Set<string>();
  for (const obj of ctx.objects) {
    const key = `${obj.kind}/${obj.metadata?.namespace ?? ''}/${obj.metadata?.name}`;
    if (seen.has(key)) problems.push(`${obj.kind} ${obj.metadata.name}: defined twice`);
    seen.add(key);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// 2. Environment: every variable a process requires is provided, every value given parses, and
//    nothing is given that the process does not read.

export interface EnvEntry {
  /** Where it comes from, for messages. */
  from: string;
  /** The value, when the render knows it (not for Secrets created outside kustomize). */
  value: string | undefined;
}

export function decodeSecret(secret: ISecret): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(secret.data ?? {})) out[k] = Buffer.from(v, 'base64').toString('utf8');
  for (const [k, v] of Object.entries(secret.stringData ?? {})) out[k] = v;
  return out;
}

/** The Secret's keys and values (undefined when created outside kustomize), or undefined if unknown. */
function secretData(ctx: DeployContext, name: string): Record<string, string | undefined> | undefined {
  const rendered = ofKind<ISecret>(ctx.objects, 'Secret').find((s) => s.metadata.name === name);
  if (rendered) return decodeSecret(rendered);
  const keys = ctx.externalSecrets[name];
  return keys ? Object.fromEntries(keys.map((k) => [k, undefined])) : undefined;
}

function configMapData(ctx: DeployContext, name: string): Record<string, string> | undefined {
  return ofKind<IConfigMap>(ctx.objects, 'ConfigMap').find((c) => c.metadata.name === name)?.data ?? undefined;
}

/** The container's environment as Kubernetes builds it: envFrom first, then env (which wins). */
export function resolveEnv(ctx: DeployContext, container: IContainer, where: string, problems: string[]): Map<string, EnvEntry> {
  const env = new Map<string, EnvEntry>();
  for (const source of container.envFrom ?? []) {
    const prefix = source.prefix ?? '';
    if (source.configMapRef) {
      const name = source.configMapRef.name ?? '';
      const data = configMapData(ctx, name);
      if (!data) {
        if (!source.configMapRef.optional) problems.push(`${where}: envFrom ConfigMap ${name} does not exist`);
        continue;
      }
      for (const [k, v] of Object.entries(data)) env.set(prefix + k, { from: `ConfigMap ${name}`, value: v });
    }
    if (source.secretRef) {
      const name = source.secretRef.name ?? '';
      const data = secretData(ctx, name);
      if (!data) {
        if (!source.secretRef.optional) problems.push(`${where}: envFrom Secret ${name} is neither rendered nor listed in deploy/k8s/secret-keys.yaml`);
        continue;
      }
      for (const [k, v] of Object.entries(data)) env.set(prefix + k, { from: `Secret ${name}`, value: v });
    }
  }
  for (const entry of container.env ?? []) {
    const ref = entry.valueFrom;
    if (!ref) {
      env.set(entry.name, { from: 'a literal env value', value: entry.value ?? '' });
    } else if (ref.configMapKeyRef) {
      const { name = '', key, optional } = ref.configMapKeyRef;
      const value = configMapData(ctx, name)?.[key];
      if (value === undefined) {
        if (!optional) problems.push(`${where}: ${entry.name} refers to ConfigMap ${name} key ${key}, which does not exist`);
        continue;
      }
      env.set(entry.name, { from: `ConfigMap ${name}`, value });
    } else if (ref.secretKeyRef) {
      const { name = '', key, optional } = ref.secretKeyRef;
      const data = secretData(ctx, name);
      if (!data || !(key in data)) {
        if (!optional) {
          problems.push(
            `${where}: ${entry.name} refers to Secret ${name} key ${key}, which is neither rendered nor listed in deploy/k8s/secret-keys.yaml`,
          );
        }
        continue;
      }
      env.set(entry.name, { from: `Secret ${name}`, value: data[key] });
    } else {
      env.set(entry.name, { from: 'a field reference', value: undefined });
    }
  }
  return env;
}

function isProduction(env: Map<string, EnvEntry>): boolean {
  const given = env.get('APP_ENV')?.value;
  return (given === undefined || given === '' ? commonSettings.APP_ENV.default : given) === 'production';
}

/** The value the process will use for `name`: given, else its default (undefined if unknown). */
function effectiveValue(settings: Settings, env: Map<string, EnvEntry>, name: string): string | undefined {
  const setting = settings[name];
  const entry = env.get(name);
  if (entry && entry.value === undefined) return undefined;
  const fallback = setting?.default ?? (isProduction(env) ? undefined : setting?.devDefault);
  return entry?.value === undefined || entry.value === '' ? fallback : entry.value;
}

function isLoopbackHost(host: string): boolean {
  return host === '::1' || host === 'localhost' || /^127\./.test(host);
}

/**
 * What the treasury roles check at start beyond single settings, so that a manifest they would
 * refuse fails here rather than in a crash loop: the signer's transport and account keys
 * (requireSafeTransport, requireMatchingXpubs in services/payout/src/signer/role.ts) and the
 * processor's checkConfig (services/payout/src/processor/role.ts).
 */
function treasuryRoleRules(role: Role, settings: Settings, env: Map<string, EnvEntry>, where: string): string[] {
  const problems: string[] = [];
  const known = (name: string) => env.get(name) === undefined || env.get(name)?.value !== undefined;
  if (role.mode === 'sign') {
    const tlsFiles = ['TLS_CA_FILE', 'TLS_CERT_FILE', 'TLS_KEY_FILE'];
    const withoutTls = tlsFiles.every((name) => known(name) && (effectiveValue(settings, env, name) ?? '') === '');
    if (withoutTls) {
      const plaintext = settings.SIGNER_ALLOW_PLAINTEXT?.parse(effectiveValue(settings, env, 'SIGNER_ALLOW_PLAINTEXT') ?? 'false') === true;
      const host = effectiveValue(settings, env, 'BIND_HOST') ?? '';
      if (isProduction(env) || !plaintext || !isLoopbackHost(host)) {
        problems.push(`${where}: ${roleName(role)} serves only over mutual TLS (TLS_CA_FILE, TLS_CERT_FILE, TLS_KEY_FILE); plaintext only in development on a loopback BIND_HOST, which no other pod can reach`);
      }
    }
    const xpubs = SIGNER_XPUB_VARIABLES.filter((name) => !known(name) || (effectiveValue(settings, env, name) ?? '') !== '');
    if (xpubs.length === 0) {
      problems.push(`${where}: ${roleName(role)} needs at least one of ${SIGNER_XPUB_VARIABLES.join(', ')} (its seed's account key is checked against them) but none is given`);
    }
  }
  if (role.mode === 'process') {
    const definition = processorDefinition(role.network ?? '');
    // The values the render knows, parsed as the process would; checkConfig reads only those.
    const config: Record<string, unknown> = {};
    let incomplete = false;
    for (const name of Object.keys(settings)) {
      if (!known(name)) continue;
      const raw = effectiveValue(settings, env, name);
      const value = raw === undefined ? undefined : settings[name]?.parse(raw);
      // A missing or invalid value is reported by checkEnvironment already; the start would stop there.
      if (value === undefined) incomplete = true;
      else config[name] = value;
    }
    if (incomplete) return problems;
    try {
      definition.checkConfig?.(config as never);
    } catch (err) {
      problems.push(
        err instanceof ConfigError
          ? `${where}: ${roleName(role)} refuses to start: ${err.message}`
          : `${where}: ${roleName(role)}'s start checks could not be evaluated from the render (${String(err)}): a value they read comes from a Secret created outside kustomize`,
      );
    }
  }
  return problems;
}

export function checkEnvironment(ctx: DeployContext): string[] {
  const problems: string[] = [];
  for (const w of workloadsOf(ctx.objects)) {
    for (const container of containersOf(w.pod)) {
      const where = `${w.kind} ${w.name} container ${container.name}`;
      const role = roleOf(container);
      if (typeof role === 'string') {
        problems.push(`${where}: ${role}`);
        continue;
      }
      const settings = settingsOf(role);
      const env = resolveEnv(ctx, container, where, problems);
      const production = isProduction(env);
      const process = roleName(role);
      for (const [name, setting] of Object.entries(settings)) {
        const entry = env.get(name);
        if (entry && entry.value === undefined) continue; // a Secret created outside kustomize
        const fallback = setting.default ?? (production ? undefined : setting.devDefault);
        const given = entry?.value;
        const raw = given === undefined || given === '' ? fallback : given;
        if (raw === undefined) {
          problems.push(
            `${where}: ${name} is required${production ? ' in production' : ''} by ${process} (${setting.expected}) ` +
              `but ${entry ? `${entry.from} gives it empty` : 'no env or envFrom provides it'}: add it to a ConfigMap of ` +
              'deploy/k8s/base/configmap.yaml, or to a Secret of deploy/k8s/secret-keys.yaml referenced from the container',
          );
        } else if (given !== undefined && given !== '' && setting.parse(given) === undefined) {
          problems.push(`${where}: ${name}=${JSON.stringify(given)} from ${entry?.from} is invalid for ${process}: expected ${setting.expected}`);
        }
      }
      // Rules across settings (docs/architecture.md#production-refuses-what-is-unsafe): e.g. an xpub for every enabled coin.
      const definition = role.process !== 'gateway' && role.mode === 'serve' ? DEFINITIONS[role.process] : undefined;
      if (production && definition?.requiredInProduction) {
        const raw = Object.fromEntries([...env].map(([name, entry]) => [name, entry.value]));
        for (const name of definition.requiredInProduction(raw)) {
          const entry = env.get(name);
          if (entry && entry.value === undefined) continue; // a Secret created outside kustomize
          if (!entry || entry.value === '') {
            problems.push(
              `${where}: ${name} is required in production by ${process} (a rule across settings, docs/architecture.md#production-refuses-what-is-unsafe) ` +
                `but ${entry ? `${entry.from} gives it empty` : 'no env or envFrom provides it'}`,
            );
          }
        }
      }
      problems.push(...treasuryRoleRules(role, settings, env, where));
      for (const [name, entry] of env) {
        if (!(name in settings) && !NODE_VARIABLES.has(name)) {
          problems.push(`${where}: ${name} (from ${entry.from}) is not a setting of ${process}: a typo, or a setting that no longer exists`);
        }
      }
    }
  }
  return problems;
}

/** The overlay's intent: production runs APP_ENV=production everywhere, development development. */
export function checkOverlayEnvironment(ctx: DeployContext): string[] {
  const problems: string[] = [];
  for (const w of workloadsOf(ctx.objects)) {
    for (const container of containersOf(w.pod)) {
      const env = resolveEnv(ctx, container, '', []);
      const production = isProduction(env);
      if (production !== (ctx.overlay === 'production')) {
        problems.push(`${w.kind} ${w.name}: the ${ctx.overlay} overlay runs it with APP_ENV=${production ? 'production' : 'development'}`);
      }
    }
  }
  return problems;
}

/** Secret keys: the list of deploy/k8s/secret-keys.yaml is used, complete, and what development generates. */
export function checkSecretList(ctx: DeployContext): string[] {
  const problems: string[] = [];
  const referenced = new Map<string, Set<string>>();
  for (const w of workloadsOf(ctx.objects)) {
    for (const c of containersOf(w.pod)) {
      for (const e of c.env ?? []) {
        const ref = e.valueFrom?.secretKeyRef;
        if (ref?.name) referenced.set(ref.name, (referenced.get(ref.name) ?? new Set()).add(ref.key));
      }
      for (const s of c.envFrom ?? []) {
        const name = s.secretRef?.name;
        if (name) referenced.set(name, (referenced.get(name) ?? new Set()).add('*'));
      }
      // A Secret mounted as files (an event signing key) uses every key it holds.
      for (const mount of c.volumeMounts ?? []) {
        const name = (w.pod.volumes ?? []).find((v) => v.name === mount.name)?.secret?.secretName;
        if (name) referenced.set(name, (referenced.get(name) ?? new Set()).add('*'));
      }
    }
  }
  for (const [name, keys] of Object.entries(ctx.externalSecrets)) {
    const used = referenced.get(name);
    for (const key of keys) {
      if (!used?.has(key) && !used?.has('*')) problems.push(`deploy/k8s/secret-keys.yaml lists ${name} key ${key}, which no container uses`);
    }
  }
  const rendered = ofKind<ISecret>(ctx.objects, 'Secret');
  if (ctx.overlay === 'production' && rendered.length > 0) {
    problems.push(`production renders Secrets (${rendered.map((s) => s.metadata.name).join(', ')}): production Secrets are created outside the repository`);
  }
  for (const secret of rendered) {
    const listed = ctx.externalSecrets[secret.metadata.name];
    const keys = Object.keys(decodeSecret(secret)).sort();
    if (!listed) problems.push(`Secret ${secret.metadata.name} is generated but not listed in deploy/k8s/secret-keys.yaml`);
    else if (JSON.stringify(keys) !== JSON.stringify([...listed].sort())) {
      problems.push(`Secret ${secret.metadata.name} has keys ${keys.join(', ')} but deploy/k8s/secret-keys.yaml lists ${[...listed].sort().join(', ')}`);
    }
  }
  return problems;
}

/**
 * The treasury's seed (docs/treasury.md#keys): the signer reads it from SIGNER_SEED_FILE, a file
 * of a read-only Secret volume that no one but the pod's user and group may read. That Secret
 * reaches no other pod, and no container as an environment variable (which `kubectl describe`,
 * crash dumps and child processes would show).
 */
/**
 * Every file a process is told to read (a setting named *_FILE: the TLS material, the event signing
 * key, the signer's seed) lies in a volume its container mounts: the root filesystem of the image
 * holds none of them, so the process would stop at start.
 */
export function checkFileSettings(ctx: DeployContext): string[] {
  const problems: string[] = [];
  for (const w of workloadsOf(ctx.objects)) {
    for (const container of containersOf(w.pod)) {
      const role = roleOf(container);
      if (typeof role === 'string') continue; // reported by checkEnvironment
      const where = `${w.kind} ${w.name} container ${container.name}`;
      const settings = settingsOf(role);
      const env = resolveEnv(ctx, container, where, []);
      for (const name of Object.keys(settings).filter((n) => n.endsWith('_FILE'))) {
        const file = effectiveValue(settings, env, name)?.trim();
        if (!file) continue;
        const mounted = (container.volumeMounts ?? []).some((m) => file.startsWith(`${m.mountPath.replace(/\/$/, '')}/`));
        if (!mounted) problems.push(`${where}: ${name}=${file} is in no volume the container mounts`);
      }
    }
  }
  return problems;
}

/** The signer's mnemonic (deploy/k8s/secret-keys.yaml). */
export const SEED_SECRET = 'payout-signer-seed';

export function checkSignerSeed(ctx: DeployContext): string[] {
  const problems: string[] = [];
  const workloads = workloadsOf(ctx.objects);
  // The Secret deploy/k8s/secret-keys.yaml names for it, and whichever the signer actually mounts.
  const seedSecrets = new Set<string>([SEED_SECRET]);
  let signers = 0;
  for (const w of workloads) {
    for (const container of containersOf(w.pod)) {
      const role = roleOf(container);
      if (typeof role === 'string' || role.mode !== 'sign') continue;
      signers++;
      const where = `${w.kind} ${w.name} container ${container.name}`;
      const env = resolveEnv(ctx, container, where, []);
      const file = effectiveValue(signerSettings, env, 'SIGNER_SEED_FILE');
      if (file === undefined || file.trim() === '') {
        problems.push(`${where}: SIGNER_SEED_FILE is not given: the mnemonic must be a file mounted from a Secret`);
        continue;
      }
      const mount = (container.volumeMounts ?? [])
        .filter((m) => file.startsWith(`${m.mountPath.replace(/\/$/, '')}/`))
        .sort((a, b) => b.mountPath.length - a.mountPath.length)[0];
      const volume = mount && (w.pod.volumes ?? []).find((v) => v.name === mount.name);
      if (!mount || !volume?.secret?.secretName) {
        problems.push(`${where}: SIGNER_SEED_FILE=${file} is not a file of a mounted Secret`);
        continue;
      }
      seedSecrets.add(volume.secret.secretName);
      if (mount.readOnly !== true) problems.push(`${where}: the seed volume ${mount.name} is not mounted readOnly`);
      const modes = [volume.secret.defaultMode ?? 0o644, ...(volume.secret.items ?? []).map((i) => i.mode ?? volume.secret?.defaultMode ?? 0o644)];
      if (modes.some((mode) => (mode & 0o007) !== 0 || (mode & 0o222) !== 0)) {
        problems.push(`${where}: the seed Secret ${volume.secret.secretName} is mounted with mode ${modes.map((m) => `0${m.toString(8)}`).join('/')}: writable or readable by others (0400 or 0440)`);
      }
    }
  }
  if (signers === 0) problems.push('no container runs `payout sign`: the treasury has no signer');
  for (const secret of seedSecrets) {
    for (const w of workloads) {
      for (const container of containersOf(w.pod)) {
        const role = roleOf(container);
        const where = `${w.kind} ${w.name} container ${container.name}`;
        for (const entry of container.env ?? []) {
          if (entry.valueFrom?.secretKeyRef?.name === secret) problems.push(`${where}: ${entry.name} takes the seed Secret ${secret} as an environment variable`);
        }
        for (const source of container.envFrom ?? []) {
          if (source.secretRef?.name === secret) problems.push(`${where}: envFrom takes the seed Secret ${secret} as environment variables`);
        }
        const signer = typeof role !== 'string' && role.mode === 'sign';
        for (const m of container.volumeMounts ?? []) {
          const v = (w.pod.volumes ?? []).find((vol) => vol.name === m.name);
          const mounted = v?.secret?.secretName === secret || (v?.projected?.sources ?? []).some((src) => src.secret?.name === secret);
          if (mounted && !signer) problems.push(`${where}: mounts the seed Secret ${secret}, which only the signer may hold`);
        }
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// 3. Ports and probes: every probe points at a port the container exposes, and the process
//    listens where the container port says.

/** The container ports each process must expose, by name, and the setting that picks the port. */
const PORTS: Record<ProcessName, Record<string, string>> = {
  auth: { grpc: 'GRPC_PORT', 'grpc-health': 'GRPC_HEALTH_PORT', 'http-admin': 'ADMIN_PORT' },
  invoice: { grpc: 'GRPC_PORT', 'grpc-health': 'GRPC_HEALTH_PORT', 'http-admin': 'ADMIN_PORT' },
  payout: { grpc: 'GRPC_PORT', 'grpc-health': 'GRPC_HEALTH_PORT', 'http-admin': 'ADMIN_PORT' },
  notifier: { grpc: 'GRPC_PORT', 'grpc-health': 'GRPC_HEALTH_PORT', 'http-admin': 'ADMIN_PORT' },
  gateway: { http: 'GATEWAY_PORT' },
};

function findPort(container: IContainer, port: number | string): IContainerPort | undefined {
  return (container.ports ?? []).find((p) => (typeof port === 'number' ? p.containerPort === port : p.name === port));
}

function probeProblems(container: IContainer, kind: string, probe: IProbe | undefined, role: Role, where: string): string[] {
  if (!probe) return [];
  const at = `${where} ${kind}`;
  if (probe.grpc) {
    const exposed = findPort(container, probe.grpc.port);
    if (!exposed) return [`${at}: grpc port ${probe.grpc.port} is not a port the container exposes`];
    // With mutual TLS (production) probes use the plaintext health-only port (GRPC_HEALTH_PORT).
    if (exposed.name !== 'grpc' && exposed.name !== 'grpc-health') return [`${at}: grpc port ${probe.grpc.port} is the container's ${exposed.name ?? 'unnamed'} port, not grpc`];
    if (role.process === 'gateway') return [`${at}: the gateway serves HTTP, not gRPC`];
    return [];
  }
  if (probe.httpGet) {
    const exposed = findPort(container, probe.httpGet.port);
    if (!exposed) return [`${at}: httpGet port ${probe.httpGet.port} is not a port the container exposes`];
    if (exposed.name === 'grpc') return [`${at}: httpGet on the gRPC port (h2c only)`];
    return [];
  }
  return [`${at}: use a grpc: (services) or httpGet (gateway) probe`];
}

export function checkPortsAndProbes(ctx: DeployContext): string[] {
  const problems: string[] = [];
  for (const w of workloadsOf(ctx.objects)) {
    for (const container of containersOf(w.pod)) {
      const where = `${w.kind} ${w.name} container ${container.name}`;
      const role = roleOf(container);
      if (typeof role === 'string') continue; // reported by checkEnvironment
      if (role.mode === 'migrate' || role.mode === 'sign-migrate') {
        if ((container.ports ?? []).length > 0) problems.push(`${where}: a migration exposes no ports`);
        continue;
      }
      const settings = settingsOf(role);
      const env = resolveEnv(ctx, container, where, []);
      for (const [portName, variable] of Object.entries(PORTS[role.process])) {
        const port = findPort(container, portName);
        const listens = effectiveValue(settings, env, variable);
        // grpc-health exists only with mutual TLS (production): checked when declared.
        if (!port) {
          if (portName !== 'grpc-health') problems.push(`${where}: no container port named ${portName}`);
        }
        else if (listens !== undefined && String(port.containerPort) !== listens) {
          problems.push(`${where}: the process listens on ${variable}=${listens} but container port ${portName} is ${port.containerPort}`);
        }
      }
      // With mutual TLS the gRPC port asks every client for a certificate, which a kubelet probe
      // cannot present: the probes must ask the plaintext health port (GRPC_HEALTH_PORT).
      const mutualTls = role.process !== 'gateway' && (effectiveValue(settings, env, 'TLS_CERT_FILE') ?? '').trim() !== '';
      for (const kind of ['startupProbe', 'readinessProbe', 'livenessProbe'] as const) {
        problems.push(...probeProblems(container, kind, container[kind], role, where));
        const probed = container[kind]?.grpc && findPort(container, container[kind].grpc.port);
        if (mutualTls && probed && probed.name === 'grpc') {
          problems.push(`${where} ${kind}: probes the mutual-TLS gRPC port, where a kubelet probe has no client certificate: probe grpc-health (GRPC_HEALTH_PORT)`);
        }
      }
      if (!container.readinessProbe) problems.push(`${where}: no readinessProbe`);
      if (!container.livenessProbe) problems.push(`${where}: no livenessProbe`);
      if (role.process === 'gateway') {
        if (container.readinessProbe?.httpGet?.path !== '/readyz?scope=traffic') problems.push(`${where}: readinessProbe must be httpGet /readyz?scope=traffic`);
        if (container.livenessProbe?.httpGet?.path !== '/healthz') problems.push(`${where}: livenessProbe must be httpGet /healthz`);
      } else {
        if (!container.readinessProbe?.grpc) problems.push(`${where}: readinessProbe must be grpc: (grpc.health.v1)`);
        else if (container.readinessProbe.grpc.service !== 'readiness') problems.push(`${where}: readinessProbe must ask grpc.health.v1 for service "readiness"`);
        if (!container.livenessProbe?.grpc) problems.push(`${where}: livenessProbe must be grpc: (grpc.health.v1)`);
        else if (container.livenessProbe.grpc.service !== 'liveness') problems.push(`${where}: livenessProbe must ask grpc.health.v1 for service "liveness"`);
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// 4. Services: one per Deployment, selecting exactly its pods, ports mapped to named container
//    ports; the gRPC URLs in the configuration point at them.

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: { key: string; operator: string; values?: string[] }[];
}

export function selectorMatches(selector: LabelSelector | undefined | null, labels: Record<string, string>): boolean {
  if (!selector) return false;
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const { key, operator, values = [] } of selector.matchExpressions ?? []) {
    const has = key in labels;
    const value = labels[key];
    const ok =
      operator === 'In' ? has && values.includes(value ?? '')
      : operator === 'NotIn' ? !has || !values.includes(value ?? '')
      : operator === 'Exists' ? has
      : operator === 'DoesNotExist' ? !has
      : false;
    if (!ok) return false;
  }
  return true;
}

function serviceSelects(service: IService, labels: Record<string, string>): boolean {
  const selector = service.spec?.selector;
  return !!selector && Object.keys(selector).length > 0 && Object.entries(selector).every(([k, v]) => labels[k] === v);
}

/** The container port a Service port leads to, in the workload the Service selects. */
function serviceTarget(ctx: DeployContext, serviceName: string, servicePort: number): { workload: Workload; port: IContainerPort } | string {
  const service = ofKind<IService>(ctx.objects, 'Service').find((s) => s.metadata.name === serviceName);
  if (!service) return `no Service ${serviceName}`;
  const sp = (service.spec?.ports ?? []).find((p) => p.port === servicePort);
  if (!sp) return `Service ${serviceName} has no port ${servicePort}`;
  const workload = workloadsOf(ctx.objects).find((w) => w.kind === 'Deployment' && serviceSelects(service, w.labels));
  if (!workload) return `Service ${serviceName} selects no Deployment`;
  const target = sp.targetPort ?? sp.port;
  for (const c of workload.pod.containers) {
    const port = findPort(c, target);
    if (port) return { workload, port };
  }
  return `Service ${serviceName} port ${servicePort} targets ${target}, which ${workload.name} does not expose`;
}

export function checkServices(ctx: DeployContext): string[] {
  const problems: string[] = [];
  const services = ofKind<IService>(ctx.objects, 'Service');
  const workloads = workloadsOf(ctx.objects);
  for (const d of workloads.filter((w) => w.kind === 'Deployment')) {
    const service = services.find((s) => s.metadata.name === d.name);
    const where = `Service ${d.name}`;
    if (!service) {
      problems.push(`Deployment ${d.name} has no Service of the same name`);
      continue;
    }
    const selected = workloads.filter((w) => serviceSelects(service, w.labels)).map((w) => w.id);
    if (selected.join() !== d.id) problems.push(`${where} selects ${selected.join(', ') || 'nothing'} instead of exactly the pods of Deployment ${d.name}`);
    for (const sp of service.spec?.ports ?? []) {
      const target = serviceTarget(ctx, d.name, sp.port);
      if (typeof target === 'string') problems.push(`${where}: ${target}`);
      else if (sp.name !== target.port.name) problems.push(`${where}: port ${sp.name} leads to container port ${target.port.name}`);
    }
    const names = (service.spec?.ports ?? []).map((p) => p.name);
    if (d.name === 'gateway') {
      if (!names.includes('http')) problems.push(`${where}: no port named http`);
      continue;
    }
    const grpc = (service.spec?.ports ?? []).find((p) => p.name === 'grpc');
    if (!grpc) problems.push(`${where}: no port named grpc`);
    else if (!grpc.appProtocol) problems.push(`${where}: port grpc has no appProtocol (HTTP/2 cleartext)`);
    const admin = (service.spec?.ports ?? []).find((p) => p.name === 'http-admin');
    const adminContainerPort = findPort(d.pod.containers[0] ?? { name: '' }, 'http-admin')?.containerPort;
    if (!admin) problems.push(`${where}: no port named http-admin`);
    const annotations = service.metadata.annotations ?? {};
    if (annotations['prometheus.io/scrape'] !== 'true') problems.push(`${where}: no prometheus.io/scrape annotation`);
    if (annotations['prometheus.io/port'] !== String(adminContainerPort)) {
      problems.push(`${where}: prometheus.io/port is ${annotations['prometheus.io/port']} but the admin port is ${adminContainerPort}`);
    }
  }
  return problems;
}

/** A call one process makes to another, read from its configuration (AUTH_URL=http://auth:50051…). */
export interface ConfiguredCall {
  from: Workload;
  variable: string;
  to: Workload;
  port: IContainerPort;
}

/** URL settings naming a Service other than a process's own name: the payout processor's signer. */
const CALLED_SERVICE_OF: Record<string, string> = { SIGNER_URL: 'payout-signer' };
const CALLED_SERVICE_NAMES: Record<string, true> = Object.fromEntries(Object.values(CALLED_SERVICE_OF).map((name) => [name, true]));

export function configuredCalls(ctx: DeployContext, problems: string[]): ConfiguredCall[] {
  const calls: ConfiguredCall[] = [];
  const namespace = namespaceOf(ctx);
  for (const w of workloadsOf(ctx.objects)) {
    for (const container of containersOf(w.pod)) {
      const role = roleOf(container);
      if (typeof role === 'string') continue;
      const where = `${w.kind} ${w.name} container ${container.name}`;
      const env = resolveEnv(ctx, container, where, []);
      for (const [variable, entry] of env) {
        const callee = CALLED_SERVICE_OF[variable] ?? /^([A-Z]+)_URL$/.exec(variable)?.[1]?.toLowerCase();
        if (!callee || !(PROCESSES.includes(callee as ProcessName) || callee in CALLED_SERVICE_NAMES) || entry.value === undefined) continue;
        let url: URL;
        try {
          url = new URL(entry.value);
        } catch {
          continue; // checkEnvironment reports values that do not parse
        }
        const [host = '', ns, svc, ...domain] = url.hostname.split('.');
        const local = ns === undefined || (ns === namespace && (svc === undefined || (svc === 'svc' && ['', 'cluster.local'].includes(domain.join('.')))));
        if (host !== callee || !local) {
          problems.push(`${where}: ${variable}=${entry.value} does not name the Service ${callee} of this namespace`);
          continue;
        }
        const port = Number(url.port || (url.protocol === 'https:' ? 443 : 80));
        const target = serviceTarget(ctx, host, port);
        if (typeof target === 'string') problems.push(`${where}: ${variable}=${entry.value}: ${target}`);
        else if (target.port.name !== 'grpc') problems.push(`${where}: ${variable}=${entry.value} leads to ${target.workload.name}'s ${target.port.name} port, not grpc`);
        else calls.push({ from: w, variable, to: target.workload, port: target.port });
      }
    }
  }
  return calls;
}

// ---------------------------------------------------------------------------------------------
// 5. Security: non-root (the image's own user), read-only root filesystem, no privilege
//    escalation, no capabilities, RuntimeDefault seccomp, /tmp an emptyDir, no API token.

export function checkSecurity(ctx: DeployContext): string[] {
  const problems: string[] = [];
  const images = new Set<string>();
  for (const w of workloadsOf(ctx.objects)) {
    const pod = w.pod;
    const where = `${w.kind} ${w.name}`;
    const psc = pod.securityContext ?? {};
    if (psc.runAsNonRoot !== true) problems.push(`${where}: pod securityContext.runAsNonRoot is not true`);
    if (pod.automountServiceAccountToken !== false) problems.push(`${where}: automountServiceAccountToken is not false (no process calls the API)`);
    if (pod.enableServiceLinks !== false) problems.push(`${where}: enableServiceLinks is not false (Service variables such as GATEWAY_PORT=tcp://… would reach the processes)`);
    if (pod.hostNetwork || pod.hostPID || pod.hostIPC) problems.push(`${where}: uses the host's network, PID or IPC namespace`);
    for (const c of containersOf(pod)) {
      const at = `${where} container ${c.name}`;
      const sc = c.securityContext ?? {};
      images.add(c.image ?? '');
      const uid = sc.runAsUser ?? psc.runAsUser;
      if (uid === undefined || uid === 0) problems.push(`${at}: runAsUser is ${uid ?? 'unset'}; expected a non-root numeric user`);
      else if (ctx.imageUid !== undefined && uid !== ctx.imageUid) problems.push(`${at}: runAsUser ${uid} is not the image's USER ${ctx.imageUid}`);
      if ((sc.runAsNonRoot ?? psc.runAsNonRoot) !== true) problems.push(`${at}: runAsNonRoot is not true`);
      if ((sc.seccompProfile ?? psc.seccompProfile)?.type !== 'RuntimeDefault') problems.push(`${at}: seccompProfile is not RuntimeDefault`);
      if (sc.allowPrivilegeEscalation !== false) problems.push(`${at}: allowPrivilegeEscalation is not false`);
      if (sc.readOnlyRootFilesystem !== true) problems.push(`${at}: readOnlyRootFilesystem is not true`);
      if (sc.privileged === true) problems.push(`${at}: privileged`);
      if (!(sc.capabilities?.drop ?? []).includes('ALL')) problems.push(`${at}: capabilities do not drop ALL`);
      if ((sc.capabilities?.add ?? []).length > 0) problems.push(`${at}: adds capabilities ${sc.capabilities?.add?.join(', ')}`);
      const tmp = (c.volumeMounts ?? []).find((m) => m.mountPath === '/tmp');
      const volume = tmp && (pod.volumes ?? []).find((v) => v.name === tmp.name);
      if (!volume?.emptyDir) problems.push(`${at}: /tmp is not an emptyDir (the root filesystem is read-only)`);
    }
  }
  if (images.size !== 1) problems.push(`every container must run the one coinvoice image, found: ${[...images].join(', ')}`);
  const image = [...images][0] ?? '';
  if (ctx.overlay === 'production' && (!/[:@]/.test(image.split('/').pop() ?? '') || image.endsWith(':latest'))) {
    problems.push(`production image ${image} has no pinned tag or digest`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// 6. Resources and scaling: requests and limits everywhere, one HPA and one PDB per Deployment.

/** A Kubernetes quantity in base units (cores, bytes). */
export function parseQuantity(q: string | number | undefined): number | undefined {
  if (q === undefined) return undefined;
  const m = /^([0-9.]+)([a-zA-Z]*)$/.exec(String(q));
  if (!m) return undefined;
  const units: Record<string, number> = {
    '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40,
  };
  const unit = units[m[2] ?? ''];
  return unit === undefined ? undefined : Number(m[1]) * unit;
}

export function checkResourcesAndScaling(ctx: DeployContext): string[] {
  const problems: string[] = [];
  const workloads = workloadsOf(ctx.objects);
  for (const w of workloads) {
    for (const c of containersOf(w.pod)) {
      const at = `${w.kind} ${w.name} container ${c.name}`;
      for (const resource of ['cpu', 'memory'] as const) {
        const request = parseQuantity(c.resources?.requests?.[resource]);
        const limit = parseQuantity(c.resources?.limits?.[resource]);
        if (request === undefined) problems.push(`${at}: no ${resource} request`);
        if (limit === undefined) problems.push(`${at}: no ${resource} limit`);
        if (request !== undefined && limit !== undefined && request > limit) problems.push(`${at}: ${resource} request above its limit`);
      }
    }
  }
  const hpas = ofKind<IHorizontalPodAutoscaler>(ctx.objects, 'HorizontalPodAutoscaler');
  const pdbs = ofKind<IPodDisruptionBudget>(ctx.objects, 'PodDisruptionBudget');
  for (const d of ofKind<IDeployment>(ctx.objects, 'Deployment')) {
    const name = d.metadata.name;
    const labels = d.spec?.template.metadata?.labels ?? {};
    if (d.spec?.replicas !== undefined) problems.push(`Deployment ${name}: spec.replicas is set, and every apply would fight its autoscaler`);
    const mine = hpas.filter((h) => h.spec?.scaleTargetRef.kind === 'Deployment' && h.spec.scaleTargetRef.name === name);
    const hpa = mine[0];
    if (mine.length !== 1 || !hpa?.spec) {
      problems.push(`Deployment ${name}: ${mine.length} HorizontalPodAutoscalers (expected 1)`);
    } else {
      const min = hpa.spec.minReplicas ?? 1;
      const max = hpa.spec.maxReplicas;
      if (!(hpa.spec.metrics ?? []).some((m) => m.type === 'Resource' && m.resource?.name === 'cpu')) problems.push(`HPA ${name}: does not scale on CPU`);
      if (min < 1 || max < min) problems.push(`HPA ${name}: replicas ${min}..${max}`);
      if (ctx.overlay === 'production' && min < 2) problems.push(`HPA ${name}: production runs fewer than 2 replicas (${min})`);
      if (ctx.overlay === 'development' && (min !== 1 || max !== 1)) problems.push(`HPA ${name}: development runs ${min}..${max} replicas, expected 1`);
      const budgets = pdbs.filter((p) => selectorMatches(p.spec?.selector, labels));
      const pdb = budgets[0];
      if (budgets.length !== 1 || !pdb?.spec) {
        problems.push(`Deployment ${name}: ${budgets.length} PodDisruptionBudgets select its pods (expected 1)`);
      } else {
        const others = workloads.filter((w) => w.name !== name && selectorMatches(pdb.spec?.selector, w.labels));
        if (others.length > 0) problems.push(`PDB ${pdb.metadata.name}: also selects ${others.map((w) => w.id).join(', ')}`);
        const { maxUnavailable, minAvailable } = pdb.spec;
        const blocks =
          maxUnavailable !== undefined ? maxUnavailable === 0 || maxUnavailable === '0%'
          : typeof minAvailable === 'number' ? minAvailable >= min
          : minAvailable === '100%';
        if (blocks) problems.push(`PDB ${pdb.metadata.name}: allows no eviction at ${min} replicas (node drains would hang)`);
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// 6b. Chain watchers: exactly one Deployment per chain the invoice service watches (the registry's
//     WATCHED_CHAINS), rendered from the chain-watcher component with that chain's values.

/** The API each chain's node speaks, as the component's coinvoice.io/chain-api label names it. */
export function chainApiOf(chain: string): string {
  if (isEvmChain(chain)) return 'json-rpc';
  return chain === 'tron' ? 'tron-http' : 'esplora';
}

export function checkWatchers(ctx: DeployContext): string[] {
  const problems: string[] = [];
  const sources = chainSources(loadConfig(chainWatcherSettings, {}));
  const watchers = ofKind<IDeployment>(ctx.objects, 'Deployment').filter((d) => {
    const c = d.spec?.template.spec?.containers[0];
    return c?.args?.[0] === 'invoice' && c.args[1] === 'watch';
  });
  for (const d of watchers) {
    const chain = d.spec?.template.spec?.containers[0]?.args?.[2] ?? '';
    if (!WATCHED_CHAINS.includes(chain)) problems.push(`Deployment ${d.metadata.name}: watches ${chain}, which the registry does not watch`);
    if (d.metadata.name !== `invoice-watcher-${chain}`) problems.push(`Deployment ${d.metadata.name}: watches ${chain} but is not named invoice-watcher-${chain}`);
  }
  for (const chain of WATCHED_CHAINS) {
    const name = `invoice-watcher-${chain}`;
    const mine = watchers.filter((d) => d.spec?.template.spec?.containers[0]?.args?.[2] === chain);
    if (mine.length !== 1) {
      problems.push(`${mine.length} Deployments watch ${chain} (expected exactly one, ${name})`);
      continue;
    }
    const d = mine[0]!;
    const labels = d.spec?.template.metadata?.labels ?? {};
    if (labels['app.kubernetes.io/component'] !== `watcher-${chain}`) problems.push(`Deployment ${name}: pods labelled component ${labels['app.kubernetes.io/component']}, not watcher-${chain}`);
    if (labels['coinvoice.io/chain-api'] !== chainApiOf(chain)) problems.push(`Deployment ${name}: pods labelled chain-api ${labels['coinvoice.io/chain-api']}, not ${chainApiOf(chain)}`);
    const variable = sources[chain as keyof typeof sources]?.sourceVariable;
    const env = d.spec?.template.spec?.containers[0]?.env?.find((e) => e.name === variable);
    const ref = env?.valueFrom?.secretKeyRef;
    if (!env) problems.push(`Deployment ${name}: does not give ${variable ?? '(no source variable)'}, the node the watcher follows`);
    else if (ref?.name !== `${name}-secrets` || ref.key !== variable) problems.push(`Deployment ${name}: ${variable} comes from ${ref ? `Secret ${ref.name} key ${ref.key}` : 'a literal value'}, not Secret ${name}-secrets key ${variable}`);
    // The watcher runs with the launcher's flags for its role (its heap cap), as measured.
    const nodeOptions = d.spec?.template.spec?.containers[0]?.env?.find((e) => e.name === 'NODE_OPTIONS')?.value;
    const flags = [...SERVICE_NODE_FLAGS, ...WATCHER_NODE_FLAGS].join(' ');
    if (nodeOptions !== flags) problems.push(`Deployment ${name}: NODE_OPTIONS is ${nodeOptions ?? 'unset'}, not the launcher's watcher flags "${flags}"`);
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// 7. NetworkPolicies: compute every path they allow and compare with the architecture's.

/** Where each processor's node listens: a hosted JSON-RPC provider (HTTPS) or a node of one's own (8545). */
const PROCESSOR_NODE_PORTS: Record<(typeof PROCESSED_NETWORKS)[number], number[]> = { ethereum: [443, 8545], bitcoin: [443, 3000], litecoin: [443, 3000], tron: [443, 8090] };

/** The architecture's paths (docs/architecture.md#shape): pods by Deployment name (job/<name> for Jobs), ports by name. */
export function expectedPaths(ctx: DeployContext): Set<string> {
  const paths = new Set<string>();
  for (const s of SERVICES) paths.add(`gateway -> ${s}:grpc`);
  for (const s of ['invoice', 'payout', 'notifier']) paths.add(`${s} -> auth:grpc`);
  // The code emails (issue 12): auth and payout call the notifier.
  for (const s of ['auth', 'payout']) paths.add(`${s} -> notifier:grpc`);
  // The ledger invariant check (docs/accounting.md): payout reads what invoice reported.
  paths.add('payout -> invoice:grpc');
  paths.add('anywhere -> gateway:http');
  for (const s of SERVICES) paths.add(`prometheus -> ${s}:http-admin`);
  for (const s of SERVICES) {
    paths.add(`${s} -> external:5432/TCP`);
    paths.add(`${s} -> external:4222/TCP`);
  }
  paths.add('gateway -> external:4222/TCP');
  for (const port of [80, 443, 25, 465, 587]) paths.add(`notifier -> external:${port}/TCP`);
  // The invoice service's chain watchers: their database, NATS, their node, and Prometheus.
  for (const chain of WATCHED_CHAINS) {
    const watcher = `invoice-watcher-${chain}`;
    paths.add(`${watcher} -> external:5432/TCP`);
    paths.add(`${watcher} -> external:4222/TCP`);
    paths.add(`prometheus -> ${watcher}:http-admin`);
  }
  // Every EVM network's JSON-RPC node (HTTPS, or a node of one's own on 8545); Esplora (HTTPS, or
  // electrs on 3000) and the Tron full node (HTTPS, or java-tron on 8090).
  for (const chain of WATCHED_CHAINS) {
    for (const port of isEvmChain(chain) ? [443, 8545] : [443, 3000, 8090]) paths.add(`invoice-watcher-${chain} -> external:${port}/TCP`);
  }
  // The payout service checks operators' Completes against the same nodes (every chain).
  for (const port of [443, 8545, 3000, 8090]) paths.add(`payout -> external:${port}/TCP`);
  // The treasury (docs/treasury.md): each network's processor calls the signer and the invoice
  // service (its sweep intake), and reaches Postgres, NATS (its outbox) and its node; the signer is
  // called by the processors alone and reaches nothing but Postgres.
  paths.add('payout-signer -> external:5432/TCP');
  paths.add('prometheus -> payout-signer:http-admin');
  for (const network of PROCESSED_NETWORKS) {
    const processor = `payout-processor-${network}`;
    paths.add(`${processor} -> payout-signer:grpc`);
    paths.add(`${processor} -> invoice:grpc`);
    paths.add(`${processor} -> external:5432/TCP`);
    paths.add(`${processor} -> external:4222/TCP`);
    paths.add(`prometheus -> ${processor}:http-admin`);
    for (const port of PROCESSOR_NODE_PORTS[network]) paths.add(`${processor} -> external:${port}/TCP`);
  }
  for (const w of workloadsOf(ctx.objects)) {
    paths.add(`${w.id} -> dns:53/UDP`);
    paths.add(`${w.id} -> dns:53/TCP`);
    if (w.kind === 'Job') paths.add(`${w.id} -> external:5432/TCP`);
  }
  return paths;
}

interface Policy {
  name: string;
  podSelector: LabelSelector;
  ingress: boolean;
  egress: boolean;
  ingressRules: { peers: INetworkPolicyPeer[] | undefined; ports: INetworkPolicyPort[] | undefined }[];
  egressRules: { peers: INetworkPolicyPeer[] | undefined; ports: INetworkPolicyPort[] | undefined }[];
}

function policiesOf(objects: K8sObject[]): Policy[] {
  return ofKind<INetworkPolicy>(objects, 'NetworkPolicy').map((p) => {
    const spec = p.spec ?? { podSelector: {} };
    const types = spec.policyTypes ?? ['Ingress', ...(spec.egress ? ['Egress'] : [])];
    return {
      name: p.metadata.name,
      podSelector: spec.podSelector,
      ingress: types.includes('Ingress'),
      egress: types.includes('Egress'),
      ingressRules: (spec.ingress ?? []).map((r) => ({ peers: r.from, ports: r.ports })),
      egressRules: (spec.egress ?? []).map((r) => ({ peers: r.to, ports: r.ports })),
    };
  });
}

function namespaceOf(ctx: DeployContext): string {
  return ctx.objects.find((o) => o.metadata.namespace)?.metadata.namespace ?? 'default';
}

function namespaceLabels(ctx: DeployContext, name: string): Record<string, string> {
  const ns = ofKind<INamespace>(ctx.objects, 'Namespace').find((n) => n.metadata.name === name);
  return { ...(ns?.metadata?.labels ?? {}), 'kubernetes.io/metadata.name': name };
}

interface PodPort {
  name: string | undefined;
  number: number;
  protocol: string;
}

function podPorts(w: Workload): PodPort[] {
  return w.pod.containers.flatMap((c) => (c.ports ?? []).map((p) => ({ name: p.name, number: p.containerPort, protocol: p.protocol ?? 'TCP' })));
}

function portMatches(specs: INetworkPolicyPort[] | undefined, port: PodPort): boolean {
  if (!specs || specs.length === 0) return true;
  return specs.some((s) => {
    if ((s.protocol ?? 'TCP') !== port.protocol) return false;
    if (s.port === undefined) return true;
    if (typeof s.port === 'string') return s.port === port.name;
    return s.endPort !== undefined ? port.number >= s.port && port.number <= s.endPort : port.number === s.port;
  });
}

function peerMatchesPod(peer: INetworkPolicyPeer, pod: Workload, ownNamespaceLabels: Record<string, string>): boolean {
  if (peer.ipBlock) return false; // pod addresses are not modelled as CIDRs
  const nsOk = peer.namespaceSelector ? selectorMatches(peer.namespaceSelector, ownNamespaceLabels) : true;
  const podOk = peer.podSelector ? selectorMatches(peer.podSelector, pod.labels) : true;
  return nsOk && podOk;
}

function peersMatchPod(peers: INetworkPolicyPeer[] | undefined, pod: Workload, nsLabels: Record<string, string>): boolean {
  return !peers || peers.length === 0 || peers.some((p) => peerMatchesPod(p, pod, nsLabels));
}

/** What a peer outside this namespace's pods is, for path names; undefined for our own pods only. */
function describeExternalPeer(peer: INetworkPolicyPeer | undefined, namespace: string, direction: 'ingress' | 'egress'): string | undefined {
  if (!peer) return direction === 'ingress' ? 'anywhere' : 'external';
  if (peer.ipBlock) {
    if (direction === 'egress') return 'external';
    return peer.ipBlock.cidr === '0.0.0.0/0' || peer.ipBlock.cidr === '::/0' ? 'anywhere' : `cidr(${peer.ipBlock.cidr})`;
  }
  if (!peer.namespaceSelector) return undefined;
  const nsLabels = peer.namespaceSelector.matchLabels ?? {};
  const onlyNamespace = Object.keys(nsLabels).length === 1 && !peer.namespaceSelector.matchExpressions?.length ? nsLabels['kubernetes.io/metadata.name'] : undefined;
  if (onlyNamespace === namespace) return undefined;
  const podLabels = peer.podSelector?.matchLabels ?? {};
  if (onlyNamespace === 'kube-system' && podLabels['k8s-app'] === 'kube-dns' && direction === 'egress') return 'dns';
  if (direction === 'ingress' && onlyNamespace !== undefined && podLabels['app.kubernetes.io/name'] === 'prometheus') return 'prometheus';
  return direction === 'egress' ? 'external' : `namespaces(${JSON.stringify(peer.namespaceSelector)})`;
}

function describePorts(specs: INetworkPolicyPort[] | undefined): string[] {
  if (!specs || specs.length === 0) return ['any'];
  return specs.map((s) => `${s.port ?? 'any'}${s.endPort !== undefined ? `-${s.endPort}` : ''}/${s.protocol ?? 'TCP'}`);
}

/** Every path the NetworkPolicies allow, named as in expectedPaths. Also reports rules that match no port. */
export function allowedPaths(ctx: DeployContext, problems: string[] = []): Set<string> {
  const paths = new Set<string>();
  const namespace = namespaceOf(ctx);
  const nsLabels = namespaceLabels(ctx, namespace);
  const policies = policiesOf(ctx.objects);
  const workloads = workloadsOf(ctx.objects);
  const selecting = (w: Workload, direction: 'ingress' | 'egress') =>
    policies.filter((p) => p[direction] && selectorMatches(p.podSelector, w.labels));

  // Pod to pod: the source's egress and the destination's ingress must both allow it.
  for (const src of workloads) {
    const egressPolicies = selecting(src, 'egress');
    for (const dst of workloads) {
      const ingressPolicies = selecting(dst, 'ingress');
      for (const port of podPorts(dst)) {
        const out =
          egressPolicies.length === 0 ||
          egressPolicies.some((p) => p.egressRules.some((r) => peersMatchPod(r.peers, dst, nsLabels) && portMatches(r.ports, port)));
        const inn =
          ingressPolicies.length === 0 ||
          ingressPolicies.some((p) => p.ingressRules.some((r) => peersMatchPod(r.peers, src, nsLabels) && portMatches(r.ports, port)));
        if (out && inn) paths.add(`${src.id} -> ${dst.id}:${port.name ?? port.number}`);
      }
    }
  }

  // Egress beyond this namespace's pods.
  for (const src of workloads) {
    const egressPolicies = selecting(src, 'egress');
    if (egressPolicies.length === 0) paths.add(`${src.id} -> external:any`);
    for (const p of egressPolicies) {
      for (const rule of p.egressRules) {
        const peers = rule.peers && rule.peers.length > 0 ? rule.peers : [undefined];
        for (const peer of peers) {
          const target = describeExternalPeer(peer, namespace, 'egress');
          if (target) for (const port of describePorts(rule.ports)) paths.add(`${src.id} -> ${target}:${port}`);
        }
      }
    }
  }

  // Ingress from beyond this namespace's pods.
  for (const dst of workloads) {
    const ports = podPorts(dst);
    const ingressPolicies = selecting(dst, 'ingress');
    if (ingressPolicies.length === 0) for (const port of ports) paths.add(`anywhere -> ${dst.id}:${port.name ?? port.number}`);
    for (const p of ingressPolicies) {
      for (const rule of p.ingressRules) {
        const peers = rule.peers && rule.peers.length > 0 ? rule.peers : [undefined];
        for (const peer of peers) {
          const source = describeExternalPeer(peer, namespace, 'ingress');
          if (!source) continue;
          for (const port of ports) if (portMatches(rule.ports, port)) paths.add(`${source} -> ${dst.id}:${port.name ?? port.number}`);
        }
      }
    }
  }

  // A rule towards our own pods whose port no selected pod exposes is a path that silently broke.
  for (const p of policies) {
    const targets = workloads.filter((w) => selectorMatches(p.podSelector, w.labels));
    for (const rule of p.ingressRules) {
      for (const spec of rule.ports ?? []) {
        if (!targets.some((w) => podPorts(w).some((port) => portMatches([spec], port)))) {
          problems.push(`NetworkPolicy ${p.name}: ingress port ${spec.port} is exposed by none of the pods it selects`);
        }
      }
    }
    for (const rule of p.egressRules) {
      const peerPods = (rule.peers ?? []).filter((peer) => peer.podSelector && !peer.namespaceSelector && !peer.ipBlock);
      if (peerPods.length === 0) continue;
      const dsts = workloads.filter((w) => peerPods.some((peer) => peerMatchesPod(peer, w, nsLabels)));
      for (const spec of rule.ports ?? []) {
        if (!dsts.some((w) => podPorts(w).some((port) => portMatches([spec], port)))) {
          problems.push(`NetworkPolicy ${p.name}: egress port ${spec.port} is exposed by none of the pods it allows`);
        }
      }
    }
  }
  return paths;
}

const PRIVATE_V4 = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', '169.254.0.0/16', '127.0.0.0/8'];

export function checkNetworkPolicies(ctx: DeployContext): string[] {
  const problems: string[] = [];
  const policies = policiesOf(ctx.objects);
  const defaultDeny = policies.find(
    (p) => p.ingress && p.egress && Object.keys(p.podSelector.matchLabels ?? {}).length === 0 && !(p.podSelector.matchExpressions ?? []).length && p.ingressRules.length === 0 && p.egressRules.length === 0,
  );
  if (!defaultDeny) problems.push('no default-deny NetworkPolicy (podSelector {}, Ingress and Egress, no rules)');

  const allowed = allowedPaths(ctx, problems);
  const expected = expectedPaths(ctx);
  for (const p of [...allowed].sort()) if (!expected.has(p)) problems.push(`unexpected path allowed: ${p}`);
  for (const p of [...expected].sort()) if (!allowed.has(p)) problems.push(`missing path: ${p}`);

  // The calls the configuration makes must be among the allowed paths.
  for (const call of configuredCalls(ctx, problems)) {
    const p = `${call.from.id} -> ${call.to.id}:${call.port.name}`;
    if (!allowed.has(p)) problems.push(`${call.from.id} calls ${call.to.id} (${call.variable}) but the NetworkPolicies do not allow ${p}`);
  }

  // External destinations: Postgres and NATS are specific addresses, webhooks never private ones.
  for (const p of policies) {
    for (const rule of p.egressRules) {
      const ports = (rule.ports ?? []).map((s) => s.port);
      for (const peer of rule.peers ?? []) {
        const cidr = peer.ipBlock?.cidr;
        if (!cidr) continue;
        if ((ports.includes(5432) || ports.includes(4222)) && (cidr === '0.0.0.0/0' || cidr === '::/0')) {
          problems.push(`NetworkPolicy ${p.name}: Postgres/NATS egress open to ${cidr}`);
        }
        if (ctx.overlay === 'production' && (ports.includes(5432) || ports.includes(4222)) && cidr.startsWith('192.0.2.')) {
          problems.push(`NetworkPolicy ${p.name}: production still points at the base placeholder ${cidr}`);
        }
        if (ctx.overlay === 'production' && (ports.includes(80) || ports.includes(443)) && cidr === '0.0.0.0/0') {
          const except = peer.ipBlock?.except ?? [];
          const missing = PRIVATE_V4.filter((r) => !except.includes(r));
          if (missing.length > 0) problems.push(`NetworkPolicy ${p.name}: webhooks may reach private ranges ${missing.join(', ')}`);
        }
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------------------------
// 8. The image: deploy/Dockerfile and .dockerignore

export interface DockerInstruction {
  op: string;
  args: string;
}

export interface DockerStage {
  from: string;
  name: string | undefined;
  instructions: DockerInstruction[];
}

export interface ParsedDockerfile {
  stages: DockerStage[];
  finalUid: number | undefined;
}

export function parseDockerfile(text: string): ParsedDockerfile {
  const lines: string[] = [];
  let current = '';
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (current === '' && /^\s*#/.test(line)) continue;
    if (/^\s*#/.test(line)) continue; // a comment inside a continued instruction
    if (line.endsWith('\\')) {
      current += `${line.slice(0, -1)} `;
      continue;
    }
    current += line;
    if (current.trim() !== '') lines.push(current.trim());
    current = '';
  }
  if (current.trim() !== '') lines.push(current.trim());
  const stages: DockerStage[] = [];
  for (const line of lines) {
    const [, op = '', args = ''] = /^(\S+)\s*(.*)$/.exec(line) ?? [];
    const upper = op.toUpperCase();
    if (upper === 'FROM') {
      const words = args.split(/\s+/).filter((w) => !w.startsWith('--'));
      const as = words.findIndex((w) => w.toUpperCase() === 'AS');
      stages.push({ from: words[0] ?? '', name: as >= 0 ? words[as + 1] : undefined, instructions: [] });
    } else {
      stages.at(-1)?.instructions.push({ op: upper, args });
    }
  }
  const user = stages.at(-1)?.instructions.filter((i) => i.op === 'USER').at(-1)?.args.split(':')[0];
  return { stages, finalUid: user !== undefined && /^\d+$/.test(user) ? Number(user) : undefined };
}

/** The files the image needs from the build context: sources, manifests, assets, the entrypoint. */
export function buildContextFiles(): string[] {
  const files = ['package.json', 'package-lock.json', 'tsconfig.base.json', 'deploy/entrypoint.sh', 'deploy/shipped.mjs', 'deploy/local/package.json'];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(path.join(REPO_ROOT, dir), { withFileTypes: true })) {
      const rel = `${dir}/${entry.name}`;
      if (entry.isDirectory()) walk(rel);
      else files.push(rel);
    }
  };
  for (const pkg of [...SERVICES.map((s) => `services/${s}`), 'services/runtime', 'services/domain', 'services/chains', 'gateway']) {
    files.push(`${pkg}/package.json`, `${pkg}/tsconfig.json`);
    walk(`${pkg}/src`);
  }
  walk('gateway/assets');
  files.push('dashboard/package.json', 'dashboard/tsconfig.json', 'dashboard/index.html', 'dashboard/vite.config.ts', 'packages/client/src/openapi.ts');
  walk('dashboard/src');
  return files;
}

function globToRegExp(pattern: string): RegExp {
  let re = '';
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i] ?? '';
    if (ch === '*' && pattern[i + 1] === '*') {
      re += '.*';
      i++;
      if (pattern[i + 1] === '/') i++;
    } else if (ch === '*') re += '[^/]*';
    else if (ch === '?') re += '[^/]';
    else re += ch.replace(/[.+^${}()|[\]\\]/g, '\\$&');
  }
  return new RegExp(`^${re}(/.*)?$`);
}

/** Whether .dockerignore leaves `file` out of the build context (last matching pattern wins). */
export function dockerIgnores(patterns: string[], file: string): boolean {
  let ignored = false;
  for (const raw of patterns) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    const negate = line.startsWith('!');
    const pattern = path.posix.normalize((negate ? line.slice(1) : line).replace(/^\//, ''));
    if (globToRegExp(pattern).test(file)) ignored = !negate;
  }
  return ignored;
}

/** The folders deploy/shipped.mjs ships files from (its own rule: the shipped workspaces' dist, src, assets). */
export function shippedRoots(): string[] {
  return execFileSync(process.execPath, [path.join(REPO_ROOT, 'deploy/shipped.mjs'), 'roots'], { cwd: REPO_ROOT, encoding: 'utf8' }).split('\n').filter(Boolean);
}

export function checkImage(dockerfile: string, dockerignore: string): string[] {
  const problems: string[] = [];
  const { stages, finalUid } = parseDockerfile(dockerfile);
  if (stages.length < 2) problems.push('Dockerfile: expected a multi-stage build');
  for (const stage of stages) {
    if (!/^node:24-slim(@sha256:[0-9a-f]{64})?$/.test(stage.from)) problems.push(`Dockerfile: stage ${stage.name ?? '?'} is FROM ${stage.from}, not node:24-slim`);
  }
  const final = stages.at(-1);
  if (!final) return problems;
  const user = final.instructions.filter((i) => i.op === 'USER').at(-1)?.args;
  if (!user) problems.push('Dockerfile: the final stage sets no USER (it would run as root)');
  else if (finalUid === undefined) problems.push(`Dockerfile: USER ${user} is not numeric (runAsNonRoot can only verify a numeric user)`);
  else if (finalUid === 0) problems.push('Dockerfile: USER is root');
  if (!final.instructions.some((i) => i.op === 'ENV' && /\bNODE_ENV=production\b/.test(i.args))) problems.push('Dockerfile: the final stage does not set NODE_ENV=production');
  // The image's processes run with the launcher's Node flags (idle memory is measured with them).
  const expected = SERVICE_NODE_FLAGS.join(' ');
  const found = final.instructions.filter((i) => i.op === 'ENV').map((i) => /\bNODE_OPTIONS=(?:"([^"]*)"|(\S+))/.exec(i.args)).find((m) => m);
  const value = found ? (found[1] ?? found[2]) : undefined;
  if (value !== expected) problems.push(`Dockerfile: the final stage's NODE_OPTIONS is ${value ?? 'unset'}, not the launcher's flags "${expected}"`);
  // And with the launcher's process environment (the allocator's setting).
  for (const [name, wanted] of Object.entries(SERVICE_PROCESS_ENV)) {
    const set = final.instructions.filter((i) => i.op === 'ENV').map((i) => new RegExp(`\\b${name}=(\\S+)`).exec(i.args)?.[1]).filter((v) => v !== undefined).at(-1);
    if (set !== wanted) problems.push(`Dockerfile: the final stage's ${name} is ${set ?? 'unset'}, not the launcher's ${wanted}`);
  }

  const installs = (stage: DockerStage) =>
    stage.instructions.filter((i) => i.op === 'RUN' && /(^|[\s;&|(])(npm\s+(ci|install|i|add)|yarn(\s+(install|add))?|pnpm\s+(install|i|add))(\s|$)/.test(i.args));
  for (const run of installs(final)) {
    if (!/--omit[= ]dev|--production\b/.test(run.args)) problems.push(`Dockerfile: the final stage installs development dependencies: RUN ${run.args}`);
  }
  // node_modules copied from another stage must come from a production-only install.
  const workdirOf = (stage: DockerStage) => stage.instructions.filter((i) => i.op === 'WORKDIR').at(-1)?.args ?? '/';
  for (const copy of final.instructions.filter((i) => i.op === 'COPY' && /--from=/.test(i.args))) {
    const from = /--from=(\S+)/.exec(copy.args)?.[1];
    const source = copy.args.split(/\s+/).filter((w) => !w.startsWith('--'))[0] ?? '';
    const stage = stages.find((s) => s.name === from);
    if (!stage) continue;
    const carriesModules = source.includes('node_modules') || path.posix.normalize(source) === path.posix.normalize(workdirOf(stage));
    if (carriesModules) {
      const runs = installs(stage);
      if (runs.length === 0) problems.push(`Dockerfile: COPY --from=${from} ${source} carries no npm install`);
      for (const run of runs) {
        if (!/--omit[= ]dev|--production\b/.test(run.args)) problems.push(`Dockerfile: stage ${from} installs development dependencies into the image: RUN ${run.args}`);
      }
    }
  }
  // What the final image must hold for every process: compiled code, migrations, assets, entrypoint.
  // A COPY names it, or brings the tree deploy/shipped.mjs assembled (`copy <dir>` in that stage):
  // then what that script ships from (its `roots`) must cover it. test/image proves the built image.
  const workdir = workdirOf(final);
  const destinations: string[] = [];
  const shippedFrom: string[] = [];
  for (const copy of final.instructions.filter((i) => i.op === 'COPY')) {
    const words = copy.args.split(/\s+/).filter((w) => !w.startsWith('--'));
    const destination = path.posix.resolve(workdir, words.at(-1) ?? '');
    const from = /--from=(\S+)/.exec(copy.args)?.[1];
    const stage = stages.find((s) => s.name === from);
    const shipped = stage?.instructions.some((i) => i.op === 'RUN' && new RegExp(`deploy/shipped\\.mjs copy ${words[0]}(\\s|$)`).test(i.args));
    if (shipped) shippedFrom.push(...shippedRoots().map((root) => path.posix.resolve(destination, root)));
    else destinations.push(destination);
  }
  const copied = (needed: string) => destinations.includes(needed) || shippedFrom.some((root) => needed === root || needed.startsWith(`${root}/`));
  const needed = [
    'services/runtime/dist',
    'services/domain/dist',
    'services/chains/dist',
    ...SERVICES.flatMap((s) => [`services/${s}/dist`, `services/${s}/src/store/migrations`]),
    'gateway/dist',
    'gateway/assets',
    'dashboard/dist',
    'deploy/entrypoint.sh',
  ];
  for (const rel of needed) {
    if (!copied(path.posix.resolve(workdir, rel))) problems.push(`Dockerfile: the final stage does not copy ${rel}`);
  }
  const entrypoint = final.instructions.filter((i) => i.op === 'ENTRYPOINT').at(-1)?.args;
  if (!entrypoint || !entrypoint.includes(path.posix.resolve(workdir, 'deploy/entrypoint.sh'))) {
    problems.push(`Dockerfile: ENTRYPOINT is ${entrypoint ?? 'unset'}, not ${path.posix.resolve(workdir, 'deploy/entrypoint.sh')}`);
  }
  // The `node` npm package (Node for npm scripts in development) must stay a devDependency.
  const root = JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { dependencies?: Record<string, string> };
  if (root.dependencies?.node) problems.push('package.json: `node` is a production dependency and would reach the image');

  const patterns = dockerignore.split('\n');
  for (const file of buildContextFiles()) {
    if (dockerIgnores(patterns, file)) problems.push(`.dockerignore leaves ${file} out of the build context`);
  }
  for (const file of ['node_modules/x/index.js', 'services/auth/dist/main.js', 'services/auth/node_modules/x.js', '.git/HEAD', '.data/x']) {
    if (!dockerIgnores(patterns, file)) problems.push(`.dockerignore sends ${file} to the build context`);
  }
  for (const process of PROCESSES) {
    const main = process === 'gateway' ? 'gateway/src/main.ts' : `services/${process}/src/main.ts`;
    if (!existsSync(path.join(REPO_ROOT, main))) problems.push(`${main} does not exist: the entrypoint starts its compiled form`);
  }
  return problems;
}

/** Every check of one rendered overlay. */
export function allProblems(ctx: DeployContext): string[] {
  return [
    ...checkSchemas(ctx),
    ...checkEnvironment(ctx),
    ...checkSignerSeed(ctx),
    ...checkFileSettings(ctx),
    ...checkOverlayEnvironment(ctx),
    ...checkSecretList(ctx),
    ...checkPortsAndProbes(ctx),
    ...checkServices(ctx),
    ...checkSecurity(ctx),
    ...checkResourcesAndScaling(ctx),
    ...checkWatchers(ctx),
    ...checkNetworkPolicies(ctx),
  ];
}
