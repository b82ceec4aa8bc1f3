/**
 * A lone gateway process (no system around it) on a free port, for tests of its HTTP edge and its
 * shutdown: NATS and event keys of the test's own, backends wherever `env` points them (by default
 * the local defaults, where nothing listens). Resolves once /healthz answers.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { testEventKeys } from './event-keys';
import { testNatsUrl, uniqueName } from './infra';
import { freePortForTest } from './ports';
import { REPO_ROOT } from './system';

export async function startGatewayProcess(env: NodeJS.ProcessEnv = {}): Promise<{ process: ChildProcess; port: number }> {
  const port = await freePortForTest();
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'gateway', 'dist', 'main.js')], {
    env: {
      PATH: process.env.PATH,
      GATEWAY_PORT: String(port),
      NATS_URL: testNatsUrl(),
      EVENT_NAMESPACE: uniqueName('gateway'),
      EVENT_VERIFY_KEYS: testEventKeys().verifyKeys,
      LOG_LEVEL: 'silent',
      ...env,
    },
    stdio: 'ignore',
  });
  for (let i = 0; i < 200; i++) {
    if (await fetch(`http://127.0.0.1:${port}/healthz`).then((r) => r.ok, () => false)) return { process: child, port };
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error('the gateway did not start');
}
