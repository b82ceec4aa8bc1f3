/**
 * The delivery worker alone, on real Postgres, with a sender that records instead of connecting:
 * proves that a refused destination (cloud metadata, loopback, a name resolving to them) never
 * reaches the HTTP client at all, while a public one does. No traffic leaves this process.
 */
import { randomUUID } from 'node:crypto';
import { createDb, createLogger, migrateService, type Sql } from '@coinvoice/runtime';
import { createTestDatabase, testNatsUrl, type TestDatabase } from '../../../test/support/infra';
import { parseRetrySchedule } from '../src/domain/retry-schedule';
import { generateWebhookSecret } from '../src/domain/signing';
import { createSsrfGuard, type HostResolver } from '@coinvoice/domain/ssrf';
import type { HttpSender } from '../src/delivery/http-sender';
import { DeliveryWorker } from '../src/delivery/worker';
import { notifierService } from '../src/server';
import { eventually } from './support/receiver';

let database: TestDatabase;
let sql: Sql;
const secret = generateWebhookSecret();
const sent: string[] = [];
const recordingSender: HttpSender = {
  async post({ verdict }) {
    sent.push(`${verdict.url.href} via ${verdict.addresses.map((a) => a.address).join(',')}`);
    return { kind: 'response', status: 204, bodyExcerpt: '', durationMs: 1 };
  },
};
// Fake DNS: one public name, one that rebinds to the metadata service.
const resolver: HostResolver = async (hostname) => {
  if (hostname === 'hooks.example.com') return [{ address: '93.184.216.34', family: 4 }];
  if (hostname === 'rebind.example.com') return [{ address: '169.254.169.254', family: 4 }];
  throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
};

let worker: DeliveryWorker;
const webhookUrls = new Map<string, string>();

beforeAll(async () => {
  database = await createTestDatabase('cvnotifierw');
  await migrateService(notifierService, { DATABASE_URL: database.url, NATS_URL: testNatsUrl(), LOG_LEVEL: 'silent' });
  sql = createDb({ url: database.url, schema: 'notifier', max: 4 });
  worker = new DeliveryWorker({
    sql,
    logger: createLogger({ service: 'notifier', level: 'silent' }),
    // Each delivery below is its project's only one, to the project's current webhook URL.
    projects: { get: async (projectId) => ({ projectId, environment: 'sandbox', webhookUrl: webhookUrls.get(projectId), webhookSecret: secret, previousWebhookSecrets: [], merchantEmail: 'm@example.com' }) },
    guard: createSsrfGuard({ mode: 'production', resolve: resolver }),
    sender: recordingSender,
    schedule: parseRetrySchedule('20ms'),
    timeoutMs: 1000,
    maxConcurrency: 4,
    maxPerProject: 2,
    maxPerHost: 2,
    pollIntervalMs: 50,
  });
  await worker.start();
});

afterAll(async () => {
  await worker?.stop();
  await sql?.end({ timeout: 5 });
  await database?.drop();
});

async function deliver(url: string) {
  const id = randomUUID();
  const projectId = randomUUID();
  webhookUrls.set(projectId, url);
  await sql`
    insert into webhook_deliveries (id, project_id, event_id, event_type, url, body, next_attempt_at)
    values (${id}, ${projectId}, ${randomUUID()}, 'invoice.paid', ${url}, '{}', now())`;
  worker.wake();
  return eventually(async () => {
    const [row] = await sql<{ status: string }[]>`select status from webhook_deliveries where id = ${id}`;
    if (row?.status === 'pending') return undefined;
    const attempts = await sql<{ error: string | null; response_status: number | null }[]>`
      select error, response_status from webhook_attempts where delivery_id = ${id} order by attempt_number`;
    return { status: row?.status, attempts };
  });
}

test.each([
  ['http://169.254.169.254/latest/meta-data/', 'destination refused (blocked_address): 169.254.169.254 is in the link-local / cloud metadata range 169.254.0.0/16'],
  ['http://127.0.0.1:8080/hook', 'destination refused (blocked_address): 127.0.0.1 is in the loopback range 127.0.0.0/8'],
  ['http://[::ffff:169.254.169.254]/', 'destination refused (blocked_address): ::ffff:a9fe:a9fe is in the link-local / cloud metadata range 169.254.0.0/16, as IPv4-mapped'],
  ['https://rebind.example.com/hook', 'destination refused (blocked_address): rebind.example.com resolves to an address that is in the link-local'],
  ['http://localhost:3000/', 'destination refused (blocked_host_name): localhost is an internal host name'],
])('%s is refused before any connection', async (url, error) => {
  const before = sent.length;
  const result = await deliver(url);
  expect(result.status).toBe('failed');
  expect(result.attempts).toHaveLength(2);
  for (const attempt of result.attempts) {
    expect(attempt.response_status).toBeNull();
    expect(attempt.error).toContain(error);
  }
  expect(sent.length).toBe(before);
});

test('a public destination is sent, to the vetted address only', async () => {
  const result = await deliver('https://hooks.example.com/hook');
  expect(result).toEqual({ status: 'succeeded', attempts: [{ error: null, response_status: 204 }] });
  expect(sent.at(-1)).toBe('https://hooks.example.com/hook via 93.184.216.34');
});
