/** The webhook delivery log of the dashboard (/api/merchant/projects/{id}/webhook-deliveries). */
import { Type, type Static } from '@sinclair/typebox';
import { CursorParam, LimitParam, patternString, Timestamp, Uuid } from './common';
import { WEBHOOK_EVENTS } from './webhook-events';

export const DeliveryStatusName = Type.Union([Type.Literal('pending'), Type.Literal('succeeded'), Type.Literal('failed')], {
  description: 'pending: not delivered yet (nextAttemptAt says when it is tried); succeeded: a 2xx came; failed: every retry failed',
});

export const WebhookDeliverySchema = Type.Object(
  {
    id: Uuid,
    eventId: Type.String({ description: 'The event id: the webhook-id header, identical on every attempt and redelivery' }),
    eventType: Type.String({ description: 'e.g. invoice.paid' }),
    url: Type.String({ description: 'Where the delivery is (or was) sent' }),
    status: DeliveryStatusName,
    attemptCount: Type.Integer(),
    nextAttemptAt: Type.Union([Timestamp, Type.Null()], { description: 'When the next attempt is due; null unless pending' }),
    createdAt: Timestamp,
    redeliveryOf: Type.Union([Uuid, Type.Null()], { description: 'The delivery this one re-sends; null for an original delivery' }),
    deliveredBy: Type.Union([Uuid, Type.Null()], {
      description: 'The delivery of the same event that delivered it when that was another one (a redelivery that succeeded closes its original as succeeded); null otherwise',
    }),
    payload: Type.String({ description: 'The exact JSON body sent' }),
    lastResponseStatus: Type.Union([Type.Integer(), Type.Null()], { description: 'HTTP status of the latest attempt; null before one or without a response' }),
  },
  { $id: 'WebhookDelivery' },
);

export const WebhookAttemptSchema = Type.Object(
  {
    attemptNumber: Type.Integer({ description: '1-based' }),
    attemptedAt: Timestamp,
    requestHeaders: Type.Record(Type.String(), Type.String(), { description: 'The headers sent, webhook-id, webhook-timestamp and webhook-signature included' }),
    requestBody: Type.String({ description: 'The exact body sent' }),
    responseStatus: Type.Union([Type.Integer(), Type.Null()], { description: 'null on timeout, connection error or refused destination' }),
    responseBodyExcerpt: Type.String({ description: 'The first bytes of the response body' }),
    durationMs: Type.Integer(),
    error: Type.Union([Type.String(), Type.Null()], { description: 'Transport error, timeout or refused destination; null when a response came' }),
    detailsRemovedAt: Type.Union([Type.String({ format: 'date-time' }), Type.Null()], {
      description: 'When retention removed requestHeaders, requestBody and responseBodyExcerpt (logRetentionDays after the attempt; they are then empty); null while kept',
    }),
  },
  { $id: 'WebhookAttempt' },
);

export const WebhookDeliveryWithAttemptsSchema = Type.Object({
  ...WebhookDeliverySchema.properties,
  attempts: Type.Array(WebhookAttemptSchema, { description: 'Every attempt, oldest first' }),
});

export const EndpointHealthSchema = Type.Object(
  {
    url: Type.Union([Type.String(), Type.Null()], { description: 'The project’s current webhook URL; null when none is configured' }),
    lastSuccessAt: Type.Union([Timestamp, Type.Null()], { description: 'Last 2xx answer; null if none yet' }),
    consecutiveFailures: Type.Integer({ description: 'Failed attempts since the last success' }),
  },
  { $id: 'WebhookEndpointHealth' },
);

export const WebhookDeliveryListQuery = Type.Object(
  {
    status: Type.Optional(DeliveryStatusName),
    eventType: Type.Optional(patternString('^[a-z][a-z0-9_]*(\\.[a-z][a-z0-9_]*)+$', 'must be an event type such as invoice.paid', { maxLength: 100, description: 'e.g. invoice.paid' })),
    invoiceId: Type.Optional(Type.String({ format: 'uuid', description: 'Only deliveries about this invoice (their body’s invoiceId)' })),
    limit: LimitParam,
    cursor: CursorParam,
  },
  { additionalProperties: false },
);
export type WebhookDeliveryListQuery = Static<typeof WebhookDeliveryListQuery>;

export const WebhookDeliveryListSchema = Type.Object({
  items: Type.Array(WebhookDeliverySchema, { description: 'Newest first' }),
  nextCursor: Type.Union([Type.String(), Type.Null()], { description: 'null on the last page' }),
  endpoint: EndpointHealthSchema,
  logRetentionDays: Type.Integer({ minimum: 1, description: 'How long attempts keep their request and response (WEBHOOK_LOG_RETENTION_DAYS); after it only the summary stays' }),
});

export const DeliveryParams = Type.Object({ id: Uuid, deliveryId: Uuid }, { additionalProperties: false });

/** The ping a test event is when no type is asked for: not in the catalogue, its own body. */
export const PING_TEST_EVENT_TYPE = 'webhook.test';
/** Every type a test event can have: the ping, then each event of the catalogue. */
export const TEST_EVENT_TYPES = [PING_TEST_EVENT_TYPE, ...Object.keys(WEBHOOK_EVENTS)];

export const WebhookTestBody = Type.Optional(
  Type.Object(
    {
      eventType: Type.Optional(
        Type.Union(TEST_EVENT_TYPES.map((t) => Type.Literal(t)), {
          description:
            'webhook.test (the default): a ping {eventId, projectId, message, sentAt}; any event of the catalogue: the body of a real event of that type holding test sample values (invoiceId/payoutId 00000000-0000-4000-8000-000000000000, orderId "coinvoice-test-event")',
        }),
      ),
    },
    { additionalProperties: false },
  ),
);
export type WebhookTestBody = Static<typeof WebhookTestBody>;

export const TestEventSchema = Type.Object(
  {
    eventId: Type.String({ description: 'The webhook-id header of the test event' }),
    eventType: Type.String({ description: 'The webhook-event-type header' }),
    payload: Type.String({ description: 'The exact JSON body' }),
    // The delivery's fields without its $id: an OpenAPI document may define an $id only once.
    delivery: Type.Union([Type.Object(WebhookDeliverySchema.properties), Type.Null()], {
      description: 'The delivery to the project’s webhook URL (it appears in the delivery log); null when the project has none: the event then reaches `coinvoice listen` only',
    }),
  },
  { $id: 'TestEvent' },
);
