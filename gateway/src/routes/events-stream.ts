/**
 * GET /api/events/stream (x-api-key): the project's webhook events as they happen, as
 * server-sent events, each with the headers of a real delivery signed with the project's secret
 * (the notifier's ListProjectEvents), so `coinvoice listen` can forward it to a local URL that a
 * webhook could not reach. Starts at "now"; a reconnect with Last-Event-ID resumes after it.
 *
 *   event: ready     data: {"projectId": "…"}
 *   event: webhook   data: {"eventId", "eventType", "headers": {…}, "body": "…"}   id: <cursor>
 *   : keep-alive     (a comment every 15 s, so proxies keep the connection open)
 */
import { errorFacts } from '@coinvoice/runtime';
import type { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type { Client } from '@connectrpc/connect';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { apiKeyPrincipal, type authHooks } from '../auth/hooks';

export interface EventStreamRouteDeps {
  notifier: Client<typeof NotifierService>;
  hooks: ReturnType<typeof authHooks>;
  /** How often the notifier is asked for new events (default 500 ms). */
  pollIntervalMs?: number;
}

const KEEP_ALIVE_MS = 15_000;
const CURSOR = /^(0|[1-9]\d{0,17})$/;

export const StreamedWebhookSchema = Type.Object(
  {
    eventId: Type.String({ description: 'The webhook-id header' }),
    eventType: Type.String({ description: 'e.g. invoice.paid: the webhook-event-type header' }),
    headers: Type.Record(Type.String(), Type.String(), { description: 'Every header of a delivery, signed now: send them with the body as is' }),
    body: Type.String({ description: 'The exact JSON body a delivery sends (the signature covers these bytes)' }),
  },
  { $id: 'StreamedWebhook', description: 'The data of each `webhook` event of the stream' },
);

export function eventStreamRoutes(app: FastifyInstance, { notifier, hooks, pollIntervalMs = 500 }: EventStreamRouteDeps): void {
  const streams = new Set<() => void>();
  // Open streams would hold the server's close until their clients leave: end them first.
  app.addHook('preClose', async () => {
    for (const end of streams) end();
  });

  app.get('/api/events/stream', {
    schema: {
      tags: ['events'],
      summary: 'The project’s webhook events as they happen (server-sent events), each signed like a delivery: what `coinvoice listen` forwards',
      security: [{ apiKeyAuth: [] }],
      headers: Type.Object({
        'last-event-id': Type.Optional(Type.String({ pattern: CURSOR.source, description: 'Resume after this event id (the SSE reconnection header)' })),
      }),
      response: {
        200: {
          description: 'text/event-stream: `ready`, then one `webhook` event per project event; comments keep the connection alive',
          content: { 'text/event-stream': { schema: StreamedWebhookSchema } },
        },
      },
    },
    onRequest: hooks.apiKey,
    handler: async (req, reply) => {
      const { projectId } = apiKeyPrincipal(req);
      const resume = req.headers['last-event-id'];
      let cursor = typeof resume === 'string' && CURSOR.test(resume) ? resume : (await notifier.listProjectEvents({ projectId })).cursor;

      reply.hijack();
      const res = reply.raw;
      res.writeHead(200, {
        'content-type': 'text/event-stream; charset=utf-8',
        'cache-control': 'no-store',
        'x-accel-buffering': 'no',
        'x-request-id': req.id,
      });
      res.write(`event: ready\ndata: ${JSON.stringify({ projectId })}\n\n`);

      let open = true;
      let wake: (() => void) | undefined;
      const end = () => {
        open = false;
        wake?.();
      };
      streams.add(end);
      req.raw.once('close', end);
      let lastWrite = Date.now();
      try {
        while (open) {
          try {
            const page = await notifier.listProjectEvents({ projectId, cursor, pageSize: 100 });
            for (const e of page.events) {
              res.write(`id: ${page.cursor}\nevent: webhook\ndata: ${JSON.stringify({ eventId: e.eventId, eventType: e.eventType, headers: e.headers, body: e.body })}\n\n`);
            }
            if (page.events.length > 0) lastWrite = Date.now();
            cursor = page.cursor;
          } catch (err) {
            // The notifier restarting or briefly unreachable: the next round tries again.
            req.log.warn({ err: errorFacts(err) }, 'event stream: listing project events failed; retrying');
          }
          if (Date.now() - lastWrite >= KEEP_ALIVE_MS) {
            res.write(': keep-alive\n\n');
            lastWrite = Date.now();
          }
          if (open) await new Promise<void>((resolve) => {
            const timer = setTimeout(resolve, pollIntervalMs);
            wake = () => {
              clearTimeout(timer);
              resolve();
            };
          });
        }
      } finally {
        streams.delete(end);
        res.end();
      }
    },
  });
}
