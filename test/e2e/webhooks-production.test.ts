/**
 * Issue 5, point 7, end to end, on a system where private destinations are refused
 * (WEBHOOK_ALLOW_PRIVATE_DESTINATIONS=false, what APP_ENV=production defaults to): a webhook URL
 * pointing at loopback or the cloud metadata address is refused with a clear error when a project
 * is configured (auth), and at delivery time (notifier) with a failed attempt that says why.
 *
 * No request ever goes to 169.254.169.254: it is only ever checked, never called.
 */
import postgres from 'postgres';
import { bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { createAndPay, deleteStreams, deliveryLog, eventually, Receiver } from './webhooks.support';

let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;
let db: postgres.Sql;

beforeAll(async () => {
  receiver = await new Receiver().start();
  system = await bootSystem({
    env: { WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'false', WEBHOOK_RETRY_SCHEDULE: '100ms,100ms', PASSWORD_HASH_MEMORY_KIB: '1024' },
  });
  api = new GatewayClient(system.gatewayUrl);
  db = postgres(system.database.url, { max: 1, onnotice: () => undefined });
}, 120_000);

afterAll(async () => {
  await db?.end();
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
});

test('configuring a loopback or metadata webhook URL is refused with a clear error on the project', async () => {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox');

  const metadata = await api.patch(`/api/merchant/projects/${project.id}`, { webhookUrl: 'http://169.254.169.254/' }, { headers: bearer(merchant.token) });
  const problem = expectProblem(metadata, 400, 'validation_failed');
  expect(problem.errors).toEqual([{ field: 'webhookUrl', message: expect.stringMatching(/169\.254\.169\.254 is in the link-local \/ cloud metadata range/) }]);

  const loopback = await api.post(
    '/api/merchant/projects',
    { name: 'Local', environment: 'sandbox', webhookUrl: 'http://127.0.0.1:8080/hooks' },
    { headers: bearer(merchant.token) },
  );
  expect(expectProblem(loopback, 400, 'validation_failed').errors).toEqual([
    { field: 'webhookUrl', message: expect.stringMatching(/127\.0\.0\.1 is in the loopback range/) },
  ]);

  const unchanged = await api.get(`/api/merchant/projects/${project.id}`, { headers: bearer(merchant.token) });
  expect(unchanged.body.webhookUrl).toBeNull();
});

test('a private destination that got past configuration (as after DNS rebinding) is refused at delivery time: failed attempts, nothing sent', async () => {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox');
  // What a rebinding name would resolve to at delivery time; set directly, since auth refuses it.
  await db`update auth.projects set webhook_url = ${receiver.url} where id = ${project.id}`;

  const paid = await createAndPay(api, project.key);
  const log = await eventually(async () => {
    const res = await deliveryLog(api, merchant, project.id);
    return res.items[0]?.status === 'failed' ? res : undefined;
  });
  expect(log.items).toHaveLength(1);
  expect(JSON.parse(log.items[0]?.payload ?? '{}')).toMatchObject({ invoiceId: paid.id });
  expect(log.endpoint).toEqual({ url: receiver.url, lastSuccessAt: null, consecutiveFailures: 3 });

  const delivery = await api.get(`/api/merchant/projects/${project.id}/webhook-deliveries/${log.items[0]?.id}`, { headers: bearer(merchant.token) });
  expect(delivery.body.attempts).toHaveLength(3);
  for (const attempt of delivery.body.attempts as Array<{ responseStatus: number | null; error: string | null }>) {
    expect(attempt.responseStatus).toBeNull();
    expect(attempt.error).toBe(
      'destination refused (blocked_address): 127.0.0.1 is in the loopback range 127.0.0.0/8: webhook URLs must point to a public address',
    );
  }
  expect(receiver.requests).toEqual([]);
});
