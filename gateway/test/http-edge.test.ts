/**
 * The HTTP edge (docs/http-edge.md) of a real gateway process, with real sockets: a client that
 * sends the headers and 1 byte of a 1,000-byte body (or not even all the headers) is answered 408
 * and cut off at HTTP_REQUEST_TIMEOUT; an idle keep-alive connection is closed after
 * HTTP_KEEP_ALIVE_TIMEOUT; a body over HTTP_BODY_LIMIT is 413 problem+json. Short timeouts here;
 * the defaults (30 s, 72 s, 64 KiB) are checked on the parsed configuration.
 */
import type { ChildProcess } from 'node:child_process';
import { connect, type Socket } from 'node:net';
import { loadConfig } from '@coinvoice/runtime';
import { gatewaySettings } from '../src/config';
import { startGatewayProcess } from '../../test/support/gateway-process';

const REQUEST_TIMEOUT_MS = 1_000;
const KEEP_ALIVE_MS = 1_500;
const BODY_LIMIT = 2_048;

let gateway: ChildProcess;
let port: number;

beforeAll(async () => {
  ({ process: gateway, port } = await startGatewayProcess({
    HTTP_REQUEST_TIMEOUT: `${REQUEST_TIMEOUT_MS}ms`,
    HTTP_KEEP_ALIVE_TIMEOUT: `${KEEP_ALIVE_MS}ms`,
    HTTP_BODY_LIMIT: String(BODY_LIMIT),
  }));
}, 30_000);

afterAll(async () => {
  if (gateway && gateway.exitCode === null) {
    const exited = new Promise((resolve) => gateway.once('exit', resolve));
    gateway.kill('SIGTERM');
    await exited;
  }
});

/** Opens a socket to the gateway; resolves what it received and when the server closed it. */
function openSocket(): Promise<{ socket: Socket; closed: Promise<{ afterMs: number; received: string }> }> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let received = '';
    const opened = Date.now();
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => (received += chunk));
    const closed = new Promise<{ afterMs: number; received: string }>((done) => socket.once('close', () => done({ afterMs: Date.now() - opened, received })));
    socket.once('error', () => undefined);
    socket.once('connect', () => resolve({ socket, closed }));
    socket.once('error', reject);
  });
}

test('headers and 1 byte of a 1,000-byte body: answered 408 and closed at the request timeout', async () => {
  const { socket, closed } = await openSocket();
  socket.write(
    ['POST /api/merchant/login HTTP/1.1', `Host: 127.0.0.1:${port}`, 'Content-Type: application/json', 'Content-Length: 1000', '', ''].join('\r\n'),
  );
  socket.write('{');
  const { afterMs, received } = await closed;
  expect(received).toMatch(/^HTTP\/1\.1 408 /);
  expectProblemAnswer(received, 408, 'request_timeout');
  expect(afterMs).toBeGreaterThanOrEqual(REQUEST_TIMEOUT_MS - 50);
  // Node checks timeouts on an interval (the gateway sets it to a quarter of the timeout).
  expect(afterMs).toBeLessThan(REQUEST_TIMEOUT_MS * 3);
});

test('headers that never finish: closed at the request timeout too', async () => {
  const { socket, closed } = await openSocket();
  socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nX-Slow: `);
  const { afterMs, received } = await closed;
  expect(received).toMatch(/^HTTP\/1\.1 408 /);
  expect(afterMs).toBeLessThan(REQUEST_TIMEOUT_MS * 3);
});

/** A raw HTTP answer that is problem+json (docs/architecture.md#errors) with this status and code, on a closed connection. */
function expectProblemAnswer(received: string, status: number, code: string) {
  const [head = '', body = ''] = received.split('\r\n\r\n');
  expect(head).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
  expect(head).toMatch(/\r\ncontent-type: application\/problem\+json/i);
  expect(head).toMatch(/\r\nconnection: close/i);
  const requestId = /\r\nx-request-id: ([^\r]+)/i.exec(head)?.[1];
  expect(Buffer.byteLength(body)).toBe(Number(/\r\ncontent-length: (\d+)/i.exec(head)?.[1]));
  expect(JSON.parse(body)).toEqual({ type: `https://docs.coinvoice.dev/errors/${code}`, title: expect.any(String), status, detail: expect.any(String), code, requestId });
}

test.each([
  ['an unknown HTTP version', 'GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n', 400, 'malformed_request'],
  ['a header line without a colon', 'GET /healthz HTTP/1.1\r\nHost: x\r\nBroken header\r\n\r\n', 400, 'malformed_request'],
  ['Content-Length beside Transfer-Encoding (request smuggling)', 'POST /api/merchant/login HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n', 400, 'malformed_request'],
  ['headers over Node\'s 16 KiB', `GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`, 431, 'headers_too_large'],
])('%s: answered problem+json and closed', async (_what, request, status, code) => {
  const { socket, closed } = await openSocket();
  socket.write(request);
  const { received } = await closed;
  expectProblemAnswer(received, status, code);
});

test('a request that arrives in time is answered, and its idle keep-alive connection is closed after the keep-alive timeout', async () => {
  const { socket, closed } = await openSocket();
  const sentAt = Date.now();
  socket.write(`GET /healthz HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n\r\n`);
  const { afterMs, received } = await closed;
  expect(received).toMatch(/^HTTP\/1\.1 200 /);
  expect(received).toContain(`Keep-Alive: timeout=${Math.floor(KEEP_ALIVE_MS / 1000)}`);
  const idleMs = Date.now() - sentAt;
  expect(idleMs).toBeGreaterThanOrEqual(KEEP_ALIVE_MS - 100);
  expect(afterMs).toBeLessThan(KEEP_ALIVE_MS + 2_000);
});

test('a body over HTTP_BODY_LIMIT is 413 payload_too_large (problem+json), declared or streamed', async () => {
  const big = JSON.stringify({ note: 'x'.repeat(BODY_LIMIT) });
  const declared = await fetch(`http://127.0.0.1:${port}/api/merchant/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: big,
  });
  expect(declared.status).toBe(413);
  expect(declared.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(await declared.json()).toMatchObject({ status: 413, code: 'payload_too_large' });

  // Chunked: no Content-Length to refuse up front; counted as it arrives.
  const streamed = await fetch(`http://127.0.0.1:${port}/api/merchant/login`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: new ReadableStream({
      start(controller) {
        controller.enqueue(new TextEncoder().encode(big));
        controller.close();
      },
    }),
    duplex: 'half',
  } as RequestInit);
  expect(streamed.status).toBe(413);
  expect(await streamed.json()).toMatchObject({ status: 413, code: 'payload_too_large' });
});

test('defaults: 30 s request timeout, 72 s keep-alive, 64 KiB bodies, loopback', () => {
  const config = loadConfig(gatewaySettings, {});
  expect(config.HTTP_REQUEST_TIMEOUT).toBe(30_000);
  expect(config.HTTP_KEEP_ALIVE_TIMEOUT).toBe(72_000);
  expect(config.HTTP_BODY_LIMIT).toBe(64 * 1024);
  expect(config.BIND_HOST).toBe('127.0.0.1');
});
