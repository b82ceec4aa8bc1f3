/**
 * A gateway told to stop (SIGTERM) answers what its open connections have in flight, each answer
 * closing its connection, and exits as soon as they are answered. Before: the answers kept their
 * connections alive, Node's server.close() waited on them until the grace period's hard exit (12 s,
 * exit code 1), and a request sent on such a connection meanwhile got Fastify's own 503 body — not
 * problem+json, no request id (an outside review's SIGTERM under load). docs/http-edge.md#shutdown.
 */
import type { ChildProcess } from 'node:child_process';
import { connect, createServer, type Server, type Socket } from 'node:net';
import { generateApiKey } from '@coinvoice/domain/credentials/api-keys';
import { startGatewayProcess } from '../../test/support/gateway-process';

let gateway: ChildProcess;
let port: number;
/** The auth service as the gateway sees it: a socket that takes connections and never answers. */
let silentAuth: Server;
const authSockets = new Set<Socket>();

beforeAll(async () => {
  silentAuth = createServer((socket) => {
    authSockets.add(socket);
    socket.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => silentAuth.listen(0, '127.0.0.1', resolve));
  const authPort = (silentAuth.address() as { port: number }).port;
  ({ process: gateway, port } = await startGatewayProcess({ AUTH_URL: `http://127.0.0.1:${authPort}` }));
}, 30_000);

afterAll(async () => {
  if (gateway && gateway.exitCode === null && gateway.signalCode === null) gateway.kill('SIGKILL');
  for (const socket of authSockets) socket.destroy();
  await new Promise((resolve) => silentAuth?.close(resolve));
});

/** A well-formed key: the gateway asks auth about it. */
const apiKey = generateApiKey('sandbox');
const apiRequest = (id: string) =>
  [`GET /api/invoice/00000000-0000-4000-8000-00000000000${id} HTTP/1.1`, `Host: 127.0.0.1:${port}`, `x-api-key: ${apiKey}`, `x-request-id: req-${id}`, '', ''].join('\r\n');

/** The HTTP/1.1 answers in `received`, in order: status, headers (lower-cased names) and body. */
function answers(received: string): { status: number; headers: Record<string, string>; body: string }[] {
  const out = [];
  let rest = received;
  while (rest.startsWith('HTTP/1.1 ')) {
    const end = rest.indexOf('\r\n\r\n');
    const head = rest.slice(0, end).split('\r\n');
    const headers = Object.fromEntries(head.slice(1).map((line) => [line.slice(0, line.indexOf(':')).toLowerCase(), line.slice(line.indexOf(':') + 1).trim()]));
    const length = Number(headers['content-length']);
    out.push({ status: Number(head[0]!.split(' ')[1]), headers, body: rest.slice(end + 4, end + 4 + length) });
    rest = rest.slice(end + 4 + length);
  }
  return out;
}

test('SIGTERM with requests in flight on kept-alive connections: each is answered problem+json with its request id and Connection: close, and the gateway exits at once, cleanly', async () => {
  const open = async () => {
    const socket = connect(port, '127.0.0.1');
    const state = { received: '', closed: new Promise<void>((resolve) => socket.once('close', () => resolve())) };
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (state.received += chunk));
    socket.once('error', () => undefined);
    await new Promise((resolve) => socket.once('connect', resolve));
    return { socket, state };
  };
  // Two connections, each with a request waiting on auth (which never answers).
  const a = await open();
  const b = await open();
  a.socket.write(apiRequest('1'));
  b.socket.write(apiRequest('2'));
  await new Promise((r) => setTimeout(r, 300));
  const exit = new Promise<{ code: number | null; at: number }>((resolve) => gateway.once('exit', (code) => resolve({ code, at: Date.now() })));
  gateway.kill('SIGTERM');
  await new Promise((r) => setTimeout(r, 300));
  // Auth goes away: both calls end, the gateway answers both.
  const answeredFrom = Date.now();
  silentAuth.close();
  for (const s of authSockets) s.destroy();
  await Promise.all([a.state.closed, b.state.closed]);
  const exited = await exit;

  for (const [connection, id] of [[a, '1'], [b, '2']] as const) {
    const [answer, ...more] = answers(connection.state.received);
    expect(more).toEqual([]);
    expect([503, 504]).toContain(answer!.status);
    expect(answer!.headers).toMatchObject({ 'content-type': expect.stringContaining('application/problem+json'), 'x-request-id': `req-${id}`, connection: 'close' });
    expect(JSON.parse(answer!.body)).toMatchObject({ code: 'service_unavailable', requestId: `req-${id}` });
  }
  // Not the grace period's hard exit (12 s, code 1): the connections closed with their answers.
  expect(exited.code).toBe(0);
  expect(exited.at - answeredFrom).toBeLessThan(3_000);
}, 30_000);
