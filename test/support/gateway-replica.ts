/**
 * A second gateway process next to a booted system (the launcher runs one), so tests can prove
 * what must hold on every replica: revocations, shared rate limits.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { systemEventKeys } from './event-keys';
import { rememberMailbox } from './mail';
import { testNatsUrl } from './infra';
import { freePortForTest } from './ports';
import { REPO_ROOT, type BootedSystem } from './system';

export interface GatewayReplica {
  url: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

export async function startGatewayReplica(
  system: BootedSystem,
  options: { authUrl?: string; env?: NodeJS.ProcessEnv; /** Wait for /healthz only (a backend is meant to be down). */ aliveOnly?: boolean } = {},
): Promise<GatewayReplica> {
  const port = await freePortForTest();
  const url = `http://127.0.0.1:${port}`;
  const child = spawn(process.execPath, [path.join(REPO_ROOT, 'gateway/dist/main.js')], {
    env: {
      ...process.env,
      GATEWAY_PORT: String(port),
      AUTH_URL: options.authUrl ?? system.processes.auth.grpcUrl,
      INVOICE_URL: system.processes.invoice.grpcUrl,
      PAYOUT_URL: system.processes.payout.grpcUrl,
      NOTIFIER_URL: system.processes.notifier.grpcUrl,
      NATS_URL: testNatsUrl(),
      EVENT_NAMESPACE: system.namespace,
      // The launcher's keys: this replica applies only revocations the system's auth signed.
      EVENT_VERIFY_KEYS: systemEventKeys(system).verifyKeys,
      LOG_LEVEL: 'silent',
      ...options.env,
    },
    stdio: 'ignore',
  });
  const stop = async () => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill('SIGTERM');
    await exited;
  };
  for (let i = 0; i < 150; i++) {
    const ok = await fetch(`${url}/${options.aliveOnly ? 'healthz' : 'readyz'}`).then((r) => r.status === 200, () => false);
    if (ok) {
      rememberMailbox(url, system.mail); // its sign-ups are emailed by the same notifier
      return { url, process: child, stop };
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  await stop();
  throw new Error('the second gateway did not become ready');
}
