/**
 * What a stream's client costs the gateway (an outside review, docs/webhook-delivery.md#event-streams-follow-their-credential):
 * a client that leaves while its request is still being authenticated ends its stream (it polled
 * the notifier for good and kept its key's place: 5 such requests and the key was refused streams
 * until a restart); a client that does not read holds one page, not every page the notifier has
 * (the gateway wrote them all into memory); a HEAD is answered at once (it was never answered).
 * Auth and the notifier are gRPC stand-ins; auth answers the key check 300 ms late.
 */
import type { ChildProcess } from 'node:child_process';
import net from 'node:net';
import { Code, ConnectError } from '@connectrpc/connect';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { NotifierService } from '@coinvoice/runtime/gen/coinvoice/notifier/v1/notifier_pb';
import { buildApiKey, generateApiKey } from '@coinvoice/domain/credentials/api-keys';
import { startStandInServer, type StandInServer } from '../../test/support/grpc-stand-in';
import { startGatewayProcess } from '../../test/support/gateway-process';
import { awayFromWindowEdge, sleep, waitFor } from '../../test/support/async';

let auth: StandInServer;
let notifier: StandInServer;
let gateway: ChildProcess;
let port: number;
/** VerifyApiKey calls auth answered. */
let keyChecks = 0;
/** ListProjectEvents calls with a cursor: one per round of an open stream. */
let pagesAsked = 0;
/** The size of each event body the notifier answers (a page is 100 of them). */
let bodyBytes = 10;

beforeAll(async () => {
  auth = await startStandInServer((router) => {
    router.rpc(AuthService.method.verifyApiKey, async (req) => {
      keyChecks++;
      if (req.key.includes('FORGED')) throw new ConnectError('no such key', Code.Unauthenticated);
      await sleep(300);
      return { keyId: '00000000-0000-4000-8000-000000000001', projectId: '00000000-0000-4000-8000-000000000002', projectName: 'P', environment: Environment.SANDBOX, merchantId: '00000000-0000-4000-8000-000000000003', invoiceLifetimeMinutes: 60, paymentTolerancePercent: '0' };
    });
    router.rpc(AuthService.method.listSessionRevocations, async () => ({ revocations: [] }));
  });
  let seq = 0;
  notifier = await startStandInServer((router) => {
    router.rpc(NotifierService.method.listProjectEvents, async (req) => {
      if (req.cursor === undefined) return { events: [], cursor: '1.0' };
      pagesAsked++;
      const body = JSON.stringify({ pad: 'x'.repeat(bodyBytes) });
      const events = Array.from({ length: bodyBytes > 10 ? 100 : 0 }, () => {
        seq++;
        return { eventId: `evt_${seq}`, eventType: 'invoice.paid', headers: { 'webhook-id': `evt_${seq}` }, body, cursor: `1.${seq}` };
      });
      return { events, cursor: events.at(-1)?.cursor ?? req.cursor };
    });
  });
  // A cache of 0: every request's key check waits the 300 ms.
  ({ process: gateway, port } = await startGatewayProcess({
    AUTH_URL: auth.url,
    NOTIFIER_URL: notifier.url,
    API_KEY_CACHE_TTL_MS: '0',
    RATE_LIMIT_API_PER_KEY: '100000/1m',
    RATE_LIMIT_API_KEY_LOOKUPS_PER_IP: '40/1m',
  }));
}, 30_000);

afterAll(async () => {
  gateway?.kill('SIGKILL');
  await auth?.stop();
  await notifier?.stop();
});

/** Sends a stream request on a raw connection; the caller decides when (if ever) to read or close. */
function rawStreamRequest(key: string, extra = ''): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`GET /api/events/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nx-api-key: ${key}\r\n${extra}\r\n`);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

