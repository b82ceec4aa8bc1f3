/**
 * deploy/nats/nats-server.conf on a real nats-server (`nats-server` from PATH or /usr/sbin),
 * started by this test on free ports with JetStream: the whole system runs with one NATS user per
 * service (<SERVICE>_NATS_URL) and works end to end — an invoice paid in the sandbox reaches the
 * webhook (notifier) and the balance (payout ledger), a rotated webhook secret reaches the
 * notifier and a key revocation the gateway — while
 * a foreign publish is refused: the gateway cannot publish invoice.paid, the payout user cannot
 * publish invoice events, and nothing forged reaches the invoice stream; a consumer's user may not
 * reconfigure another service's stream (only create it, when it starts first).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect, headers, type NatsConnection } from 'nats';
import { Webhook } from 'standardwebhooks';
import { eventually, Receiver } from '../../services/notifier/test/support/receiver';
import { apiKeyHeader, bearer, createProjectWithKey, GatewayClient, registerMerchant } from '../support/http';
import { freePortForTest } from '../support/ports';
import { bootSystem, REPO_ROOT, type BootedSystem } from '../support/system';

const CONFIG = path.join(REPO_ROOT, 'deploy', 'nats', 'nats-server.conf');
const USERS = ['auth', 'invoice', 'payout', 'notifier', 'gateway'] as const;
type User = (typeof USERS)[number];

const passwords = Object.fromEntries(USERS.map((u) => [u, randomBytes(12).toString('hex')])) as Record<User, string>;
let port: number;
let server: ChildProcess;
let storeDir: string;
let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;

function natsServerBinary(): string {
  for (const candidate of ['/usr/sbin/nats-server', '/usr/bin/nats-server', '/usr/local/bin/nats-server']) if (existsSync(candidate)) return candidate;
  return 'nats-server';
}

const urlOf = (user: User) => `nats://${user}:${passwords[user]}@127.0.0.1:${port}`;

async function connectAs(user: User): Promise<NatsConnection> {
  return connect({ servers: `127.0.0.1:${port}`, user, pass: passwords[user], name: `test-as-${user}` });
}

beforeAll(async () => {
  port = await freePortForTest();
  storeDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-nats-'));
  server = spawn(natsServerBinary(), ['-c', CONFIG, '-p', String(port), '-js', '-sd', storeDir, '-a', '127.0.0.1'], {
    // nats-server reads a variable's value as configuration: quoted, any password is a string
    // (a bare one starting with a digit would be read as a number).
    env: { ...process.env, ...Object.fromEntries(USERS.map((u) => [`NATS_${u.toUpperCase()}_PASSWORD`, `"${passwords[u]}"`])) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let serverOutput = '';
  server.stdout?.on('data', (chunk: Buffer) => (serverOutput += chunk.toString()));
  server.stderr?.on('data', (chunk: Buffer) => (serverOutput += chunk.toString()));
  server.on('error', (err) => (serverOutput += `spawn failed: ${err.message}`));
  await eventually(
    async () => {
      if (server.exitCode !== null) throw new Error(`nats-server exited (${server.exitCode}): ${serverOutput}`);
      return connectAs('auth').then(async (nc) => (await nc.close(), true), () => undefined);
    },
    20_000,
    `nats-server with ${CONFIG} to accept the auth user`,
  );
  receiver = await new Receiver().start();
  system = await bootSystem({
    env: {
      // The shipped permissions name the production namespace; this nats-server is the test's own.
      EVENT_NAMESPACE: 'coinvoice',
      NATS_URL: `nats://127.0.0.1:${port}`,
      ...Object.fromEntries(USERS.map((u) => [`${u.toUpperCase()}_NATS_URL`, urlOf(u)])),
      PASSWORD_HASH_MEMORY_KIB: '1024',
    },
  });
  api = new GatewayClient(system.gatewayUrl);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  await receiver?.stop();
  if (server && server.exitCode === null) {
    const exited = new Promise((resolve) => server.once('exit', resolve));
    server.kill('SIGTERM');
    await exited;
  }
  if (storeDir) rmSync(storeDir, { recursive: true, force: true });
});

/** Messages in the invoice stream, as the invoice user sees them (it may read its own stream's info). */
async function invoiceStreamCount(): Promise<number> {
  const nc = await connectAs('invoice');
  try {
    const jsm = await nc.jetstreamManager();
    return (await jsm.streams.info('COINVOICE_INVOICE')).state.messages;
  } finally {
    await nc.close();
  }
}

