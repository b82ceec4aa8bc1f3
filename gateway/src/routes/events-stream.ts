/**
 * GET /api/events/stream: the project's webhook events as they happen, as server-sent events,
 * each with the headers of a real delivery signed with the project's secret (the notifier's
 * ListProjectEvents), so `coinvoice listen` can forward it to a local URL that a webhook could not
 * reach. Starts at "now"; a reconnect with Last-Event-ID resumes after it. Every event carries its
 * own id, `ready` too (where the stream started): a connection lost in the middle of a page, or
 * before the first event, resumes exactly where its client stopped reading. Authenticated by the
 * project's API key, or by a dashboard session naming one of its merchant's projects.
 *
 *   event: ready     data: {"projectId": "…"}                                       id: <cursor>
 *   event: webhook   data: {"eventId", "eventType", "headers": {…}, "body": "…"}   id: <cursor>
 *   : keep-alive     (a comment every 15 s, so proxies keep the connection open)
 *
 * A stream lives only as long as its credential: it is closed within a second of its key's
 * revocation or its session's end (logout, password change), pushed over NATS, and its credential
 * is checked again every round in case a revocation was missed. Each API key (each merchant's
 * sessions) may hold EVENT_STREAMS_PER_KEY streams open per gateway replica, each merchant
 * EVENT_STREAMS_PER_MERCHANT; one more is 429. A stream ends when its client leaves — however early
 * — and writes a page only once the previous one was read (docs/webhook-delivery.md#event-streams-follow-their-credential).
 */
