/**
 * `GATEWAY_PORT=0` means free ports for everything the launcher starts, the embedded Postgres and
 * nats-server included (deploy/local/src/infrastructure.ts), so two systems started that way never
 * collide on 54329 / 4223; the default keeps the fixed ports.
 */
import { createServer, type Server } from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect } from 'nats';
import { EMBEDDED_POSTGRES_PORT, freePort, launcherPort, NATS_SERVER_PORT, startNatsServer } from '../../deploy/local/src/infrastructure';
import { NATS_SERVER_BIN } from '../support/own-infra';

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
  // 1,500 draws from the 12,768 ports of the range: at random, a repeat is all but certain.
  const ports: number[] = [];
  for (let i = 0; i < 1_500; i++) ports.push(await freePort());
  expect(new Set(ports).size).toBe(ports.length);
});
