/**
 * `npm run bench:profile -- <create|get|pay>`: one scenario of `npm run bench` with every service
 * process under V8's sampling profiler (`--cpu-prof`); the profiles land in BENCH_PROFILE_DIR
 * (default .data/profiles), one `.cpuprofile` per process, readable in Chrome DevTools. Then a
 * summary of where each process spent its time (self time by function and by package).
 */
import { mkdirSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { startSystem } from '@coinvoice/local';
import { benchInfrastructure, runBenchmark } from './infrastructure';
import { signUp } from './sign-up';
import { load, SECONDS } from './load';

const SCENARIO = process.argv[2] ?? 'create';
const PROFILE_DIR = path.resolve(process.env.BENCH_PROFILE_DIR ?? path.join('.data', 'profiles'));
const BODY = JSON.stringify({ priceAmount: '19.90', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://example.com/ok', cancelUrl: 'https://example.com/cancel', orderId: 'bench' });

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}


/** Self time by function and by package of one profile, as printed lines. */
function summary(file: string): string {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as { nodes: ProfileNode[]; samples: number[]; timeDeltas: number[] };
  const nodes = new Map(profile.nodes.map((node) => [node.id, node]));
  const byFunction = new Map<string, number>();
  const byPackage = new Map<string, number>();
  let total = 0;
  profile.samples.forEach((id, i) => {
    const frame = nodes.get(id)?.callFrame;
    const dt = profile.timeDeltas[i] ?? 0;
    if (!frame) return;
    total += dt;
    const where = frame.url.replace(/^.*node_modules\//, '').replace(/^.*?\/(services|gateway|deploy)\//, '$1/');
    byFunction.set(`${frame.functionName || '(anonymous)'} ${where}:${frame.lineNumber}`, (byFunction.get(`${frame.functionName || '(anonymous)'} ${where}:${frame.lineNumber}`) ?? 0) + dt);
    const pkg = where.startsWith('@') ? where.split('/').slice(0, 2).join('/') : where.split('/')[0] || frame.functionName || '(native)';
    byPackage.set(pkg, (byPackage.get(pkg) ?? 0) + dt);
  });
  const top = (map: Map<string, number>, n: number) =>
    [...map].sort((a, b) => b[1] - a[1]).slice(0, n).map(([name, t]) => `  ${((t / total) * 100).toFixed(1).padStart(5)}% ${name}`);
  return [`${path.basename(file)}: ${(total / 1e6).toFixed(1)} s sampled`, ' by package:', ...top(byPackage, 12), ' by function:', ...top(byFunction, 20)].join('\n');
}

async function main(): Promise<void> {
  const infra = await benchInfrastructure('profile');
  rmSync(PROFILE_DIR, { recursive: true, force: true });
  mkdirSync(PROFILE_DIR, { recursive: true });
  const mailbox = path.join(infra.dataDir, 'mailbox');
  const system = await startSystem({
    databaseUrl: infra.databaseUrl,
    natsUrl: infra.natsUrl,
    logDir: path.join(infra.dataDir, 'logs'),
    eventKeyDir: path.join(infra.dataDir, 'event-keys'),
    gatewayPort: 0,
    env: {
      ...process.env,
      COINVOICE_NODE_ARGS: `${process.env.COINVOICE_NODE_ARGS ?? ""} --cpu-prof --cpu-prof-dir=${PROFILE_DIR}`,
      EVENT_NAMESPACE: `prof${randomBytes(3).toString('hex')}`,
      LOG_LEVEL: 'warn',
      RATE_LIMIT_API_PER_KEY: '100000000/1m',
      SMTP_URL: '',
      MAILBOX_DIR: mailbox,
    },
  });
  // Webhooks go to a receiver answering 204, as in `npm run bench`, so the notifier's profile is
  // that of deliveries that succeed.
  const receiver = http.createServer((req, res) => req.resume().on('end', () => res.writeHead(204).end()));
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  const hookUrl = `http://127.0.0.1:${(receiver.address() as { port: number }).port}/hook`;
  try {
    const gw = system.gatewayUrl;
    const token = await signUp(gw, mailbox, { email: `profile-${randomBytes(4).toString('hex')}@example.com`, password: 'bench-password-1', name: 'Profile' });
    const auth = { authorization: `Bearer ${token}`, 'content-type': 'application/json' };
    const project = (await (await fetch(`${gw}/api/merchant/projects`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'Profile', environment: 'sandbox', webhookUrl: hookUrl }) })).json()) as { id: string };
    const key = (await (await fetch(`${gw}/api/merchant/projects/${project.id}/api-keys`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'profile' }) })).json()) as { key: string };
    const headers = { 'x-api-key': key.key, 'content-type': 'application/json' };
    const ids: string[] = [];
    const create = await load({
      url: `${gw}/api/invoice`, method: 'POST', headers, body: BODY,
      ...(SCENARIO === 'create' ? {} : { duration: Math.min(5, SECONDS) }),
      setupClient: (client) => client.on('body', (buf: Buffer) => { const id = (JSON.parse(buf.toString()) as { id?: string }).id; if (id) ids.push(id); }),
    });
    console.log(`create: ${create.requests.average.toFixed(0)} req/s`);
    let next = 0;
    if (SCENARIO === 'get') {
      const get = await load({ url: gw, requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: `/api/invoice/${ids[next++ % ids.length]}`, headers: { 'x-api-key': key.key } }) }] });
      console.log(`get: ${get.requests.average.toFixed(0)} req/s`);
    } else if (SCENARIO === 'pay') {
      const pay = await load({ url: gw, amount: ids.length, requests: [{ method: 'POST', setupRequest: (req) => ({ ...req, path: `/api/invoice/${ids[next++ % ids.length]}/sandbox/pay`, headers: { 'x-api-key': key.key } }) }] });
      console.log(`pay: ${pay.requests.average.toFixed(0)} req/s`);
    }
  } finally {
    receiver.close();
    await system.stop();
    await infra.dispose();
  }
  for (const file of readdirSync(PROFILE_DIR).filter((f) => f.endsWith('.cpuprofile'))) console.log(`\n${summary(path.join(PROFILE_DIR, file))}`);
}

runBenchmark('bench:profile', main);
