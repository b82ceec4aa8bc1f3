/**
 * The Kubernetes manifests and the image, checked without a cluster or a Docker engine: both
 * kustomize overlays are rendered with `kubectl kustomize`, every object is validated against the
 * Kubernetes schemas (kubernetes-models), and test/deploy/checks.ts checks what the schemas
 * cannot: every variable a process requires is provided, probes and Services point at exposed
 * ports, the NetworkPolicies allow exactly the architecture's paths, pods run locked down, and
 * every Deployment has requests, limits, an autoscaler and a disruption budget.
 *
 * Each check is also run on copies broken on purpose (a probe port, an environment variable, a
 * NetworkPolicy path…) and must name the breakage, so a check that quietly passes everything
 * would fail here.
 */
import { SIGNER_XPUB_VARIABLES } from '../../services/payout/src/signer/settings';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { IDeployment } from 'kubernetes-models/apps/v1/Deployment';
import type { IHorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import type { INetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import type { IConfigMap } from 'kubernetes-models/v1/ConfigMap';
import type { IContainer } from 'kubernetes-models/v1/Container';
import type { ISecret } from 'kubernetes-models/v1/Secret';
import { EthereumSigningKeys } from '@coinvoice/chains/evm/signing-keys';
import { requireMatchingXpubs } from '../../services/payout/src/signer/role';
import {
  allowedPaths,
  checkEnvironment,
  checkFileSettings,
  checkImage,
  checkNetworkPolicies,
  checkOverlayEnvironment,
  checkPortsAndProbes,
  checkResourcesAndScaling,
  checkSchemas,
  checkSecretList,
  checkSecurity,
  checkServices,
  checkSignerSeed,
  checkWatchers,
  cloneContext,
  decodeSecret,
  expectedPaths,
  findObject,
  loadContext,
  OVERLAYS,
  parseDockerfile,
  readDockerfile,
  REPO_ROOT,
  roleOf,
  WATCHED_CHAINS,
  workloadsOf,
  type DeployContext,
  type OverlayName,
} from './checks';

const contexts = {} as Record<OverlayName, DeployContext>;

beforeAll(() => {
  for (const overlay of OVERLAYS) contexts[overlay] = loadContext(overlay);
});

function container(ctx: DeployContext, kind: 'Deployment' | 'Job', name: string): IContainer {
  const obj = findObject<IDeployment>(ctx.objects, kind, name);
  const c = obj.spec?.template.spec?.containers[0];
  if (!c) throw new Error(`${kind} ${name} has no container`);
  return c;
}

/** A broken copy of the overlay's render: `mutate` changes it, the original stays intact. */
function broken(overlay: OverlayName, mutate: (ctx: DeployContext) => void): DeployContext {
  const ctx = cloneContext(contexts[overlay]);
  mutate(ctx);
  return ctx;
}

describe.each(OVERLAYS)('the %s overlay', (overlay) => {
  const ctx = () => contexts[overlay];

  test('renders the Deployments (the invoice service serving, and watching each chain of the registry; the payout service serving, signing and processing ethereum, bitcoin and litecoin), their Services, autoscalers, budgets and the migration Jobs', () => {
    const names = (kind: string) => ctx().objects.filter((o) => o.kind === kind).map((o) => o.metadata.name).sort();
    // One watcher per chain of the registry (services/chains/src/watchers.ts): nine today.
    expect(WATCHED_CHAINS).toEqual(expect.arrayContaining(['ethereum', 'base', 'arbitrum', 'optimism', 'polygon', 'bsc', 'bitcoin', 'litecoin', 'tron']));
    const watchers = WATCHED_CHAINS.map((chain) => `invoice-watcher-${chain}`);
    const processes = ['auth', 'gateway', 'invoice', ...watchers, 'notifier', 'payout', 'payout-processor-ethereum', 'payout-processor-bitcoin', 'payout-processor-litecoin', 'payout-processor-tron', 'payout-signer'].sort();
    // No placeholder of the chain-watcher component, and not its local values ConfigMap, reaches the cluster.
    expect(names('ConfigMap')).not.toContain('chain-watcher');
    expect(JSON.stringify(ctx().objects)).not.toMatch(/CHAIN_SOURCE_VARIABLE|watcher-CHAIN|"API"/);
    expect(names('Deployment')).toEqual(processes);
    expect(names('Service')).toEqual(processes);
    expect(names('HorizontalPodAutoscaler')).toEqual(processes);
    expect(names('PodDisruptionBudget')).toEqual(processes);
    expect(names('Job')).toEqual(['migrate-auth', 'migrate-invoice', 'migrate-notifier', 'migrate-payout', 'migrate-payout-signer']);
    expect(new Set(ctx().objects.map((o) => o.metadata.namespace ?? '(cluster)'))).toEqual(
      new Set([overlay === 'production' ? 'coinvoice' : 'coinvoice-dev', '(cluster)']),
    );
  });

  test('every object validates against the Kubernetes schemas', () => {
    expect(checkSchemas(ctx())).toEqual([]);
  });

  test('every variable each process requires is provided, every given value parses, none is unknown', () => {
    expect(checkEnvironment(ctx())).toEqual([]);
    expect(checkSignerSeed(ctx())).toEqual([]);
    expect(checkFileSettings(ctx())).toEqual([]);
    expect(checkOverlayEnvironment(ctx())).toEqual([]);
    expect(checkSecretList(ctx())).toEqual([]);
  });

  test('every probe points at a port the container exposes, where the process listens', () => {
    expect(checkPortsAndProbes(ctx())).toEqual([]);
  });

  test('every Deployment has a Service selecting exactly its pods, with named ports', () => {
    expect(checkServices(ctx())).toEqual([]);
  });

  test('every pod runs non-root with a read-only root filesystem, no capabilities and RuntimeDefault seccomp', () => {
    expect(checkSecurity(ctx())).toEqual([]);
  });

  test('one watcher Deployment per chain of the registry, each with its chain, its node variable from its own Secret, and its labels', () => {
    expect(checkWatchers(ctx())).toEqual([]);
  });

  test('a watcher missing, watching the wrong chain, reading another chain\'s node, or without its heap cap is named', () => {
    const dropped = broken(overlay, (c) => {
      c.objects = c.objects.filter((o) => !(o.kind === 'Deployment' && o.metadata.name === 'invoice-watcher-optimism'));
    });
    expect(checkWatchers(dropped)).toEqual(['0 Deployments watch optimism (expected exactly one, invoice-watcher-optimism)']);
    const swapped = broken(overlay, (c) => {
      const args = findObject<IDeployment>(c.objects, 'Deployment', 'invoice-watcher-base').spec!.template.spec!.containers[0]!.args!;
      args[2] = 'polygon';
    });
    expect(checkWatchers(swapped)).toEqual([
      'Deployment invoice-watcher-base: watches polygon but is not named invoice-watcher-polygon',
      '0 Deployments watch base (expected exactly one, invoice-watcher-base)',
      '2 Deployments watch polygon (expected exactly one, invoice-watcher-polygon)',
    ]);
    const crossed = broken(overlay, (c) => {
      const env = findObject<IDeployment>(c.objects, 'Deployment', 'invoice-watcher-bsc').spec!.template.spec!.containers[0]!.env!;
      const source = env.find((e) => e.name === 'CHAIN_BSC_RPC_URL')!;
      source.valueFrom!.secretKeyRef!.name = 'invoice-watcher-ethereum-secrets';
      findObject<IDeployment>(c.objects, 'Deployment', 'invoice-watcher-bsc').spec!.template.metadata!.labels!['coinvoice.io/chain-api'] = 'esplora';
      const tron = findObject<IDeployment>(c.objects, 'Deployment', 'invoice-watcher-tron').spec!.template.spec!.containers[0]!;
      tron.env = tron.env!.filter((e) => e.name !== 'NODE_OPTIONS');
    });
    expect(checkWatchers(crossed)).toEqual([
      'Deployment invoice-watcher-bsc: pods labelled chain-api esplora, not json-rpc',
      'Deployment invoice-watcher-bsc: CHAIN_BSC_RPC_URL comes from Secret invoice-watcher-ethereum-secrets key CHAIN_BSC_RPC_URL, not Secret invoice-watcher-bsc-secrets key CHAIN_BSC_RPC_URL',
      'Deployment invoice-watcher-tron: NODE_OPTIONS is unset, not the launcher\'s watcher flags "--max-semi-space-size=4 --max-old-space-size=192"',
    ]);
  });

  test('every container has requests and limits; every Deployment an autoscaler and a disruption budget', () => {
    expect(checkResourcesAndScaling(ctx())).toEqual([]);
  });

  test("the payout service is given every chain node its Complete check reads (from a Secret, each optional) and may reach them", () => {
    const env = container(ctx(), 'Deployment', 'payout').env ?? [];
    for (const name of ['CHAIN_ETHEREUM_RPC_URL', 'CHAIN_BITCOIN_ESPLORA_URL', 'CHAIN_LITECOIN_ESPLORA_URL', 'CHAIN_TRON_API_URL']) {
      expect(env.find((e) => e.name === name)?.valueFrom?.secretKeyRef).toEqual({ name: 'payout-chain-sources', key: name, optional: true });
    }
    const paths = allowedPaths(ctx(), []);
    for (const port of [443, 8545, 3000, 8090]) expect(paths.has(`payout -> external:${port}/TCP`)).toBe(true);
  });

  test('the NetworkPolicies allow exactly the paths of the architecture', () => {
    const problems: string[] = [];
    expect([...allowedPaths(ctx(), problems)].sort()).toEqual([...expectedPaths(ctx())].sort());
    expect(problems).toEqual([]);
    expect(checkNetworkPolicies(ctx())).toEqual([]);
  });
});

describe('the development treasury', () => {
  const overlayDir = path.join(REPO_ROOT, 'deploy/k8s/overlays/development');

  test("the development mnemonic is the account of the development xpubs, and no well-known test mnemonic", () => {
    const seedFile = path.join(overlayDir, 'signer-seed/mnemonic');
    const keys = EthereumSigningKeys.fromSeedFile(seedFile);
    const xpubs = findObject<ISecret>(contexts.development.objects, 'Secret', 'invoice-xpubs');
    const data = decodeSecret(xpubs);
    const config = Object.fromEntries(SIGNER_XPUB_VARIABLES.map((name) => [name, data[name]]));
    expect(Object.values(config).every((xpub) => xpub?.startsWith('xpub'))).toBe(true);
    // What the signer checks at start (docs/treasury.md#keys): it would refuse another seed.
    expect(() => requireMatchingXpubs(config as never, keys)).not.toThrow();
    const words = readFileSync(seedFile, 'utf8').trim();
    for (const wellKnown of ['test test test test test test test test test test test junk', 'abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about']) {
      expect(words).not.toBe(wellKnown);
    }
    // The same mnemonic as the Secret the signer mounts.
    expect(decodeSecret(findObject<ISecret>(contexts.development.objects, 'Secret', 'payout-signer-seed')).mnemonic?.trim()).toBe(words);
  });
});

describe('the image', () => {
  const dockerignore = () => readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8');

  test('deploy/Dockerfile: node:24-slim stages, non-root, production dependencies only, everything each process reads', () => {
    expect(checkImage(readDockerfile(), dockerignore())).toEqual([]);
    expect(parseDockerfile(readDockerfile()).finalUid).toBe(10001);
  });

  test("the image's processes get the launcher's Node flags and allocator setting (idle memory is measured with them)", () => {
    const dockerfile = readDockerfile();
    expect(checkImage(dockerfile.replace(/ NODE_OPTIONS=\S+/, ''), dockerignore())).toEqual([
      `Dockerfile: the final stage's NODE_OPTIONS is unset, not the launcher's flags "--max-semi-space-size=4"`,
    ]);
    expect(checkImage(dockerfile.replace(/NODE_OPTIONS=\S+/, 'NODE_OPTIONS=--max-semi-space-size=16'), dockerignore())).toEqual([
      `Dockerfile: the final stage's NODE_OPTIONS is --max-semi-space-size=16, not the launcher's flags "--max-semi-space-size=4"`,
    ]);
    expect(checkImage(dockerfile.replace(/ MALLOC_MMAP_THRESHOLD_=\S+/, ''), dockerignore())).toEqual([
      `Dockerfile: the final stage's MALLOC_MMAP_THRESHOLD_ is unset, not the launcher's 131072`,
    ]);
  });

  test('the entrypoint starts the process each manifest asks for', () => {
    // A stand-in `node` that prints what it was asked to run: the dispatch is checked, not Node.
    const bin = mkdtempSync(path.join(tmpdir(), 'coinvoice-entrypoint-'));
    try {
      writeFileSync(path.join(bin, 'node'), '#!/bin/sh\necho "$@"\n');
      chmodSync(path.join(bin, 'node'), 0o755);
      const run = (args: string[]) =>
        execFileSync('sh', [path.join(REPO_ROOT, 'deploy/entrypoint.sh'), ...args], {
          encoding: 'utf8',
          env: { PATH: `${bin}:/usr/bin:/bin` },
        }).trim();
      const roles = new Set<string>();
      for (const overlay of OVERLAYS) {
        for (const w of workloadsOf(contexts[overlay].objects)) {
          for (const c of w.pod.containers) roles.add(JSON.stringify(c.args ?? []));
        }
      }
      // 5 serve, 4 migrate, invoice watch <chain> for each chain of the registry, payout sign,
      // payout sign migrate, payout process ethereum|bitcoin|litecoin|tron
      expect(roles.size).toBe(5 + 4 + WATCHED_CHAINS.length + 6);
      for (const chain of WATCHED_CHAINS) expect(roles.has(JSON.stringify(['invoice', 'watch', chain]))).toBe(true);
      for (const treasury of [['payout', 'sign'], ['payout', 'sign', 'migrate'], ['payout', 'process', 'ethereum'], ['payout', 'process', 'bitcoin'], ['payout', 'process', 'litecoin'], ['payout', 'process', 'tron']]) expect(roles.has(JSON.stringify(treasury))).toBe(true);
      for (const role of roles) {
        const args = JSON.parse(role) as string[];
        const [process = '', ...rest] = args;
        const main = process === 'gateway' ? 'gateway/dist/main.js' : `services/${process}/dist/main.js`;
        expect(run(args)).toBe([path.join(REPO_ROOT, main), ...rest].join(' '));
      }
      expect(() => run(['invoice', 'watch'])).toThrow();
      // The treasury roles (docs/treasury.md): one network per processor, nothing after `sign migrate`.
      const payout = path.join(REPO_ROOT, 'services/payout/dist/main.js');
      expect(run(['payout', 'process', 'ethereum'])).toBe(`${payout} process ethereum`);
      expect(run(['payout', 'sign'])).toBe(`${payout} sign`);
      expect(run(['payout', 'sign', 'migrate'])).toBe(`${payout} sign migrate`);
      expect(run(['payout', 'sign', 'xpub'])).toBe(`${payout} sign xpub`);
      expect(() => run(['payout', 'process'])).toThrow();
      expect(() => run(['payout', 'process', 'ethereum', 'tron'])).toThrow();
      expect(() => run(['payout', 'sign', 'now'])).toThrow();
      expect(() => run(['invoice', 'process', 'ethereum'])).toThrow();
      expect(() => run(['auth', 'watch', 'ethereum'])).toThrow();
      expect(run(['migrate']).split('\n')).toEqual(
        ['auth', 'invoice', 'payout', 'notifier'].map((s) => `${path.join(REPO_ROOT, `services/${s}/dist/main.js`)} migrate`),
      );
      expect(() => run(['billing'])).toThrow();
      expect(() => run(['auth', 'seed'])).toThrow();
      // The auth service's admin commands (issue 12), with their arguments checked.
      const auth = path.join(REPO_ROOT, 'services/auth/dist/main.js');
      expect(run(['auth', 'grant-operator', 'ops@example.com'])).toBe(`${auth} grant-operator ops@example.com`);
      expect(run(['auth', 'revoke-operator', 'ops@example.com'])).toBe(`${auth} revoke-operator ops@example.com`);
      expect(run(['auth', 'rotate-kek'])).toBe(`${auth} rotate-kek`);
      expect(() => run(['auth', 'grant-operator'])).toThrow();
      expect(() => run(['auth', 'rotate-kek', 'now'])).toThrow();
      expect(() => run(['payout', 'grant-operator', 'ops@example.com'])).toThrow();
    } finally {
      rmSync(bin, { recursive: true, force: true });
    }
  });
});

describe('the checks catch what they claim to', () => {
  test('a probe moved to a port the container does not expose', () => {
    const ctx = broken('production', (c) => {
      const probe = container(c, 'Deployment', 'auth').readinessProbe;
      if (probe?.grpc) probe.grpc.port = 50099;
    });
    expect(checkPortsAndProbes(ctx)).toEqual([
      'Deployment auth container auth readinessProbe: grpc port 50099 is not a port the container exposes',
    ]);
  });

  test('a probe on the admin port instead of the gRPC port', () => {
    const ctx = broken('production', (c) => {
      const probe = container(c, 'Deployment', 'payout').livenessProbe;
      if (probe?.grpc) probe.grpc.port = 9053;
    });
    expect(checkPortsAndProbes(ctx)).toEqual([
      "Deployment payout container payout livenessProbe: grpc port 9053 is the container's http-admin port, not grpc",
    ]);
  });

  test("a gateway probe naming a port that doesn't exist", () => {
    const ctx = broken('development', (c) => {
      const probe = container(c, 'Deployment', 'gateway').livenessProbe;
      if (probe?.httpGet) probe.httpGet.port = 'htttp';
    });
    expect(checkPortsAndProbes(ctx)).toEqual([
      'Deployment gateway container gateway livenessProbe: httpGet port htttp is not a port the container exposes',
    ]);
  });

  test('a container port that no longer matches where the process listens', () => {
    const ctx = broken('production', (c) => {
      const port = container(c, 'Deployment', 'invoice').ports?.find((p) => p.name === 'grpc');
      if (port) port.containerPort = 50061;
      const health = container(c, 'Deployment', 'invoice').ports?.find((p) => p.name === 'grpc-health');
      if (health) health.containerPort = 50062;
    });
    expect(checkPortsAndProbes(ctx)).toEqual(
      expect.arrayContaining([
        'Deployment invoice container invoice: the process listens on GRPC_PORT=50052 but container port grpc is 50061',
        // With mutual TLS the probes ask the plaintext health port (GRPC_HEALTH_PORT).
        'Deployment invoice container invoice: the process listens on GRPC_HEALTH_PORT=50060 but container port grpc-health is 50062',
        'Deployment invoice container invoice readinessProbe: grpc port 50060 is not a port the container exposes',
      ]),
    );
  });

  test('an environment variable removed from a container', () => {
    const ctx = broken('production', (c) => {
      const invoice = container(c, 'Deployment', 'invoice');
      invoice.env = (invoice.env ?? []).filter((e) => e.name !== 'DATABASE_URL');
    });
    expect(checkEnvironment(ctx)).toEqual([
      expect.stringMatching(/^Deployment invoice container invoice: DATABASE_URL is required in production by invoice \(.*\) but no env or envFrom provides it/),
    ]);
  });

  test('production: the invoice keys of every enabled coin are required (no empty xpub ships), and live rates are set', () => {
    const invoice = (c: DeployContext) => container(c, 'Deployment', 'invoice');
    const rendered = findObject<IConfigMap>(contexts.production.objects, 'ConfigMap', 'invoice-config').data ?? {};
    expect(rendered.RATES_SOURCE).toBe('live');
    expect(Object.keys(rendered).filter((k) => k.startsWith('INVOICE_XPUB_'))).toEqual([]);
    expect(invoice(contexts.production).envFrom).toContainEqual({ secretRef: { name: 'invoice-xpubs' } });

    const withoutKeys = (c: DeployContext) => {
      invoice(c).envFrom = (invoice(c).envFrom ?? []).filter((s) => s.secretRef?.name !== 'invoice-xpubs');
    };
    const problems = checkEnvironment(broken('production', withoutKeys));
    expect(problems).toHaveLength(12);
    expect(problems[0]).toMatch(/^Deployment invoice container invoice: INVOICE_XPUB_BTC is required in production by invoice \(a rule across settings/);
    // Only the enabled coins need keys; development needs none (development keys).
    const onlyBtc = broken('production', (c) => {
      withoutKeys(c);
      findObject<IConfigMap>(c.objects, 'ConfigMap', 'invoice-config').data!.INVOICE_COINS = 'BTC';
    });
    expect(checkEnvironment(onlyBtc)).toEqual([
      expect.stringMatching(/: INVOICE_XPUB_BTC is required in production/),
      expect.stringMatching(/: INVOICE_XPUB_BTC_TESTNET is required in production/),
    ]);
    expect(checkEnvironment(broken('development', withoutKeys))).toEqual([]);
  });

  test('a key removed from a ConfigMap', () => {
    const ctx = broken('production', (c) => {
      delete findObject<IConfigMap>(c.objects, 'ConfigMap', 'gateway-config').data?.AUTH_URL;
    });
    expect(checkEnvironment(ctx)).toEqual([expect.stringMatching(/^Deployment gateway container gateway: AUTH_URL is required in production by gateway/)]);
  });

  test('a required variable that development has a default for is still required in production', () => {
    const strip = (c: DeployContext) => {
      const notifier = container(c, 'Deployment', 'notifier');
      notifier.envFrom = (notifier.envFrom ?? []).filter((s) => s.configMapRef?.name !== 'notifier-config');
    };
    const production = checkEnvironment(broken('production', strip));
    expect(production).toContainEqual(expect.stringMatching(/^Deployment notifier container notifier: AUTH_URL is required in production/));
    expect(checkEnvironment(broken('development', strip))).toEqual([]);
  });

  test('production refuses a service without its event signing key file; every service mounts its key from a Secret and listens on 0.0.0.0', () => {
    const ctx = broken('production', (c) => {
      const data = findObject<IConfigMap>(c.objects, 'ConfigMap', 'payout-config').data ?? {};
      delete data.EVENT_SIGNING_KEY_FILE;
    });
    expect(checkEnvironment(ctx)).toEqual([expect.stringMatching(/^Deployment payout container payout: EVENT_SIGNING_KEY_FILE is required in production by payout/)]);
    for (const name of ['auth', 'invoice', 'payout', 'notifier', 'invoice-watcher-ethereum']) {
      const deployment = findObject<IDeployment>(contexts.production.objects, 'Deployment', name);
      const pod = deployment.spec!.template.spec!;
      const mount = pod.containers[0]!.volumeMounts?.find((m) => m.mountPath === '/etc/coinvoice/event-key');
      const secret = pod.volumes?.find((v) => v.name === mount?.name)?.secret?.secretName;
      expect({ name, secret }).toEqual({ name, secret: `${name.startsWith('invoice') ? 'invoice' : name}-event-key` });
    }
    for (const config of ['auth-config', 'invoice-config', 'payout-config', 'notifier-config', 'gateway-config']) {
      expect(findObject<IConfigMap>(contexts.production.objects, 'ConfigMap', config).data?.BIND_HOST).toBe('0.0.0.0');
    }
  });

  test('a Secret key the manifests use but deploy/k8s/secret-keys.yaml does not list', () => {
    const ctx = cloneContext(contexts.production);
    ctx.externalSecrets = { ...ctx.externalSecrets, 'notifier-secrets': ['DATABASE_URL', 'NATS_URL'] };
    expect(checkEnvironment(ctx)).toEqual([
      'Deployment notifier container notifier: SMTP_URL refers to Secret notifier-secrets key SMTP_URL, which is neither rendered nor listed in deploy/k8s/secret-keys.yaml',
      expect.stringMatching(/^Deployment notifier container notifier: SMTP_URL is required in production by notifier/),
    ]);
  });

  test('a value that the process would refuse, and a variable it does not read', () => {
    const ctx = broken('development', (c) => {
      const data = findObject<IConfigMap>(c.objects, 'ConfigMap', 'auth-config').data ?? {};
      data.SESSION_TTL_SECONDS = 'twelve hours';
      data.SESION_TTL_SECONDS = '3600';
    });
    expect(checkEnvironment(ctx)).toEqual([
      expect.stringMatching(/^Deployment auth container auth: SESSION_TTL_SECONDS="twelve hours" from ConfigMap auth-config is invalid for auth: expected a whole number/),
      'Deployment auth container auth: SESION_TTL_SECONDS (from ConfigMap auth-config) is not a setting of auth: a typo, or a setting that no longer exists',
    ]);
  });

  test('a migration Job without its database', () => {
    const ctx = broken('production', (c) => {
      const migrate = container(c, 'Job', 'migrate-payout');
      migrate.env = (migrate.env ?? []).filter((e) => e.name !== 'DATABASE_URL');
    });
    expect(checkEnvironment(ctx)).toEqual([
      expect.stringMatching(/^Job migrate-payout container migrate: DATABASE_URL is required in production by payout migrate/),
    ]);
    expect(checkSecretList(ctx)).toEqual([]);
  });

  test('a container that bypasses the image entrypoint', () => {
    const ctx = broken('production', (c) => {
      container(c, 'Deployment', 'payout').command = ['node', 'services/payout/dist/main.js'];
    });
    expect(checkEnvironment(ctx)).toEqual([
      'Deployment payout container payout: sets command: the image entrypoint (deploy/entrypoint.sh) must choose the process',
    ]);
  });

  test('a NetworkPolicy path added: notifier may call payout', () => {
    const ctx = broken('production', (c) => {
      const pods = (name: string) => ({ podSelector: { matchLabels: { 'app.kubernetes.io/name': name, 'app.kubernetes.io/component': 'server' } } });
      c.objects.push({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'notifier-to-payout', namespace: 'coinvoice' },
        spec: {
          podSelector: {},
          policyTypes: ['Ingress', 'Egress'],
          ingress: [{ from: [pods('notifier')], ports: [{ port: 50053 }] }],
          egress: [{ to: [pods('payout')], ports: [{ port: 50053 }] }],
        },
      });
    });
    expect(checkSchemas(ctx)).toEqual([]);
    expect(checkNetworkPolicies(ctx)).toEqual(['unexpected path allowed: notifier -> payout:grpc']);
  });

  test('a NetworkPolicy path added: the gateway may reach Postgres', () => {
    const ctx = broken('production', (c) => {
      const policy = findObject<INetworkPolicy>(c.objects, 'NetworkPolicy', 'postgres-egress');
      policy.spec?.podSelector.matchExpressions?.[0]?.values?.push('gateway');
    });
    expect(checkNetworkPolicies(ctx)).toEqual(['unexpected path allowed: gateway -> external:5432/TCP']);
  });

  test('a NetworkPolicy path removed: the notifier may no longer call auth', () => {
    const ctx = broken('development', (c) => {
      const policy = findObject<INetworkPolicy>(c.objects, 'NetworkPolicy', 'auth-ingress');
      const names = policy.spec?.ingress?.[0]?.from?.[0]?.podSelector?.matchExpressions?.[0];
      if (names) names.values = (names.values ?? []).filter((v) => v !== 'notifier');
    });
    expect(checkNetworkPolicies(ctx)).toEqual([
      'missing path: notifier -> auth:grpc',
      'notifier calls auth (AUTH_URL) but the NetworkPolicies do not allow notifier -> auth:grpc',
    ]);
  });

  test('the default deny removed, and a policy left pointing at an old port', () => {
    const ctx = broken('production', (c) => {
      c.objects = c.objects.filter((o) => !(o.kind === 'NetworkPolicy' && o.metadata.name === 'default-deny-all'));
      const policy = findObject<INetworkPolicy>(c.objects, 'NetworkPolicy', 'invoice-ingress');
      const port = policy.spec?.ingress?.[0]?.ports?.[0];
      if (port) port.port = 50062;
    });
    expect(checkNetworkPolicies(ctx)).toEqual([
      // No path opens: every server pod is still selected by some policy in both directions and
      // the Job pods listen nowhere. The explicit default-deny check is what notices.
      'no default-deny NetworkPolicy (podSelector {}, Ingress and Egress, no rules)',
      'NetworkPolicy invoice-ingress: ingress port 50062 is exposed by none of the pods it selects',
      'missing path: gateway -> invoice:grpc',
      'missing path: payout -> invoice:grpc',
      'missing path: payout-processor-bitcoin -> invoice:grpc',
      'missing path: payout-processor-ethereum -> invoice:grpc',
      'missing path: payout-processor-litecoin -> invoice:grpc',
      // The Tron processor has the path (the deposit intake's) without calling it yet (docs/treasury.md#tron).
      'missing path: payout-processor-tron -> invoice:grpc',
      'gateway calls invoice (INVOICE_URL) but the NetworkPolicies do not allow gateway -> invoice:grpc',
      'payout calls invoice (INVOICE_URL) but the NetworkPolicies do not allow payout -> invoice:grpc',
      'payout-processor-bitcoin calls invoice (INVOICE_URL) but the NetworkPolicies do not allow payout-processor-bitcoin -> invoice:grpc',
      'payout-processor-ethereum calls invoice (INVOICE_URL) but the NetworkPolicies do not allow payout-processor-ethereum -> invoice:grpc',
      'payout-processor-litecoin calls invoice (INVOICE_URL) but the NetworkPolicies do not allow payout-processor-litecoin -> invoice:grpc',
    ]);
  });

  test('production Postgres egress left at the base placeholder', () => {
    const ctx = broken('production', (c) => {
      const policy = findObject<INetworkPolicy>(c.objects, 'NetworkPolicy', 'postgres-egress');
      const peer = policy.spec?.egress?.[0]?.to?.[0];
      if (peer) peer.ipBlock = { cidr: '192.0.2.10/32' };
    });
    expect(checkNetworkPolicies(ctx)).toEqual(['NetworkPolicy postgres-egress: production still points at the base placeholder 192.0.2.10/32']);
  });

  test('a pod that may run as root or write its root filesystem', () => {
    const ctx = broken('production', (c) => {
      const d = findObject<IDeployment>(c.objects, 'Deployment', 'payout');
      const pod = d.spec?.template.spec;
      if (pod?.securityContext) pod.securityContext.runAsNonRoot = false;
      const sc = pod?.containers[0]?.securityContext;
      if (sc) {
        sc.runAsNonRoot = undefined;
        sc.readOnlyRootFilesystem = false;
        sc.capabilities = { add: ['NET_ADMIN'] };
      }
    });
    expect(checkSecurity(ctx)).toEqual([
      'Deployment payout: pod securityContext.runAsNonRoot is not true',
      'Deployment payout container payout: runAsNonRoot is not true',
      'Deployment payout container payout: readOnlyRootFilesystem is not true',
      'Deployment payout container payout: capabilities do not drop ALL',
      'Deployment payout container payout: adds capabilities NET_ADMIN',
    ]);
  });

  test('a Deployment without its autoscaler, and a budget that blocks every eviction', () => {
    const ctx = broken('production', (c) => {
      c.objects = c.objects.filter((o) => !(o.kind === 'HorizontalPodAutoscaler' && o.metadata.name === 'notifier'));
      const pdb = findObject<{ spec: { maxUnavailable?: number; minAvailable?: number } }>(c.objects, 'PodDisruptionBudget', 'invoice');
      delete pdb.spec.maxUnavailable;
      pdb.spec.minAvailable = 3;
      const hpa = findObject<IHorizontalPodAutoscaler>(c.objects, 'HorizontalPodAutoscaler', 'gateway');
      if (hpa.spec) hpa.spec.minReplicas = 1;
      delete container(c, 'Deployment', 'auth').resources?.limits?.memory;
    });
    expect(checkResourcesAndScaling(ctx)).toEqual([
      'Deployment auth container auth: no memory limit',
      'HPA gateway: production runs fewer than 2 replicas (1)',
      'PDB invoice: allows no eviction at 3 replicas (node drains would hang)',
      'Deployment notifier: 0 HorizontalPodAutoscalers (expected 1)',
    ]);
  });

  test('a Service that stopped selecting its pods', () => {
    const ctx = broken('production', (c) => {
      const service = findObject<{ spec: { selector: Record<string, string> } }>(c.objects, 'Service', 'notifier');
      service.spec.selector['app.kubernetes.io/component'] = 'migrations';
    });
    expect(checkServices(ctx)).toEqual(
      expect.arrayContaining(['Service notifier selects job/migrate-notifier instead of exactly the pods of Deployment notifier']),
    );
  });

  test('an object the schema refuses', () => {
    const ctx = broken('development', (c) => {
      const port = container(c, 'Deployment', 'auth').ports?.[0];
      if (port) (port as { containerPort: unknown }).containerPort = 'fifty thousand';
    });
    expect(checkSchemas(ctx)).toEqual([expect.stringMatching(/^Deployment auth: .*containerPort must be integer/)]);
  });

  test('an image that is not node:24-slim, runs as root, or ships development dependencies', () => {
    const dockerfile = readDockerfile();
    const dockerignore = readFileSync(path.join(REPO_ROOT, '.dockerignore'), 'utf8');
    expect(checkImage(dockerfile.replace('FROM node:24-slim AS deps', 'FROM node:22 AS deps'), dockerignore)).toEqual([
      'Dockerfile: stage deps is FROM node:22, not node:24-slim',
    ]);
    expect(checkImage(dockerfile.replace('USER 10001:10001', 'USER root'), dockerignore)).toEqual([
      'Dockerfile: USER root is not numeric (runAsNonRoot can only verify a numeric user)',
    ]);
    expect(checkImage(dockerfile.replace(/\nUSER .*\n/, '\n'), dockerignore)).toEqual(['Dockerfile: the final stage sets no USER (it would run as root)']);
    expect(checkImage(dockerfile.replace('RUN npm ci --omit=dev', 'RUN npm ci'), dockerignore)).toEqual([
      expect.stringMatching(/^Dockerfile: stage deps installs development dependencies into the image: RUN npm ci --omit=optional /),
    ]);
    expect(checkImage(`${dockerfile}\nRUN npm install left-pad\n`, dockerignore)).toEqual([
      'Dockerfile: the final stage installs development dependencies: RUN npm install left-pad',
    ]);
    // The tree deploy/shipped.mjs assembles is what brings the compiled code, migrations and assets.
    expect(checkImage(dockerfile.replace(/^COPY --from=build \/ship .*$/m, ''), dockerignore)).toEqual(
      expect.arrayContaining(['Dockerfile: the final stage does not copy gateway/assets', 'Dockerfile: the final stage does not copy services/auth/src/store/migrations']),
    );
    expect(checkImage(dockerfile.replace(/deploy\/shipped\.mjs copy \/ship/, 'deploy/shipped.mjs copy /elsewhere'), dockerignore)).toEqual(
      expect.arrayContaining(['Dockerfile: the final stage does not copy dashboard/dist']),
    );
    expect(checkImage(dockerfile, `${dockerignore}\nservices/*/src/store\n`)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^\.dockerignore leaves services\/auth\/src\/store\/migrations\/0002_merchants_projects_api_keys\.sql out/)]),
    );
  });

  test('the signer is reachable from the processor alone: a path from the gateway is refused', () => {
    const ctx = broken('production', (c) => {
      const pods = (component: string, name = 'gateway') => ({ podSelector: { matchLabels: { 'app.kubernetes.io/name': name, 'app.kubernetes.io/component': component } } });
      c.objects.push({
        apiVersion: 'networking.k8s.io/v1',
        kind: 'NetworkPolicy',
        metadata: { name: 'gateway-to-signer', namespace: 'coinvoice' },
        spec: {
          podSelector: {},
          policyTypes: ['Ingress', 'Egress'],
          ingress: [{ from: [pods('server')], ports: [{ port: 50055 }] }],
          egress: [{ to: [pods('signer', 'payout')], ports: [{ port: 50055 }] }],
        },
      });
    });
    expect(checkSchemas(ctx)).toEqual([]);
    expect(checkNetworkPolicies(ctx)).toEqual(['unexpected path allowed: gateway -> payout-signer:grpc']);
    // And the processor cut off from it: the call its SIGNER_URL makes is no longer allowed.
    const cut = broken('development', (c) => {
      c.objects = c.objects.filter((o) => !(o.kind === 'NetworkPolicy' && o.metadata.name === 'payout-signer-ingress'));
    });
    const processors = ['bitcoin', 'ethereum', 'litecoin', 'tron'].map((network) => `payout-processor-${network}`);
    expect(checkNetworkPolicies(cut)).toEqual([
      ...processors.map((processor) => `missing path: ${processor} -> payout-signer:grpc`),
      ...processors.map((processor) => `${processor} calls payout-signer (SIGNER_URL) but the NetworkPolicies do not allow ${processor} -> payout-signer:grpc`),
    ]);
  });

  test('the seed given as an environment variable instead of a file, readable by others, or mounted by another pod', () => {
    const signer = (c: DeployContext) => findObject<IDeployment>(c.objects, 'Deployment', 'payout-signer').spec!.template.spec!;
    const asVariable = broken('production', (c) => {
      const pod = signer(c);
      pod.volumes = (pod.volumes ?? []).filter((v) => v.name !== 'signer-seed');
      pod.containers[0]!.volumeMounts = (pod.containers[0]!.volumeMounts ?? []).filter((m) => m.name !== 'signer-seed');
      pod.containers[0]!.env!.push({ name: 'SIGNER_SEED', valueFrom: { secretKeyRef: { name: 'payout-signer-seed', key: 'mnemonic' } } });
    });
    expect(checkSignerSeed(asVariable)).toEqual([
      'Deployment payout-signer container signer: SIGNER_SEED_FILE=/etc/coinvoice/signer-seed/mnemonic is not a file of a mounted Secret',
      'Deployment payout-signer container signer: SIGNER_SEED takes the seed Secret payout-signer-seed as an environment variable',
    ]);
    expect(checkEnvironment(asVariable)).toEqual([
      'Deployment payout-signer container signer: SIGNER_SEED (from Secret payout-signer-seed) is not a setting of payout sign: a typo, or a setting that no longer exists',
    ]);

    const openMode = broken('production', (c) => {
      const seed = signer(c).volumes?.find((v) => v.name === 'signer-seed');
      if (seed?.secret) seed.secret.defaultMode = 0o444;
    });
    expect(checkSignerSeed(openMode)).toEqual([
      'Deployment payout-signer container signer: the seed Secret payout-signer-seed is mounted with mode 0444: writable or readable by others (0400 or 0440)',
    ]);

    const elsewhere = broken('development', (c) => {
      const pod = findObject<IDeployment>(c.objects, 'Deployment', 'payout').spec!.template.spec!;
      pod.volumes!.push({ name: 'signer-seed', secret: { secretName: 'payout-signer-seed', defaultMode: 0o440 } });
      pod.containers[0]!.volumeMounts!.push({ name: 'signer-seed', mountPath: '/etc/coinvoice/signer-seed', readOnly: true });
    });
    expect(checkSignerSeed(elsewhere)).toEqual([
      'Deployment payout container payout: mounts the seed Secret payout-signer-seed, which only the signer may hold',
    ]);
  });

  test("the signer's production limits, its mutual TLS and its account keys are required", () => {
    const limits = broken('production', (c) => {
      delete findObject<IConfigMap>(c.objects, 'ConfigMap', 'payout-signer-config').data?.SIGNER_DAILY_LIMIT_USDC;
    });
    expect(checkEnvironment(limits)).toEqual([
      expect.stringMatching(/^Deployment payout-signer container signer: SIGNER_DAILY_LIMIT_USDC is required in production by payout sign \(a positive amount of USDC/),
    ]);
    // Development has defaults for the limits, but a signer without TLS on 0.0.0.0 would not start.
    const plaintext = broken('development', (c) => {
      const data = findObject<IConfigMap>(c.objects, 'ConfigMap', 'payout-signer-config').data!;
      for (const name of ['TLS_CA_FILE', 'TLS_CERT_FILE', 'TLS_KEY_FILE']) delete data[name];
    });
    expect(checkEnvironment(plaintext)).toEqual([expect.stringMatching(/^Deployment payout-signer container signer: payout sign serves only over mutual TLS/)]);
    const withoutKeys = broken('development', (c) => {
      const env = container(c, 'Deployment', 'payout-signer').env ?? [];
      container(c, 'Deployment', 'payout-signer').env = env.filter((e) => !e.name.startsWith('INVOICE_XPUB_'));
    });
    expect(checkEnvironment(withoutKeys)).toEqual([
      'Deployment payout-signer container signer: payout sign needs at least one of INVOICE_XPUB_ETH, INVOICE_XPUB_USDT, INVOICE_XPUB_USDC, INVOICE_XPUB_POL, INVOICE_XPUB_BNB (its seed\'s account key is checked against them) but none is given',
    ]);
  });

  test('mutual TLS: a certificate file in no mounted volume, and a probe on the port that asks for a client certificate', () => {
    const unmounted = broken('development', (c) => {
      const pod = findObject<IDeployment>(c.objects, 'Deployment', 'payout-processor-ethereum').spec!.template.spec!;
      pod.containers[0]!.volumeMounts = (pod.containers[0]!.volumeMounts ?? []).filter((m) => m.name !== 'tls');
    });
    expect(checkFileSettings(unmounted)).toEqual(
      ['TLS_CA_FILE=/etc/coinvoice/tls/ca.crt', 'TLS_CERT_FILE=/etc/coinvoice/tls/tls.crt', 'TLS_KEY_FILE=/etc/coinvoice/tls/tls.key'].map(
        (setting) => `Deployment payout-processor-ethereum container processor: ${setting} is in no volume the container mounts`,
      ),
    );
    const tlsProbe = broken('production', (c) => {
      const probe = container(c, 'Deployment', 'invoice-watcher-ethereum').readinessProbe;
      if (probe?.grpc) probe.grpc.port = 50052;
    });
    expect(checkPortsAndProbes(tlsProbe)).toEqual([
      'Deployment invoice-watcher-ethereum container watcher readinessProbe: probes the mutual-TLS gRPC port, where a kubelet probe has no client certificate: probe grpc-health (GRPC_HEALTH_PORT)',
    ]);
  });

  test('a processor without SIGNER_URL, or reaching the signer in plaintext in production', () => {
    const without = broken('production', (c) => {
      delete findObject<IConfigMap>(c.objects, 'ConfigMap', 'payout-processor-ethereum-config').data?.SIGNER_URL;
    });
    expect(checkEnvironment(without)).toEqual([
      expect.stringMatching(/^Deployment payout-processor-ethereum container processor: SIGNER_URL is required in production by payout process ethereum/),
    ]);
    const plaintext = broken('production', (c) => {
      findObject<IConfigMap>(c.objects, 'ConfigMap', 'payout-processor-ethereum-config').data!.SIGNER_URL = 'http://payout-signer:50055';
    });
    expect(checkEnvironment(plaintext)).toEqual([
      expect.stringMatching(/^Deployment payout-processor-ethereum container processor: payout process ethereum refuses to start: .*SIGNER_URL/),
    ]);
    // A URL naming another Service than the signer's.
    const elsewhere = broken('development', (c) => {
      findObject<IConfigMap>(c.objects, 'ConfigMap', 'payout-processor-ethereum-config').data!.SIGNER_URL = 'https://payout:50053';
    });
    expect(checkNetworkPolicies(elsewhere)).toContainEqual(
      'Deployment payout-processor-ethereum container processor: SIGNER_URL=https://payout:50053 does not name the Service payout-signer of this namespace',
    );
    // A network without a processor is not a role of the image.
    expect(roleOf({ name: 'processor', args: ['payout', 'process', 'polygon'] })).toEqual(expect.stringMatching(/^args \["payout","process","polygon"\] are not a process of the image/));
  });

  test('every container of the render has a role the image knows', () => {
    for (const overlay of OVERLAYS) {
      for (const w of workloadsOf(contexts[overlay].objects)) {
        for (const c of w.pod.containers) expect(roleOf(c)).toEqual(expect.objectContaining({ process: expect.any(String) }));
      }
    }
  });
});