import { hashApiKey } from '@coinvoice/domain/credentials/api-keys';
import { EVENT_STREAM_CURSOR_PATTERN, parseEventStreamCursor } from '@coinvoice/domain/event-stream-cursor';
import { errorFacts } from '@coinvoice/runtime';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import type { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import type { Client } from '@connectrpc/connect';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { API_KEY_HEADER, type ApiKeyVerifier } from '../auth/api-keys';
import type { authHooks } from '../auth/hooks';
import type { SessionVerifier } from '../auth/sessions';
import { HttpProblem } from '../problem';
import { patternString, Uuid } from '../schemas/common';

export interface EventStreamRouteDeps {
  auth: Client<typeof AuthService>;
  notifier: Client<typeof NotifierService>;
  hooks: ReturnType<typeof authHooks>;
  /** Their revocations end the streams opened with them. */
  apiKeys: ApiKeyVerifier;
  sessions: SessionVerifier;
  /** Streams one API key (one merchant's sessions) may hold open in this replica. */
  streamsPerKey: number;
  /** Streams one merchant may hold open in this replica, over all its keys and sessions. */
  streamsPerMerchant: number;
  /** How long a client may leave a page unread before its stream ends (default 60 s). */
  slowClientMs?: number;
  /** How often the notifier is asked for new events (default 500 ms). */
  pollIntervalMs?: number;
  /** True once the server began to close (server.ts): no new stream opens then. */
  isClosing: () => boolean;
}

const KEEP_ALIVE_MS = 15_000;
/** What a 429 for one stream too many tells the client to wait: streams end when their clients leave. */
const STREAM_LIMIT_RETRY_AFTER_SECONDS = 10;

export const StreamedWebhookSchema = Type.Object(
  {
    eventId: Type.String({ description: 'The webhook-id header' }),
    eventType: Type.String({ description: 'e.g. invoice.paid: the webhook-event-type header' }),
    headers: Type.Record(Type.String(), Type.String(), { description: 'Every header of a delivery, signed with the time the event was recorded (an old one fails a receiver timestamp check, as a replay does): send them with the body as is' }),
    body: Type.String({ description: 'The exact JSON body a delivery sends (the signature covers these bytes)' }),
  },
  { $id: 'StreamedWebhook', description: 'The data of each `webhook` event of the stream' },
);

/** The credential a stream was opened with, and how to tell it still holds. */
interface StreamCredential {
  /** What the per-key limit counts: the API key, or the merchant for a session. */
  holder: string;
  /** The merchant: what the per-merchant limit counts. */
  merchant: string;
  /** The API key's hash (revocations name it); undefined for a session. */
  keyHash?: string;
  /** The session's merchant (session revocations name it); undefined for an API key. */
  merchantId?: string;
  /** False once the key or session is refused (revoked, ended); true while auth cannot be asked. */
  stillAccepted(): Promise<boolean>;
}

interface OpenStream {
  credential: StreamCredential;
  /** Ends the stream (idempotent). */
  end(): void;
}

function header(req: FastifyRequest, name: string): string | undefined {
  const value = req.headers[name];
  return Array.isArray(value) ? value[0] : value;
}

/** Runs a verification again: refused (401) → false; anything else (auth unreachable) keeps the stream. */
async function accepted(verify: () => Promise<unknown>): Promise<boolean> {
  try {
    await verify();
    return true;
  } catch (err) {
    return !(err instanceof HttpProblem && err.status === 401);
  }
}

export function eventStreamRoutes(app: FastifyInstance, deps: EventStreamRouteDeps): void {
  const { auth, notifier, hooks, apiKeys, sessions, streamsPerKey, streamsPerMerchant, pollIntervalMs = 500, slowClientMs = 60_000, isClosing } = deps;
  const streams = new Set<OpenStream>();
  /** Open streams per credential holder (the per-key limit). */
  const openPerHolder = new Map<string, number>();

  const recheck = (stream: OpenStream) => {
    void stream.credential.stillAccepted().then((ok) => {
      if (!ok) stream.end();
    });
  };
  const unsubscribe = [
    // A revoked key's streams end at once; after a gap in the feed (undefined) every key is checked again.
    apiKeys.onRevocation((keyHash) => {
      for (const stream of streams) {
        if (stream.credential.keyHash === undefined) continue;
        if (keyHash === undefined) recheck(stream);
        else if (stream.credential.keyHash === keyHash) stream.end();
      }
    }),
    sessions.onRevocation((merchantId) => {
      for (const stream of streams) if (stream.credential.merchantId === merchantId) recheck(stream);
    }),
  ];
  // Open streams would hold the server's close until their clients leave: end them first (and the
  // handler opens no new one once the close began: isClosing).
  app.addHook('preClose', async () => {
    for (const stream of streams) stream.end();
  });
  app.addHook('onClose', async () => {
    for (const stop of unsubscribe) stop();
  });

  /** The project and credential of the request; counts the stream against its holder's limit (release() undoes it). */
  async function open(req: FastifyRequest<{ Querystring: { projectId?: string } }>): Promise<{ projectId: string; credential: StreamCredential }> {
    const principal = req.principal;
    let projectId: string;
    let credential: StreamCredential;
    if (principal?.kind === 'api_key') {
      const raw = header(req, API_KEY_HEADER) ?? '';
      projectId = principal.projectId;
      credential = { holder: `key:${principal.keyId}`, merchant: `merchant:${principal.merchantId}`, keyHash: hashApiKey(raw), stillAccepted: () => accepted(() => apiKeys.verify(raw)) };
    } else if (principal?.kind === 'merchant') {
      const requested = req.query.projectId;
      if (requested === undefined) {
        throw new HttpProblem(400, 'validation_failed', 'projectId is required with a session token: the stream is one project\'s', [
          { field: 'projectId', message: 'is required with a session token' },
        ]);
      }
      // Ownership: another merchant's project answers 404 as if it did not exist.
      await auth.getProject({ merchantId: principal.merchantId, projectId: requested });
      const authorization = header(req, 'authorization');
      projectId = requested;
      credential = {
        holder: `session:${principal.merchantId}`,
        merchant: `merchant:${principal.merchantId}`,
        merchantId: principal.merchantId,
        stillAccepted: () => accepted(() => sessions.verify(authorization)),
      };
    } else {
      throw new Error('route requires x-api-key or bearer authentication but no hook set it');
    }
    const refuse = (what: string) =>
      new HttpProblem(429, 'rate_limited', `at most ${what} may be open at once: close one, or wait`, [], { 'retry-after': String(STREAM_LIMIT_RETRY_AFTER_SECONDS) });
    const open = openPerHolder.get(credential.holder) ?? 0;
    if (open >= streamsPerKey) throw refuse(`${streamsPerKey} event streams per API key (or per merchant's sessions)`);
    const ofMerchant = openPerHolder.get(credential.merchant) ?? 0;
    if (ofMerchant >= streamsPerMerchant) throw refuse(`${streamsPerMerchant} event streams per merchant, over all its keys and sessions`);
    openPerHolder.set(credential.holder, open + 1);
    openPerHolder.set(credential.merchant, ofMerchant + 1);
    return { projectId, credential };
  }

  function release(credential: StreamCredential): void {
    for (const holder of [credential.holder, credential.merchant]) {
      const left = (openPerHolder.get(holder) ?? 1) - 1;
      if (left <= 0) openPerHolder.delete(holder);
      else openPerHolder.set(holder, left);
    }
  }

  /**
   * One stream, until its client leaves, its credential ends, the server closes, or the client
   * leaves a page unread for `slowClientMs`. A page is written only once the previous one left the
   * process (back-pressure): a client that does not read holds one page, not the day's events.
   */
  async function serve(
    req: FastifyRequest<{ Querystring: { projectId?: string } }>,
    reply: FastifyReply,
    clientGone: () => boolean,
    opened: (stream: OpenStream) => void,
  ): Promise<void> {
    const { projectId, credential } = await open(req);
    let counted = true;
    try {
      const resume = header(req, 'last-event-id');
      const badResume = () => new HttpProblem(400, 'validation_failed', 'the request headers are invalid', [{ field: 'last-event-id', message: 'must be an event id this stream sent' }]);
      // The pattern lets a number too large for a seq through (docs/webhook-delivery.md#the-listen-stream).
      if (resume !== undefined && !parseEventStreamCursor(resume)) throw badResume();
      let cursor = resume ?? (await notifier.listProjectEvents({ projectId })).cursor;
      // A sealed cursor is the notifier's to open: one it refuses (another project's, another key's)
      // is a 400 before the stream opens, not a stream asking again for ever.
      let firstPage: Awaited<ReturnType<typeof notifier.listProjectEvents>> | undefined;
      if (resume !== undefined) {
        try {
          firstPage = await notifier.listProjectEvents({ projectId, cursor, pageSize: 100 });
        } catch (err) {
          if (errorFacts(err).code === 'validation_failed') throw badResume();
          // The notifier unreachable: the stream's first round asks again.
        }
      }
      // A request still being let in when the close began would open its stream after it, and
      // hold the process until the grace period's hard exit (second review).
      if (isClosing()) throw new HttpProblem(503, 'service_unavailable', 'this gateway is shutting down; reconnect', [], { 'retry-after': '1' });

      reply.hijack();
      const res = reply.raw;
      let open = !clientGone();
      let wake: (() => void) | undefined;
      const stream: OpenStream = {
        credential,
        end: () => {
          open = false;
          wake?.();
        },
      };
      streams.add(stream);
      opened(stream);
      /** Resolves after `ms`, or at once when the stream ends. */
      const pause = (ms: number) =>
        new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, ms);
          wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
      /** True once what was written left the process; false when the client left it unread for slowClientMs, or the stream ended. */
      const drained = () =>
        new Promise<boolean>((resolve) => {
          if (!res.writableNeedDrain) return resolve(true);
          const done = (ok: boolean) => {
            clearTimeout(timer);
            res.off('drain', onDrain);
            resolve(ok && open);
          };
          const onDrain = () => done(true);
          const timer = setTimeout(() => done(false), slowClientMs);
          res.once('drain', onDrain);
          wake = () => done(false);
        });
      try {
        if (!open) return;
        res.writeHead(200, {
          'content-type': 'text/event-stream; charset=utf-8',
          'cache-control': 'no-store',
          'x-accel-buffering': 'no',
          'x-request-id': req.id,
        });
        res.write(`id: ${cursor}\nevent: ready\ndata: ${JSON.stringify({ projectId })}\n\n`);
        let lastWrite = Date.now();
        while (open) {
          // A revocation missed by the feed still ends the stream (the key's cache entry expires).
          if (!(await credential.stillAccepted())) break;
          try {
            const page = firstPage ?? (await notifier.listProjectEvents({ projectId, cursor, pageSize: 100 }));
            firstPage = undefined;
            // Revoked, or the client gone, while the page was on its way: nothing more is sent.
            if (!open) break;
            for (const e of page.events) {
              res.write(`id: ${e.cursor}\nevent: webhook\ndata: ${JSON.stringify({ eventId: e.eventId, eventType: e.eventType, headers: e.headers, body: e.body })}\n\n`);
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
          if (!(await drained())) {
            if (open) req.log.info({ projectId, slowClientMs }, 'event stream ended: the client left a page unread (it resumes with Last-Event-ID)');
            break;
          }
          if (open) await pause(pollIntervalMs);
        }
      } finally {
        streams.delete(stream);
        release(credential);
        counted = false;
        res.end();
      }
    } finally {
      if (counted) release(credential);
    }
  }

  app.get<{ Querystring: { projectId?: string } }>('/api/events/stream', {
    schema: {
      tags: ['events'],
      summary: 'The project’s webhook events as they happen (server-sent events), each signed like a delivery: what `coinvoice listen` forwards',
      description:
        'With an API key, the key’s project; with a dashboard session, the `projectId` named (one of the merchant’s). The stream closes within a second of the key’s revocation or the session’s end (logout, password change). ' +
        `At most EVENT_STREAMS_PER_KEY streams (default 5) are open at once per API key, or per merchant’s sessions, and EVENT_STREAMS_PER_MERCHANT (default 20) per merchant, in each gateway replica: one more is 429 (rate_limited, Retry-After). ` +
        'A client that leaves a page of events unread for a minute has its stream ended; it resumes with Last-Event-ID.',
      security: [{ apiKeyAuth: [] }, { bearerAuth: [] }],
      querystring: Type.Object(
        { projectId: Type.Optional({ ...Uuid, description: 'With a session token (required then): the merchant’s project to follow. Ignored with an API key' }) },
        { additionalProperties: false },
      ),
      headers: Type.Object({
        'last-event-id': Type.Optional(patternString(EVENT_STREAM_CURSOR_PATTERN, 'must be an event id this stream sent', { description: 'Resume after this event id (the SSE reconnection header)' })),
      }),
      response: {
        200: {
          description: 'text/event-stream: `ready`, then one `webhook` event per project event; comments keep the connection alive',
          content: { 'text/event-stream': { schema: StreamedWebhookSchema } },
        },
      },
    },
    onRequest: hooks.apiKeyOrMerchant,
    // A HEAD has no body to stream: it would have been hijacked and never answered (an outside review).
    exposeHeadRoute: false,
    handler: async (req, reply) => {
      // The connection is watched from the handler's first line: a client that left while the
      // request was authenticated, or while "now" was asked, closed it before a later listener could
      // hear it, and its stream polled for good and kept its holder's place (an outside review).
      const socket = req.raw.socket;
      let stream: OpenStream | undefined;
      let clientGone = socket.destroyed;
      const onClose = () => {
        clientGone = true;
        stream?.end();
      };
      socket.once('close', onClose);
      try {
        if (clientGone) {
          reply.hijack();
          return;
        }
        await serve(req, reply, () => clientGone, (opened) => (stream = opened));
      } finally {
        socket.off('close', onClose);
      }
    },
  });
}
