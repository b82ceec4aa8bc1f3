/**
 * The webhook sender against real HTTP servers on loopback (docs/webhook-delivery.md#connections):
 * attempts share kept-alive connections; a pool serves only attempts vetted to the same addresses;
 * a connection the receiver closed as it was reused is replaced within the attempt; a response cut
 * at its first KiB does not leave its connection in the pool.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { DestinationVerdict } from '@coinvoice/domain/ssrf';
import { WebhookConnections } from '../src/delivery/connections';
import { nodeHttpSender, type HttpSender } from '../src/delivery/http-sender';

type Vetted = Extract<DestinationVerdict, { ok: true }>;

interface TestServer {
  port: number;
  /** Each accepted connection's local address (which vetted address the client connected to). */
  connections: string[];
  close(): Promise<void>;
}

const servers: TestServer[] = [];
let connections: WebhookConnections;
let sender: HttpSender;

beforeEach(() => {
  connections = new WebhookConnections({ maxSocketsPerDestination: 4 });
  sender = nodeHttpSender(connections);
});
afterEach(async () => {
  connections.close();
  for (const server of servers.splice(0)) await server.close();
});

/** A receiver on every loopback address; `respond` answers each request (its number on its connection given). */
async function receiver(respond: (req: http.IncomingMessage, res: http.ServerResponse, nthOnConnection: number) => void): Promise<TestServer> {
  const accepted: string[] = [];
  const perSocket = new WeakMap<Socket, number>();
  const server = http.createServer((req, res) => {
    const n = (perSocket.get(req.socket) ?? 0) + 1;
    perSocket.set(req.socket, n);
    req.resume();
    req.on('end', () => respond(req, res, n));
  });
  server.on('connection', (socket: Socket) => accepted.push(socket.localAddress ?? ''));
  await new Promise<void>((resolve) => server.listen(0, '0.0.0.0', resolve));
  const entry: TestServer = {
    port: (server.address() as AddressInfo).port,
    connections: accepted,
    close: () => new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    }),
  };
  servers.push(entry);
  return entry;
}

function verdict(port: number, address = '127.0.0.1'): Vetted {
  return { ok: true, url: new URL(`http://hooks.test:${port}/hook`), hostname: 'hooks.test', port, addresses: [{ address, family: 4 }] };
}

const post = (v: Vetted) => sender.post({ verdict: v, headers: { 'content-type': 'application/json', 'webhook-id': 'msg_1' }, body: '{"ok":true}', timeoutMs: 5_000 });

test('attempts to one receiver share a kept-alive connection', async () => {
  const server = await receiver((_req, res) => res.end('ok'));
  for (let i = 0; i < 5; i++) expect(await post(verdict(server.port))).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'ok' });
  expect(server.connections).toEqual(['127.0.0.1']);
});

test('a pool serves only attempts vetted to its addresses: the same host vetted to another address connects anew', async () => {
  const server = await receiver((_req, res) => res.end('ok'));
  expect(await post(verdict(server.port, '127.0.0.1'))).toMatchObject({ status: 200 });
  expect(await post(verdict(server.port, '127.0.0.2'))).toMatchObject({ status: 200 });
  expect(await post(verdict(server.port, '127.0.0.1'))).toMatchObject({ status: 200 });
  expect(server.connections).toEqual(['127.0.0.1', '127.0.0.2']);
  expect(connections.destinations).toBe(2);
});

test('a kept connection the receiver closes as it is reused: the attempt goes again on a fresh one', async () => {
  // The second request on any connection finds it closed without an answer (a keep-alive race).
  const server = await receiver((req, res, nth) => (nth === 1 ? res.end('first') : req.socket.destroy()));
  expect(await post(verdict(server.port))).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'first' });
  expect(await post(verdict(server.port))).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'first' });
  expect(server.connections).toHaveLength(2);
});

test('a fresh connection that fails before an answer is the attempt\'s error, not tried again', async () => {
  const server = await receiver((req) => req.socket.destroy());
  const attempt = await post(verdict(server.port));
  expect(attempt).toMatchObject({ kind: 'connection_error', error: expect.stringMatching(/ECONNRESET|socket hang up/) });
  expect(server.connections).toHaveLength(1);
});

test('a response cut at its first KiB takes its connection with it', async () => {
  const server = await receiver((_req, res) => res.end('x'.repeat(64 * 1024)));
  expect(await post(verdict(server.port))).toMatchObject({ status: 200, bodyExcerpt: 'x'.repeat(1024) });
  expect(await post(verdict(server.port))).toMatchObject({ status: 200 });
  expect(server.connections).toHaveLength(2);
});

test('the idle limit is for idle connections only: an answer slower than it still counts', async () => {
  const quickToClose = new WebhookConnections({ maxSocketsPerDestination: 4, idleMs: 100 });
  try {
    const server = await receiver((_req, res) => setTimeout(() => res.end('late'), 400));
    const attempt = await nodeHttpSender(quickToClose).post({ verdict: verdict(server.port), headers: {}, body: '{}', timeoutMs: 5_000 });
    expect(attempt).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'late' });
  } finally {
    quickToClose.close();
  }
});

test('a pool pushed out by newer destinations lets its attempt in flight finish', async () => {
  const oneDestination = new WebhookConnections({ maxSocketsPerDestination: 4, maxDestinations: 1 });
  try {
    const slow = await receiver((_req, res) => setTimeout(() => res.end('slow'), 300));
    const quick = await receiver((_req, res) => res.end('quick'));
    const evicting = nodeHttpSender(oneDestination);
    const inFlight = evicting.post({ verdict: verdict(slow.port), headers: {}, body: '{}', timeoutMs: 5_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await evicting.post({ verdict: verdict(quick.port), headers: {}, body: '{}', timeoutMs: 5_000 })).toMatchObject({ status: 200 });
    expect(oneDestination.destinations).toBe(1);
    expect(await inFlight).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'slow' });
  } finally {
    oneDestination.close();
  }
});

test('a 2xx whose status came in time counts though its body never ends: the attempt is the status\'s, within the limit (an outside review saw it retried)', async () => {
  const server = await receiver((_req, res) => {
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.write('x'); // and never ends
  });
  const attempt = await sender.post({ verdict: verdict(server.port), headers: {}, body: '{}', timeoutMs: 500 });
  expect(attempt).toMatchObject({ kind: 'response', status: 200, bodyExcerpt: 'x' });
  expect((attempt as { durationMs: number }).durationMs).toBeLessThan(500);
});
