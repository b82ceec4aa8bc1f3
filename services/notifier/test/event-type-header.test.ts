/**
 * docs/architecture.md#webhook-event-type: every delivery carries `webhook-event-type`, and the delivery log records it with
 * the other headers sent. The event types come from the notifier's own table (every type that
 * becomes a webhook), and each sample event is built from its proto message, so an event type
 * added later is checked here without touching this file.
 */
import { randomUUID } from 'node:crypto';
import { create, toJson, type DescMessage, type JsonValue } from '@bufbuild/protobuf';
import { ScalarType } from '@bufbuild/protobuf';
import { timestampFromDate } from '@bufbuild/protobuf/wkt';
import { Webhook } from 'standardwebhooks';
import { EVENT_WEBHOOK_TABLE, isWebhookEventType } from '../src/domain/payloads';
import { eventually, Receiver, startNotifier, type Harness } from './support/harness';

let h: Harness;
let r: Receiver;

beforeAll(async () => {
  h = await startNotifier();
  r = await new Receiver().start();
});
afterAll(async () => {
  await r?.stop();
  await h?.dispose();
});

const WEBHOOK_EVENT_TYPES = Object.keys(EVENT_WEBHOOK_TABLE).filter(isWebhookEventType);

/** A valid event of the message: every field filled with a plausible value for its name and kind. */
function sampleEvent(schema: DescMessage, projectId: string): JsonValue {
  const init: Record<string, unknown> = {};
  for (const field of schema.fields) {
    if (field.fieldKind === 'scalar' && field.scalar === ScalarType.STRING) {
      const name = field.localName;
      init[name] =
        name === 'projectId'
          ? projectId
          : name === 'environment'
            ? 'sandbox'
            : name === 'origin'
              ? 'auto_sweep'
            : /network$/i.test(name)
              ? 'ethereum'
            : /amount/i.test(name)
              ? '1.50000000'
              : /Id$/.test(name)
                ? randomUUID()
                : `${name}-sample`;
    } else if (field.fieldKind === 'scalar') {
      init[field.localName] = field.scalar === ScalarType.BOOL ? true : field.scalar === ScalarType.INT64 || field.scalar === ScalarType.UINT64 ? 1n : 1;
    } else if (field.fieldKind === 'message' && field.message.typeName === 'google.protobuf.Timestamp') {
      init[field.localName] = timestampFromDate(new Date());
    } else if (field.fieldKind === 'enum') {
      init[field.localName] = field.enum.values.find((v) => v.number !== 0)?.number ?? 0;
    }
  }
  return toJson(schema, create(schema, init));
}

test('the table has webhook event types to check (invoice and payout)', () => {
  expect(WEBHOOK_EVENT_TYPES).toEqual(expect.arrayContaining(['invoice.paid', 'invoice.expired', 'payout.completed']));
});

test.each(WEBHOOK_EVENT_TYPES)('%s: the delivery carries webhook-event-type, verifies, and the delivery log shows the header', async (eventType) => {
  const project = h.auth.addProject({ webhookUrl: r.url });
  const schema = EVENT_WEBHOOK_TABLE[eventType].schema;
  const eventId = await h.publish(eventType, sampleEvent(schema, project.id));

  const [req] = await r.waitFor(1, 15_000, (q) => q.headers['webhook-id'] === eventId);
  if (!req) throw new Error('no request');
  expect(req.headers['webhook-event-type']).toBe(eventType);
  expect(() => new Webhook(project.webhookSecret).verify(req.body, req.headers as Record<string, string>)).not.toThrow();

  const deliveryId = await eventually(async () => {
    const rows = await h.sql<{ id: string; status: string }[]>`select id, status from webhook_deliveries where event_id = ${eventId}`;
    return rows[0]?.status === 'succeeded' ? rows[0].id : undefined;
  });
  const logged = await h.client.getWebhookDelivery({ projectId: project.id, deliveryId });
  expect(logged.delivery?.eventType).toBe(eventType);
  expect(logged.attempts[0]?.requestHeaders['webhook-event-type']).toBe(eventType);
});
