/**
 * `GATEWAY_PORT=0` means free ports for everything the launcher starts, the embedded Postgres and
 * nats-server included (deploy/local/src/infrastructure.ts), so two systems started that way never
 * collide on 54329 / 4223; the default keeps the fixed ports.
 */
import { createServer, type Server } from 'node:net';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect } from 'nats';
import { EMBEDDED_POSTGRES_PORT, freePortFrom, launcherPort, leasePort, NATS_SERVER_PORT, PORT_LEASE_MS, startNatsServer, type PortLeases } from '../../deploy/local/src/infrastructure';
import { NATS_SERVER_BIN } from '../support/own-infra';
import { REPO_ROOT } from '../support/system';

test('fixed ports by default, free ones (never the fixed ones) when free ports are asked for', async () => {
  expect(await launcherPort({ freePorts: false }, EMBEDDED_POSTGRES_PORT)).toBe(54329);
  expect(await launcherPort({ freePorts: false }, NATS_SERVER_PORT)).toBe(4223);
  // Hold the fixed ports, as another running system would: free ports must go elsewhere.
  const held: Server[] = [];
  for (const port of [EMBEDDED_POSTGRES_PORT, NATS_SERVER_PORT]) {
    const server = createServer();
    const ok = await new Promise<boolean>((resolve) => {
      server.once('error', () => resolve(false));
      server.listen(port, '127.0.0.1', () => resolve(true));
    });
    if (ok) held.push(server);
  }
  try {
    const ports = await Promise.all([launcherPort({ freePorts: true }, EMBEDDED_POSTGRES_PORT), launcherPort({ freePorts: true }, NATS_SERVER_PORT)]);
    for (const port of ports) expect([EMBEDDED_POSTGRES_PORT, NATS_SERVER_PORT]).not.toContain(port);
  } finally {
    for (const server of held) await new Promise((resolve) => server.close(resolve));
  }
});

test('two nats-servers on free ports run side by side with JetStream', async () => {
  if (!NATS_SERVER_BIN) throw new Error('nats-server is not installed (apt-get install nats-server)');
  const dir = mkdtempSync(path.join(tmpdir(), 'launcher-nats-'));
  const started = [];
  try {
    for (const name of ['a', 'b']) {
      started.push(await startNatsServer(NATS_SERVER_BIN, path.join(dir, name), await launcherPort({ freePorts: true }, NATS_SERVER_PORT)));
    }
    expect(new Set(started.map((s) => s.url)).size).toBe(2);
    for (const server of started) {
      const nc = await connect({ servers: server.url });
      await expect(nc.jetstreamManager().then((jsm) => jsm.getAccountInfo())).resolves.toBeDefined();
      await nc.close();
    }
  } finally {
    for (const server of started) await server.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});

test('free ports are never handed out twice in one process (a launcher gives them all out before its children bind them)', async () => {
  // 1,500 draws from 3,000 ports: at random, a repeat is all but certain.
  const leases = ownLeases(3_000);
  try {
    const ports: number[] = [];
    for (let i = 0; i < 1_500; i++) ports.push(await freePortFrom(leases));
    expect(new Set(ports).size).toBe(ports.length);
  } finally {
    rmSync(leases.dir, { recursive: true, force: true });
  }
});

test('a port another process leased is not handed out, though nothing listens on it (CI: two launchers, one port, "register answered 405")', async () => {
  const leases = ownLeases(40);
  try {
    // Another process (the built launcher module, as `npm start` runs it) leases 30 of the 40 ports and binds none.
    const script = `const { freePortFrom } = require(${JSON.stringify(path.join(REPO_ROOT, 'deploy/local/dist/infrastructure.js'))});
      (async () => { const l = ${JSON.stringify(leases)}; const got = []; for (let i = 0; i < 30; i++) got.push(await freePortFrom(l)); console.log(JSON.stringify(got)); })();`;
    const child = spawnSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 30_000 });
    expect(child.stderr).toBe('');
    const theirs: number[] = JSON.parse(child.stdout);
    expect(new Set(theirs).size).toBe(30);
    const ours: number[] = [];
    for (let i = 0; i < 5; i++) ours.push(await freePortFrom(leases));
    expect(ours.filter((port) => theirs.includes(port))).toEqual([]);
    // With the rest leased too, one more is refused with a reason, not a shared port.
    for (let port = leases.low; port < leases.high; port++) if (!theirs.includes(port) && !ours.includes(port)) leasePort(leases.dir, port, Date.now());
    await expect(freePortFrom(leases)).rejects.toThrow(/no free port between/);
  } finally {
    rmSync(leases.dir, { recursive: true, force: true });
  }
});

test('a lease holds through the next window and is gone after it; old windows are deleted', () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'port-leases-'));
  try {
    const start = 1_000 * PORT_LEASE_MS + 5;
    expect(leasePort(dir, 25_000, start)).toBe(true);
    expect(leasePort(dir, 25_000, start + 1)).toBe(false);
    expect(leasePort(dir, 25_000, start + PORT_LEASE_MS)).toBe(false);
    expect(leasePort(dir, 25_000, start + 2 * PORT_LEASE_MS)).toBe(true);
    expect(readdirSync(dir).sort()).toEqual(['1002']);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A lease folder of this test's own over `size` ports low in the range (never the machine's). */
function ownLeases(size: number): PortLeases {
  const low = 20_000 + Math.floor(Math.random() * (12_768 - size));
  return { dir: mkdtempSync(path.join(tmpdir(), 'port-leases-')), low, high: low + size };
}
