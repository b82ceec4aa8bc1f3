/**
 * Test events (`coinvoice trigger`): one for every webhook type of the catalogue, each body valid
 * against the schema the OpenAPI document publishes for real events of that type, with its keys
 * in the same order, and its sample values marked as a test. The service-level delivery (signed,
 * verified with the stock standardwebhooks package) is in test/e2e/test-events.test.ts.
 */
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { WEBHOOK_EVENTS } from '../../../gateway/src/schemas/webhook-events';
import { TEST_EVENT_TYPES as GATEWAY_TEST_EVENT_TYPES } from '../../../gateway/src/schemas/webhooks';
import { isWebhookEventType } from '../src/domain/payloads';
import { PING_TEST_EVENT_TYPE, TEST_EVENT_ORDER_ID, TEST_EVENT_SUBJECT_ID, TEST_EVENT_TYPES, testEventBody } from '../src/domain/test-events';

FormatRegistry.Set('uuid', (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v));
FormatRegistry.Set('date-time', (v) => /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/.test(v));

const project = { projectId: '5b0f7d1e-3c9a-4e44-9d7c-2f3a1b6c8e90', environment: 'live' as const };
const at = new Date('2026-11-25T09:00:00.123Z');
const catalogue = Object.keys(WEBHOOK_EVENTS);

test('every event of the catalogue has a test event, and the gateway accepts exactly the notifier’s types', () => {
  expect(TEST_EVENT_TYPES).toEqual([PING_TEST_EVENT_TYPE, ...catalogue]);
  expect(GATEWAY_TEST_EVENT_TYPES).toEqual([...TEST_EVENT_TYPES]);
});

test.each(catalogue)('a test %s has the documented body of a real one, with test values', (eventType) => {
  if (!isWebhookEventType(eventType)) throw new Error(`${eventType} is no webhook`);
  const text = testEventBody(eventType, project, 'not-in-the-body', at);
  const body = JSON.parse(text) as Record<string, unknown>;
  const schema = WEBHOOK_EVENTS[eventType]!.body;
  expect([...Value.Errors(schema, body)].map((e) => `${e.path} ${e.message}`)).toEqual([]);
  // Every documented field, in the documented order (the schemas forbid any other).
  expect(Object.keys(body)).toEqual(Object.keys(schema.properties as Record<string, unknown>));
  expect(body.invoiceId ?? body.payoutId).toBe(TEST_EVENT_SUBJECT_ID);
  if ('orderId' in body) expect(body.orderId).toBe(TEST_EVENT_ORDER_ID);
  expect(body).toMatchObject({ environment: 'live', occurredAt: at.toISOString() });
  expect(testEventBody(eventType, { ...project, environment: 'sandbox' }, 'x', at)).toContain('"environment":"sandbox"');
});

test('webhook.test stays the ping it was', () => {
  expect(JSON.parse(testEventBody(PING_TEST_EVENT_TYPE, project, 'e1', at))).toEqual({
    eventId: 'e1',
    projectId: project.projectId,
    message: 'A test event from coinvoice',
    sentAt: at.toISOString(),
  });
});