test('a client that leaves while its key is being checked leaves no stream behind: nothing polls for it, and its key may open its 5 streams', async () => {
  bodyBytes = 10;
  const key = generateApiKey('sandbox');
  for (let i = 0; i < 5; i++) (await rawStreamRequest(key)).destroy();
  await sleep(1_500);
  const asked = pagesAsked;
  await sleep(1_500);
  expect(pagesAsked).toBe(asked);

  const streams = await Promise.all(Array.from({ length: 5 }, () => fetch(`http://127.0.0.1:${port}/api/events/stream`, { headers: { 'x-api-key': key } })));
  expect(streams.map((r) => r.status)).toEqual([200, 200, 200, 200, 200]);
  await Promise.all(streams.map((r) => r.body?.cancel()));
}, 30_000);

test('a client that does not read holds one page: the notifier is asked no more while it is unread', async () => {
  bodyBytes = 16 * 1024;
  const before = pagesAsked;
  const socket = await rawStreamRequest(generateApiKey('sandbox'));
  socket.pause();
  try {
    // 1.6 MB a page: the connection's buffers (a few MB on loopback) fill within a few pages, then
    // the stream waits (without back-pressure a page was asked every 500 ms, for ever).
    await waitFor('a page asked', async () => pagesAsked > before);
    let last = pagesAsked;
    let unchangedSince = Date.now();
    await waitFor('the notifier no longer asked', async () => {
      if (pagesAsked !== last) {
        last = pagesAsked;
        unchangedSince = Date.now();
      }
      return Date.now() - unchangedSince >= 2_500;
    }, 25_000);
    const settled = pagesAsked;
    await sleep(3_000);
    expect(pagesAsked).toBe(settled);
    expect(settled - before).toBeLessThan(12);
  } finally {
    socket.destroy();
    bodyBytes = 10;
  }
}, 60_000);

test('a HEAD is answered at once, and opens no stream', async () => {
  const before = pagesAsked;
  const res = await fetch(`http://127.0.0.1:${port}/api/events/stream`, { method: 'HEAD', headers: { 'x-api-key': generateApiKey('sandbox') }, signal: AbortSignal.timeout(5_000) });
  expect([404, 405]).toContain(res.status);
  await sleep(1_200);
  expect(pagesAsked).toBe(before);
});

test('unknown keys the gateway must ask auth about are limited per client address (RATE_LIMIT_API_KEY_LOOKUPS_PER_IP, 40 here): forged keys with a valid checksum stop reaching auth (an outside review); valid keys never count', async () => {
  // Every request a lookup (API_KEY_CACHE_TTL_MS=0): 60 with valid keys, more than the limit, none refused for it.
  const valid = await Promise.all(Array.from({ length: 60 }, () => fetch(`http://127.0.0.1:${port}/api/payout/balance`, { headers: { 'x-api-key': generateApiKey('sandbox') } })));
  expect(valid.filter((r) => r.status === 429 || r.status === 401)).toEqual([]);
  // The count is per fixed minute: all of it inside one.
  await awayFromWindowEdge(60, 10_000);
  const before = keyChecks;
  const forged = (n: number) => buildApiKey('live', `FORGED${String(n).padStart(28, '0')}`);
  const answers: number[] = [];
  for (let n = 0; n < 60; n++) answers.push((await fetch(`http://127.0.0.1:${port}/api/payout/balance`, { headers: { 'x-api-key': forged(n) } })).status);
  // 40 refused by auth, then 429 only, auth no longer asked.
  expect(answers.filter((s) => s !== 401 && s !== 429)).toEqual([]);
  const firstRefused = answers.indexOf(429);
  expect(firstRefused).toBe(40);
  expect(answers.slice(firstRefused).every((s) => s === 429)).toBe(true);
  expect(keyChecks - before).toBe(firstRefused);
  // A malformed key costs no lookup: refused 401 here, never counted, never 429.
  expect((await fetch(`http://127.0.0.1:${port}/api/payout/balance`, { headers: { 'x-api-key': 'SBX_nope' } })).status).toBe(401);
});

