/**
 * `coinvoice listen --forward-to URL`: reads the project's events from the gateway's stream
 * (GET /api/events/stream, server-sent events) and POSTs each to URL with the body and headers of
 * a real delivery — signed with the project's webhook secret, so the local endpoint verifies it as
 * it will verify production deliveries — printing one status line per event. Reconnects after a
 * dropped stream, resuming after the last event it saw (Last-Event-ID).
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';
import { apiKeyClient } from './api';
import { CliError, readConfig } from './config';
import type { Io } from './commands';

export interface StreamedWebhook {
  eventId: string;
  eventType: string;
  headers: Record<string, string>;
  body: string;
}

export interface ListenOptions {
  forwardTo: string;
  /** Only these event types (all when empty). */
  events: string[];
  signal: AbortSignal;
  /** Wait before reconnecting a dropped stream. */
  reconnectDelayMs?: number;
}

/** The headers fetch computes itself from the body it sends. */
const COMPUTED = new Set(['content-length']);

function parseWebhook(data: string): StreamedWebhook {
  const value = JSON.parse(data) as Partial<StreamedWebhook>;
  if (typeof value.eventId !== 'string' || typeof value.eventType !== 'string' || typeof value.body !== 'string' || typeof value.headers !== 'object' || value.headers === null) {
    throw new CliError('the gateway sent a webhook event this CLI does not understand');
  }
  return value as StreamedWebhook;
}

/** POSTs one event to the local URL as a delivery would; returns the status line. */
export async function forward(url: string, event: StreamedWebhook): Promise<string> {
  const started = performance.now();
  const headers = Object.fromEntries(Object.entries(event.headers).filter(([name]) => !COMPUTED.has(name.toLowerCase())));
  const at = new Date().toISOString();
  try {
    const res = await fetch(url, { method: 'POST', headers, body: event.body, signal: AbortSignal.timeout(10_000) });
    await res.arrayBuffer();
    return `${at}  --> ${event.eventType} [${event.eventId}]  <-- [${res.status}] POST ${url} (${Math.round(performance.now() - started)} ms)`;
  } catch (err) {
    return `${at}  --> ${event.eventType} [${event.eventId}]  <-- failed POST ${url}: ${err instanceof Error ? err.message : String(err)}`;
  }
}

export async function listen(io: Io, o: ListenOptions): Promise<void> {
  const url = new URL(o.forwardTo); // refuses a malformed URL before anything starts
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new CliError(`--forward-to must be an http(s) URL, got ${o.forwardTo}`);
  const config = readConfig(io.configFile);
  const client = apiKeyClient(config);
  let lastEventId: string | undefined;
  let announced = false;

  while (!o.signal.aborted) {
    try {
      const { response, error } = await client.GET('/api/events/stream', {
        parseAs: 'stream',
        signal: o.signal,
        headers: lastEventId ? { 'last-event-id': lastEventId } : {},
      });
      if (!response.ok || !response.body) {
        // The client has read the refusal's body already: its problem's code and words say why.
        const problem = (error ?? {}) as { code?: unknown; detail?: unknown };
        const why = [problem.code, problem.detail].filter((part) => typeof part === 'string' && part !== '').join(': ');
        const fatal = response.status === 401 || response.status === 403;
        const message = `the event stream answered ${response.status}${why ? ` ${why.slice(0, 300)}` : ''}`;
        if (fatal) throw new CliError(`${message} (run \`coinvoice login\` again)`);
        if (response.status === 400 && lastEventId !== undefined) {
          // The place to resume from is refused (a cursor the server can no longer open: its key
          // was rotated): asking again with it would be refused for ever.
          io.out(`${message}; it cannot resume where it left off: listening from now (events since the last one forwarded are not forwarded)`);
          lastEventId = undefined;
          continue;
        }
        // A 429 says when to come back (Retry-After, seconds).
        const retryAfterS = Number(response.headers.get('retry-after'));
        const waitMs = Number.isFinite(retryAfterS) && retryAfterS > 0 ? Math.min(retryAfterS, 300) * 1000 : (o.reconnectDelayMs ?? 1_000);
        io.out(`${message}; retrying in ${Math.round(waitMs / 1000)} s`);
        await new Promise((resolve) => setTimeout(resolve, waitMs));
        continue;
      } else {
        // Events are forwarded one at a time, in order, as a delivery to one URL is.
        let chain = Promise.resolve();
        const parser = createParser({
          onEvent: (message: EventSourceMessage) => {
            // Every event names where the stream is (`ready`: where it started), so a reconnect
            // resumes there, even before the first webhook.
            if (message.id) lastEventId = message.id;
            if (message.event === 'ready' && !announced) {
              announced = true;
              io.out(`Ready! Forwarding the events of project "${config.projectName}" (${config.environment}) to ${o.forwardTo} (Ctrl-C to stop)`);
            }
            if (message.event !== 'webhook') return;
            const event = parseWebhook(message.data);
            if (o.events.length > 0 && !o.events.includes(event.eventType)) return;
            chain = chain.then(async () => io.out(await forward(o.forwardTo, event)));
          },
        });
        const decoder = new TextDecoder();
        for await (const chunk of response.body) parser.feed(decoder.decode(chunk, { stream: true }));
        await chain;
      }
    } catch (err) {
      if (o.signal.aborted) return;
      if (err instanceof CliError) throw err;
      io.out(`the event stream dropped (${err instanceof Error ? err.message : String(err)}); reconnecting`);
    }
    await new Promise((resolve) => setTimeout(resolve, o.reconnectDelayMs ?? 1_000));
  }
}
