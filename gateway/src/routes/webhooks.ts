/**
 * The dashboard's webhook delivery log (Bearer): every delivery of a project with the endpoint's
 * health, one delivery with every attempt exactly as sent, manual redelivery and a signed test
 * event ("send a test event"). Ownership is
 * checked first with auth (another merchant's project answers 404 as if it did not exist); the
 * notifier then answers for that project only.
 */
import { timestampDate } from '@bufbuild/protobuf/wkt';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import {
  DeliveryStatus,
  type EndpointHealth,
  type NotifierService,
  type WebhookAttempt,
  type WebhookDelivery,
} from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type { Client } from '@connectrpc/connect';
import type { FastifyInstance } from 'fastify';
import { merchantPrincipal, type authHooks } from '../auth/hooks';
import { isoTime, isoTimeOrNull, publicNames } from '../json';
import { IdParams, parseLimit } from '../schemas/common';
import {
  DeliveryParams,
  TestEventSchema,
  WebhookDeliveryListQuery,
  WebhookDeliveryListSchema,
  WebhookDeliverySchema,
  WebhookDeliveryWithAttemptsSchema,
  WebhookTestBody,
} from '../schemas/webhooks';

export interface WebhookRouteDeps {
  auth: Client<typeof AuthService>;
  notifier: Client<typeof NotifierService>;
  hooks: ReturnType<typeof authHooks>;
}

const deliveryStatuses = publicNames('delivery status', [
  [DeliveryStatus.PENDING, 'pending'],
  [DeliveryStatus.SUCCEEDED, 'succeeded'],
  [DeliveryStatus.FAILED, 'failed'],
] as const);

export function deliveryJson(d: WebhookDelivery | undefined) {
  if (!d) throw new Error('delivery missing from a service response');
  const status = deliveryStatuses.name(d.status);
  return {
    id: d.id,
    eventId: d.eventId,
    eventType: d.eventType,
    url: d.url,
    status,
    attemptCount: d.attemptCount,
    nextAttemptAt: status === 'pending' ? isoTimeOrNull(d.nextAttemptAt) : null,
    createdAt: isoTime(d.createdAt),
    redeliveryOf: d.redeliveryOf ?? null,
    deliveredBy: d.deliveredBy ?? null,
    payload: d.payload,
    lastResponseStatus: d.lastResponseStatus ?? null,
  };
}

function attemptJson(a: WebhookAttempt) {
  return {
    attemptNumber: a.attemptNumber,
    attemptedAt: isoTime(a.attemptedAt),
    requestHeaders: a.requestHeaders,
    requestBody: a.requestBody,
    responseStatus: a.responseStatus ?? null,
    responseBodyExcerpt: a.responseBodyExcerpt,
    durationMs: a.durationMs,
    error: a.error ?? null,
    detailsRemovedAt: isoTimeOrNull(a.detailsRemovedAt),
  };
}

function endpointJson(e: EndpointHealth | undefined) {
  return {
    url: e?.url ? e.url : null,
    lastSuccessAt: e?.lastSuccessAt ? timestampDate(e.lastSuccessAt).toISOString() : null,
    consecutiveFailures: e?.consecutiveFailures ?? 0,
  };
}

const bearer = [{ bearerAuth: [] }];

export function webhookRoutes(app: FastifyInstance, { auth, notifier, hooks }: WebhookRouteDeps): void {
  app.get<{ Params: { id: string }; Querystring: WebhookDeliveryListQuery }>('/api/merchant/projects/:id/webhook-deliveries', {
    schema: {
      tags: ['dashboard'],
      summary: 'The project’s webhook delivery log, newest first, with the endpoint’s health',
      security: bearer,
      params: IdParams,
      querystring: WebhookDeliveryListQuery,
      response: { 200: WebhookDeliveryListSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      // Ownership first: another merchant's project answers 404 as if it did not exist.
      await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      const res = await notifier.listWebhookDeliveries({
        projectId: req.params.id,
        status: req.query.status ? deliveryStatuses.value(req.query.status) : undefined,
        eventType: req.query.eventType,
        invoiceId: req.query.invoiceId,
        pageSize: parseLimit(req.query.limit),
        cursor: req.query.cursor ?? '',
      });
      return { items: res.deliveries.map(deliveryJson), nextCursor: res.nextCursor || null, endpoint: endpointJson(res.endpointHealth), logRetentionDays: res.logRetentionDays };
    },
  });

  app.get<{ Params: { id: string; deliveryId: string } }>('/api/merchant/projects/:id/webhook-deliveries/:deliveryId', {
    schema: {
      tags: ['dashboard'],
      summary: 'One webhook delivery with every attempt, exactly as sent',
      security: bearer,
      params: DeliveryParams,
      response: { 200: WebhookDeliveryWithAttemptsSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      const res = await notifier.getWebhookDelivery({ projectId: req.params.id, deliveryId: req.params.deliveryId });
      return { ...deliveryJson(res.delivery), attempts: res.attempts.map(attemptJson) };
    },
  });

  app.post<{ Params: { id: string; deliveryId: string } }>('/api/merchant/projects/:id/webhook-deliveries/:deliveryId/redeliver', {
    schema: {
      tags: ['dashboard'],
      summary: 'Send the delivery’s event again (same webhook-id and body) to the current webhook URL, as a new delivery',
      security: bearer,
      params: DeliveryParams,
      response: { 201: WebhookDeliverySchema },
    },
    onRequest: hooks.merchant,
    handler: async (req, reply) => {
      await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      const res = await notifier.redeliverWebhook({ projectId: req.params.id, deliveryId: req.params.deliveryId });
      return reply.code(201).send(deliveryJson(res.delivery));
    },
  });

  app.post<{ Params: { id: string }; Body: WebhookTestBody }>('/api/merchant/projects/:id/webhook-test', {
    schema: {
      tags: ['dashboard'],
      summary:
        'Send a signed test event (webhook.test, or any event of the catalogue with test sample values) to the project’s webhook URL and its event stream; it appears in the delivery log',
      security: bearer,
      params: IdParams,
      body: WebhookTestBody,
      response: { 201: TestEventSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req, reply) => {
      await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      const res = await notifier.sendTestWebhook({ projectId: req.params.id, eventType: req.body?.eventType ?? '' });
      return reply.code(201).send({ eventId: res.eventId, eventType: res.eventType, payload: res.body, delivery: res.delivery ? deliveryJson(res.delivery) : null });
    },
  });
}
