/**
 * `coinvoice listen` resumes where the stream left it, even when the stream dropped before its
 * first webhook: it reconnects with the `ready` event's id (where the stream started), so the events
 * made while it was away are not skipped (an outside review lost three invoices' events this way:
 * the listener's gateway restarted). A stand-in stream: the first connection sends `ready` and
 * drops; the second must ask to resume from it, and gets the event.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { listen } from '../../packages/cli/src/listen';

let stream: Server;
let receiver: Server;
const streamRequests: IncomingMessage['headers'][] = [];
const forwarded: string[] = [];

const event = { eventId: 'evt_1', eventType: 'invoice.paid', headers: { 'content-type': 'application/json', 'webhook-id': 'evt_1' }, body: '{"invoiceId":"i1"}' };

/** When set, a resume from this id is refused, as the gateway refuses a cursor it cannot open. */
let refusedResume: string | undefined;

beforeAll(async () => {
  stream = createServer((req, res) => {
    streamRequests.push(req.headers);
    if (refusedResume !== undefined && req.headers['last-event-id'] === refusedResume) {
      res.writeHead(400, { 'content-type': 'application/problem+json' });
      res.end(JSON.stringify({ status: 400, code: 'validation_failed', title: 'the request headers are invalid', errors: [{ field: 'last-event-id', message: 'must be an event id this stream sent' }] }));
      return;
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    if (streamRequests.length === 1) {
      // Where the stream starts, then the connection is lost before any webhook.
      res.end('id: 41\nevent: ready\ndata: {"projectId":"p"}\n\n');
      return;
    }
    // The event made meanwhile is after 41: sent only to a stream that resumes from 41.
    const resumedFrom = req.headers['last-event-id'];
    res.write(`id: ${resumedFrom ?? 42}\nevent: ready\ndata: {"projectId":"p"}\n\n`);
    if (resumedFrom === '41') res.write(`id: 42\nevent: webhook\ndata: ${JSON.stringify(event)}\n\n`);
  });
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      forwarded.push(body);
      res.writeHead(204).end();
    });
  });
  await Promise.all([stream, receiver].map((s) => new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve))));
});

afterAll(async () => {
  for (const s of [stream, receiver]) {
    s.closeAllConnections();
    await new Promise((resolve) => s.close(resolve));
  }
});

const urlOf = (s: Server) => `http://127.0.0.1:${(s.address() as { port: number }).port}`;

/** Runs `coinvoice listen` against the stand-in until `done` holds (5 s at most); its output lines. */
async function listenUntil(done: () => boolean): Promise<string[]> {
  const configFile = path.join(mkdtempSync(path.join(tmpdir(), 'cli-listen-')), 'config.json');
  writeFileSync(configFile, JSON.stringify({ baseUrl: urlOf(stream), email: 'm@example.com', token: 't', tokenExpiresAt: '', projectId: 'p', projectName: 'P', environment: 'sandbox', apiKey: 'SBX_x' }));
  const controller = new AbortController();
  const lines: string[] = [];
  const running = listen({ out: (line) => lines.push(line), configFile }, { forwardTo: `${urlOf(receiver)}/hook`, events: [], signal: controller.signal, reconnectDelayMs: 50 });
  const deadline = Date.now() + 5_000;
  while (!done() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  controller.abort();
  await running;
  return lines;
}

test('a stream dropped before its first webhook is resumed from its ready event\'s id: the event made meanwhile is forwarded', async () => {
  await listenUntil(() => forwarded.length > 0);
  expect(streamRequests[0]?.['last-event-id']).toBeUndefined();
  expect(streamRequests[1]?.['last-event-id']).toBe('41');
  expect(forwarded).toEqual([event.body]);
});

test('a resume the server refuses (400: a cursor it cannot open) is not asked again for ever: the listener starts from now and says so', async () => {
  streamRequests.length = 0;
  forwarded.length = 0;
  refusedResume = '41';
  const lines = await listenUntil(() => streamRequests.length >= 3);
  expect(streamRequests.slice(0, 3).map((h) => h['last-event-id'])).toEqual([undefined, '41', undefined]);
  expect(lines.some((line) => line.includes('cannot resume where it left off: listening from now'))).toBe(true);
  refusedResume = undefined;
});

