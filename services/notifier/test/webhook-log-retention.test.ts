/**
 * Retention of the webhook log (docs/accounting.md): an attempt older than
 * WEBHOOK_LOG_RETENTION_DAYS loses its request headers, body and response excerpt; its summary
 * (time, URL, status code, duration, error) stays, and a newer attempt keeps everything.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson } from '@bufbuild/protobuf';
import { timestampDate, timestampFromDate } from '@bufbuild/protobuf/wkt';
import { createLogger } from '@coinvoice/runtime';
import { InvoicePaidSchema } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/events_pb';
import { webhookLogRetention } from '../src/webhook-log-retention';
import { eventually, Receiver, startNotifier, type Harness } from './support/harness';

let h: Harness;
let receiver: Receiver;

beforeAll(async () => {
  h = await startNotifier({ WEBHOOK_RETRY_SCHEDULE: '100ms', WEBHOOK_LOG_RETENTION_DAYS: '7' });
  const statuses = [500, 200];
  receiver = await new Receiver((_req, i) => ({ status: statuses[i % 2] ?? 200, body: `answer ${i + 1}` })).start();
});
afterAll(async () => {
  await receiver?.stop();
  await h?.dispose();
});

function invoicePaid(projectId: string) {
  return toJson(
    InvoicePaidSchema,
    create(InvoicePaidSchema, {
      invoiceId: randomUUID(),
      projectId,
      status: 'Paid',
      amount: '0.001',
      currency: 'BTC',
      environment: 'sandbox',
      transactionHash: 'ab'.repeat(32),
      paidAt: timestampFromDate(new Date()),
    }),
  );
}

test('attempts older than the retention lose their bodies and headers, keep their summary; newer ones keep everything', async () => {
  const project = h.auth.addProject({ webhookUrl: receiver.url });
  await h.publish('invoice.paid', invoicePaid(project.id));
  const [delivery] = await eventually(async () => {
    const rows = await h.sql<{ id: string; status: string }[]>`select id, status from webhook_deliveries where project_id = ${project.id}`;
    return rows[0]?.status === 'succeeded' ? rows : undefined;
  });
  const deliveryId = delivery!.id;
  // The first attempt (500) is 8 days old, the second (200) 6 days: only the first is past 7 days.
  await h.sql`update webhook_attempts set attempted_at = now() - interval '8 days' where delivery_id = ${deliveryId} and attempt_number = 1`;
  await h.sql`update webhook_attempts set attempted_at = now() - interval '6 days' where delivery_id = ${deliveryId} and attempt_number = 2`;

  const job = webhookLogRetention({ sql: h.sql, logger: createLogger({ service: 'test', level: 'silent' }), retentionDays: 7 });
  expect(await job.processBatch()).toBe(1);
  expect(await job.processBatch()).toBe(0);

  const got = await h.client.getWebhookDelivery({ projectId: project.id, deliveryId });
  const [old, recent] = got.attempts;
  expect(old).toMatchObject({ attemptNumber: 1, responseStatus: 500, requestBody: '', responseBodyExcerpt: '', requestHeaders: {} });
  expect(old?.detailsRemovedAt).toBeDefined();
  expect(timestampDate(old!.detailsRemovedAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);
  expect(old?.durationMs).toBeGreaterThanOrEqual(0);
  expect(recent).toMatchObject({ attemptNumber: 2, responseStatus: 200, responseBodyExcerpt: 'answer 2' });
  expect(recent?.requestBody).toContain('"status":"Paid"');
  expect(recent?.requestHeaders['webhook-signature']).toMatch(/^v1,/);
  expect(recent?.detailsRemovedAt).toBeUndefined();
  // The delivery itself (what Redeliver sends again) is untouched.
  expect(got.delivery?.payload).toContain('"status":"Paid"');
});

test('the configured retention is told with the delivery log (the dashboard says it)', async () => {
  const project = h.auth.addProject({ webhookUrl: receiver.url });
  expect((await h.client.listWebhookDeliveries({ projectId: project.id })).logRetentionDays).toBe(7);
});
