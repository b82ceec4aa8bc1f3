/**
 * Foundation, end to end: the launcher starts all five processes, every service answers
 * grpc.health.v1 to a plain @grpc/grpc-js client and to a Connect client, the gateway's /readyz
 * turns 200, and SIGTERM to the launcher leaves no process of the system behind.
 */
import { create, fromBinary, toBinary } from '@bufbuild/protobuf';
import * as grpc from '@grpc/grpc-js';
import { connectNats, createRpcClient, EventNamespace, EventVerifier, MSG_ID_HEADER, parseVerifyKeys } from '@coinvoice/runtime';
import {
  Health,
  HealthCheckRequestSchema,
  HealthCheckResponse_ServingStatus as ServingStatus,
  HealthCheckResponseSchema,
  type HealthCheckRequest,
  type HealthCheckResponse,
} from '@coinvoice/runtime/gen/grpc/health/v1/health_pb';
import { readdirSync, readFileSync, readlinkSync, statSync } from 'node:fs';
import path from 'node:path';
import { systemEventKeys } from '../support/event-keys';
import { testNatsUrl } from '../support/infra';
import { bootSystem, isAlive, type BootedSystem } from '../support/system';

const SERVICES = ['auth', 'invoice', 'payout', 'notifier'] as const;

/** A grpc-js client built by hand from the method path and binary codecs: no Connect involved. */
const healthDefinition: grpc.ServiceDefinition = {
  check: {
    path: '/grpc.health.v1.Health/Check',
    requestStream: false,
    responseStream: false,
    requestSerialize: (m: HealthCheckRequest) => Buffer.from(toBinary(HealthCheckRequestSchema, m)),
    requestDeserialize: (b: Buffer) => fromBinary(HealthCheckRequestSchema, b),
    responseSerialize: (m: HealthCheckResponse) => Buffer.from(toBinary(HealthCheckResponseSchema, m)),
    responseDeserialize: (b: Buffer) => fromBinary(HealthCheckResponseSchema, b),
  },
};
const GrpcHealthClient = grpc.makeGenericClientConstructor(healthDefinition, 'Health');

function grpcJsCheck(target: string, service = ''): Promise<HealthCheckResponse> {
  const client = new GrpcHealthClient(target, grpc.credentials.createInsecure());
  return new Promise((resolve, reject) => {
    client.makeUnaryRequest(
      healthDefinition.check!.path,
      healthDefinition.check!.requestSerialize,
      healthDefinition.check!.responseDeserialize,
      create(HealthCheckRequestSchema, { service }),
      (err: grpc.ServiceError | null, res?: HealthCheckResponse) => {
        client.close();
        if (err || !res) reject(err ?? new Error('no response'));
        else resolve(res);
      },
    );
  });
}

let system: BootedSystem;

beforeAll(async () => {
  system = await bootSystem();
}, 90_000);

afterAll(async () => {
  await system?.stop();
});

test('the gateway answers /healthz and /readyz 200 with every backend SERVING', async () => {
  const healthz = await fetch(`${system.gatewayUrl}/healthz`);
  expect(healthz.status).toBe(200);
  const readyz = await fetch(`${system.gatewayUrl}/readyz`);
  expect(readyz.status).toBe(200);
  expect(await readyz.json()).toEqual({
    status: 'ready',
    backends: { auth: 'SERVING', invoice: 'SERVING', payout: 'SERVING', notifier: 'SERVING' },
  });
});

test.each(SERVICES)('%s answers grpc.health.v1 Check SERVING to a plain @grpc/grpc-js client', async (name) => {
  const target = new URL(system.processes[name].grpcUrl!).host;
  const res = await grpcJsCheck(target);
  expect(res.status).toBe(ServingStatus.SERVING);
});

test.each(SERVICES)('%s answers grpc.health.v1 Check SERVING through the project\'s own RPC client', async (name) => {
  const client = createRpcClient(Health, system.processes[name].grpcUrl!);
  const res = await client.check({ service: '' });
  expect(res.status).toBe(ServingStatus.SERVING);
});

test('an unknown service name answers NOT_FOUND, as the health protocol says', async () => {
  const target = new URL(system.processes.auth.grpcUrl!).host;
  await expect(grpcJsCheck(target, 'no.such.Service')).rejects.toMatchObject({ code: grpc.status.NOT_FOUND });
});

test.each(SERVICES)('%s admin port serves /healthz, /readyz and Prometheus /metrics', async (name) => {
  const admin = system.processes[name].adminUrl!;
  expect((await fetch(`${admin}/healthz`)).status).toBe(200);
  const ready = await fetch(`${admin}/readyz`);
  expect(ready.status).toBe(200);
  expect(await ready.json()).toMatchObject({ serving: true, dependencies: { postgres: 'up', nats: 'up' } });
  const metrics = await (await fetch(`${admin}/metrics`)).text();
  expect(metrics).toContain('process_cpu_seconds_total');
  expect(metrics).toContain('rpc_server_handled_total');
});

