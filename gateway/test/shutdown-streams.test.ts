/**
 * SIGTERM while an event stream request is still being let in (its API key being checked): the
 * request is answered 503 rather than opening its stream after the close began — which held the
 * gateway until the grace period's hard exit (12 s, exit code 1; a second review). Auth and the
 * notifier are gRPC stand-ins; auth answers the key check a second late.
 */
import type { ChildProcess } from 'node:child_process';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { generateApiKey } from '@coinvoice/domain/credentials/api-keys';
import { startStandInServer, type StandInServer } from '../../test/support/grpc-stand-in';
import { startGatewayProcess } from '../../test/support/gateway-process';

let auth: StandInServer;
let notifier: StandInServer;
let gateway: ChildProcess;
let port: number;
let keyChecks = 0;

beforeAll(async () => {
  auth = await startStandInServer((router) => {
    router.rpc(AuthService.method.verifyApiKey, async () => {
      keyChecks++;
      await new Promise((r) => setTimeout(r, 1_000));
      return { keyId: '00000000-0000-4000-8000-000000000001', projectId: '00000000-0000-4000-8000-000000000002', projectName: 'P', environment: Environment.SANDBOX, merchantId: '00000000-0000-4000-8000-000000000003', invoiceLifetimeMinutes: 60, paymentTolerancePercent: '0' };
    });
    router.rpc(AuthService.method.listSessionRevocations, async () => ({ revocations: [] }));
  });
  notifier = await startStandInServer((router) => {
    router.rpc(NotifierService.method.listProjectEvents, async () => ({ events: [], cursor: '5' }));
  });
  ({ process: gateway, port } = await startGatewayProcess({ AUTH_URL: auth.url, NOTIFIER_URL: notifier.url }));
}, 30_000);

afterAll(async () => {
  if (gateway && gateway.exitCode === null && gateway.signalCode === null) gateway.kill('SIGKILL');
  await auth?.stop();
  await notifier?.stop();
});

test('a stream request let in after SIGTERM is answered 503 and the gateway exits at once, cleanly', async () => {
  const answer = fetch(`http://127.0.0.1:${port}/api/events/stream`, { headers: { 'x-api-key': generateApiKey('sandbox') } });
  while (keyChecks === 0) await new Promise((r) => setTimeout(r, 20));
  const exited = new Promise<{ code: number | null; at: number }>((resolve) => gateway.once('exit', (code) => resolve({ code, at: Date.now() })));
  const stopAt = Date.now();
  gateway.kill('SIGTERM');
  const res = await answer;
  expect(res.status).toBe(503);
  expect(await res.json()).toMatchObject({ code: 'service_unavailable' });
  const { code, at } = await exited;
  expect(code).toBe(0);
  expect(at - stopAt).toBeLessThan(4_000);
}, 30_000);