/** Publishes to JetStream as `user`: 'accepted', or the error the client got. */
async function publishAs(user: User, subject: string): Promise<string> {
  const nc = await connectAs(user);
  try {
    const h = headers();
    h.set('event-type', subject.slice('coinvoice.'.length));
    const ack = await nc.jetstream().publish(subject, new TextEncoder().encode(JSON.stringify({ invoiceId: randomUUID(), forged: true })), {
      msgID: randomUUID(),
      headers: h,
      timeout: 2_000,
    });
    return `accepted (seq ${ack.seq})`;
  } catch (err) {
    return err instanceof Error ? err.message : String(err);
  } finally {
    await nc.close().catch(() => undefined);
  }
}

test('with one user per service the system works: a sandbox payment reaches the webhook and the balance; a revoked key is refused at once', async () => {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });
  const invoice = await api.post(
    '/api/invoice',
    { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(project.key) },
  );
  expect(invoice.status).toBe(201);
  expect((await api.post(`/api/invoice/${invoice.body.id}/sandbox/pay`, { amountReceived: 0.001 }, { headers: apiKeyHeader(project.key) })).status).toBe(200);
  await receiver.waitFor(1, 15_000, (r) => r.body.includes(invoice.body.id));
  await eventually(async () => {
    const res = await api.get('/api/payout/balance', { headers: apiKeyHeader(project.key) });
    return (res.body.balances as Array<{ available: number }>)[0]?.available === 0.001 ? true : undefined;
  }, 15_000, 'the ledger to credit the payment');

  // The notifier's subscription to auth's project updates works with its user: after a rotation
  // the next webhook is signed with the new secret, not a cached old one.
  const rotated = await api.post(`/api/merchant/projects/${project.id}/webhook-secret/rotate`, undefined, { headers: bearer(merchant.token) });
  expect(rotated.status).toBe(200);
  const second = await api.post(
    '/api/invoice',
    { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
    { headers: apiKeyHeader(project.key) },
  );
  expect((await api.post(`/api/invoice/${second.body.id}/sandbox/pay`, {}, { headers: apiKeyHeader(project.key) })).status).toBe(200);
  const [afterRotation] = await receiver.waitFor(1, 15_000, (r) => r.body.includes(second.body.id));
  expect(new Webhook(rotated.body.webhookSecret as string).verify(afterRotation!.body, afterRotation!.headers as Record<string, string>)).toMatchObject({ invoiceId: second.body.id });

  // The gateway's subscription to auth events works with its read-only user.
  const probe = () => api.get(`/api/invoice/${randomUUID()}`, { headers: apiKeyHeader(project.key) });
  expect((await probe()).status).toBe(404);
  expect((await api.delete(`/api/merchant/projects/${project.id}/api-keys/${project.keyId}`, { headers: bearer(merchant.token) })).status).toBe(204);
  await eventually(async () => ((await probe()).status === 401 ? true : undefined), 3_000, 'the revocation to reach the gateway');
});

test('a foreign publish is refused: the gateway cannot publish invoice.paid, the payout user no invoice event', async () => {
  const before = await invoiceStreamCount();
  expect(await publishAs('gateway', 'coinvoice.invoice.paid')).toMatch(/permission/i);
  expect(await publishAs('payout', 'coinvoice.invoice.paid')).toMatch(/permission/i);
  expect(await publishAs('payout', 'coinvoice.invoice.expired')).toMatch(/permission/i);
  expect(await publishAs('notifier', 'coinvoice.invoice.paid')).toMatch(/permission/i);
  expect(await publishAs('auth', 'coinvoice.payout.completed')).toMatch(/permission/i);
  // The owner may (the same call, so the refusals above are the permissions, not the call).
  expect(await publishAs('invoice', 'coinvoice.invoice.permission_probe')).toMatch(/^accepted/);
  expect(await invoiceStreamCount()).toBe(before + 1);
});

test("a consumer's user cannot reconfigure another service's stream; the owner can", async () => {
  const as = async (user: User, streamName: string) => {
    const nc = await connectAs(user);
    try {
      const jsm = await nc.jetstreamManager();
      const { config } = await jsm.streams.info(streamName);
      await jsm.streams.update(streamName, { ...config, max_age: config.max_age });
      return 'updated';
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    } finally {
      await nc.close().catch(() => undefined);
    }
  };
  expect(await as('payout', 'COINVOICE_INVOICE')).toMatch(/permission|timeout/i);
  expect(await as('notifier', 'COINVOICE_INVOICE')).toMatch(/permission|timeout/i);
  expect(await as('notifier', 'COINVOICE_PAYOUT')).toMatch(/permission|timeout/i);
  expect(await as('gateway', 'COINVOICE_INVOICE')).toMatch(/permission|timeout/i);
  // The same call by the owners (so the refusals above are the permissions, not the call).
  expect(await as('invoice', 'COINVOICE_INVOICE')).toBe('updated');
  expect(await as('payout', 'COINVOICE_PAYOUT')).toBe('updated');
});