test('npm start hands out a working sandbox API key, kept for the next start', async () => {
  const match = /sandbox:\s+x-api-key (SBX_[0-9A-Za-z]{40})/.exec(system.output());
  expect(match).not.toBeNull();
  const key = match![1]!;
  const create = await fetch(`${system.gatewayUrl}/api/invoice`, {
    method: 'POST',
    headers: { 'x-api-key': key, 'content-type': 'application/json' },
    body: JSON.stringify({ priceAmount: '19.90', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://example.com/ok', cancelUrl: 'https://example.com/cancel' }),
  });
  expect(create.status).toBe(201);
  const { id } = (await create.json()) as { id: string };
  const paid = await fetch(`${system.gatewayUrl}/api/invoice/${id}/sandbox/pay`, { method: 'POST', headers: { 'x-api-key': key, 'content-type': 'application/json' }, body: '{}' });
  expect(paid.status).toBe(200);
  const saved = JSON.parse(readFileSync(path.join(system.dataDir, 'sandbox-credentials.json'), 'utf8'));
  expect(saved.apiKey).toBe(key);
  expect(statSync(path.join(system.dataDir, 'sandbox-credentials.json')).mode & 0o077).toBe(0);
});

test('npm start says when no chain is watched, and how to watch one', () => {
  // Every network of the registry, each by the variable that configures its node.
  expect(system.output()).toContain(
    'watchers: none: live invoices are not watched (set CHAIN_ETHEREUM_RPC_URL, CHAIN_BASE_RPC_URL, CHAIN_ARBITRUM_RPC_URL, CHAIN_OPTIMISM_RPC_URL, ' +
      'CHAIN_POLYGON_RPC_URL, CHAIN_BSC_RPC_URL, CHAIN_BITCOIN_ESPLORA_URL, CHAIN_LITECOIN_ESPLORA_URL, CHAIN_TRON_API_URL to watch a chain)',
  );
});

test('npm start warns that live invoices get addresses of development keys, for each coin without an INVOICE_XPUB_<COIN>', () => {
  expect(system.output()).toMatch(/^WARNING: {2}development keys for BTC, LTC, ETH, USDT, USDC, TRX, POL, BNB: live invoices in these coins get addresses of key pairs the invoice service made and keeps .*never send real funds to them/m);
});

test('npm start prints the dashboard URL; it serves the app under a strict CSP, and / leads there', async () => {
  const match = /dashboard:\s+(http:\/\/\S+\/dashboard)\s/.exec(system.output());
  expect(match?.[1]).toBe(`${system.gatewayUrl}/dashboard`);
  const page = await fetch(match![1]!);
  expect(page.status).toBe(200);
  expect(page.headers.get('content-type')).toContain('text/html');
  expect(page.headers.get('content-security-policy')).toContain("script-src 'self'");
  const html = await page.text();
  const script = /<script type="module" crossorigin src="(\/dashboard\/assets\/[^"]+\.js)"/.exec(html)?.[1];
  expect(script).toBeDefined();
  const asset = await fetch(`${system.gatewayUrl}${script}`);
  expect(asset.status).toBe(200);
  expect(asset.headers.get('content-type')).toContain('text/javascript');
  // A client route is the same app (the SPA decides what it shows); an unknown asset is a 404.
  expect(await (await fetch(`${system.gatewayUrl}/dashboard/projects/123/invoices`)).text()).toBe(html);
  expect((await fetch(`${system.gatewayUrl}/dashboard/assets/nope.js`)).status).toBe(404);
  const root = await fetch(`${system.gatewayUrl}/`, { redirect: 'manual' });
  expect(root.status).toBe(302);
  expect(root.headers.get('location')).toBe('/dashboard/');
});

test('the gateway echoes a request id and answers unknown routes 404 problem+json', async () => {
  const res = await fetch(`${system.gatewayUrl}/no/such/route`, { headers: { 'x-request-id': 'req-abc-123' } });
  expect(res.status).toBe(404);
  expect(res.headers.get('content-type')).toContain('application/problem+json');
  expect(res.headers.get('x-request-id')).toBe('req-abc-123');
  expect(await res.json()).toMatchObject({ status: 404, code: 'not_found', requestId: 'req-abc-123' });
});

/**
 * The TCP addresses `pid` listens on, from /proc: its socket inodes (/proc/<pid>/fd) looked up in
 * /proc/net/tcp and tcp6 (state 0A = LISTEN).
 */
function listeningAddresses(pid: number): string[] {
  const inodes = new Set<string>();
  for (const fd of readdirSync(`/proc/${pid}/fd`)) {
    try {
      const match = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
      if (match?.[1]) inodes.add(match[1]);
    } catch {
      // closed meanwhile
    }
  }
  const addresses: string[] = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      if (fields.length < 10 || fields[3] !== '0A' || !inodes.has(fields[9]!)) continue;
      const [hexIp, hexPort] = fields[1]!.split(':') as [string, string];
      addresses.push(`${hexIpToText(hexIp)}:${parseInt(hexPort, 16)}`);
    }
  }
  return addresses;
}

/** /proc/net's little-endian hex address → text (IPv4 as dotted quad; IPv6 as 8 groups). */
function hexIpToText(hex: string): string {
  if (hex.length === 8) return Buffer.from(hex, 'hex').reverse().join('.');
  const words = hex.match(/.{8}/g)!.map((word) => Buffer.from(word, 'hex').reverse().toString('hex'));
  const groups = words.join('').match(/.{4}/g)!;
  return groups.map((g) => g.replace(/^0+(?=.)/, '')).join(':');
}

test('every process npm start starts listens on 127.0.0.1 only (BIND_HOST), never on every interface', () => {
  const processes = system.current();
  expect(Object.keys(processes).sort()).toEqual(['auth', 'gateway', 'invoice', 'notifier', 'payout']);
  for (const [name, info] of Object.entries(processes)) {
    const addresses = listeningAddresses(info.pid);
    // gRPC and admin ports for a service, the HTTP port for the gateway.
    expect({ name, count: addresses.length >= (name === 'gateway' ? 1 : 2) }).toEqual({ name, count: true });
    for (const address of addresses) expect({ name, address }).toEqual({ name, address: expect.stringMatching(/^127\.0\.0\.1:\d+$/) });
    for (const url of [info.grpcUrl, info.adminUrl, info.url].filter((u): u is string => u !== undefined)) expect(new URL(url).hostname).toBe('127.0.0.1');
  }
});

test('npm start makes one event signing key per service in the data folder (owner-only), and the events the system publishes are signed with them', async () => {
  const keyDir = path.join(system.dataDir, 'event-keys');
  expect(readdirSync(keyDir).sort()).toEqual(['auth.pem', 'invoice.pem', 'notifier.pem', 'payout.pem']);
  for (const file of readdirSync(keyDir)) expect(statSync(path.join(keyDir, file)).mode & 0o077).toBe(0);
  // The sandbox key made above paid an invoice: its invoice.paid is signed by invoice.pem.
  const keys = systemEventKeys(system);
  const verifier = new EventVerifier(parseVerifyKeys(keys.verifyKeys) ?? new Map());
  const nats = await connectNats({ url: testNatsUrl(), name: 'launcher-test' });
  try {
    const namespace = new EventNamespace(system.namespace);
    const jsm = await nats.jetstreamManager();
    const msg = await jsm.streams.getMessage(namespace.streamName('invoice'), { last_by_subj: namespace.subject('invoice.paid') });
    const id = msg.header.get(MSG_ID_HEADER);
    expect(verifier.check('invoice', msg.subject, id, msg.data, msg.header)).toBeUndefined();
    expect(verifier.check('auth', msg.subject, id, msg.data, msg.header)).toBe('bad_signature');
  } finally {
    await nats.close();
  }
});

test('a process that dies is started again, like a Kubernetes pod', async () => {
  const before = system.current().invoice!;
  process.kill(before.pid, 'SIGKILL');
  const deadline = Date.now() + 15_000;
  let after = system.current().invoice!;
  while ((after.pid === before.pid || after.restarts === before.restarts) && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    after = system.current().invoice!;
  }
  expect(after.pid).not.toBe(before.pid);
  expect(after.restarts).toBe(before.restarts + 1);
  while (Date.now() < deadline) {
    if ((await fetch(`${system.gatewayUrl}/readyz`)).status === 200) break;
    await new Promise((r) => setTimeout(r, 100));
  }
  expect((await fetch(`${system.gatewayUrl}/readyz`)).status).toBe(200);
});

test('SIGTERM to the launcher stops every process of the system', async () => {
  const pids = Object.values(system.current()).map((p) => p.pid);
  expect(pids).toHaveLength(5);
  for (const pid of pids) expect(isAlive(pid)).toBe(true);
  await system.stop();
  expect(system.launcher.exitCode).toBe(0);
  const deadline = Date.now() + 5_000;
  while (pids.some(isAlive) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
  expect(pids.filter(isAlive)).toEqual([]);
});
