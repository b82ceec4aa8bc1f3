/**
 * Issue 27 points 7 and 8, through the gateway against the whole system as real processes: an
 * open GET /api/events/stream closes within a second of its API key's revocation or its session's
 * logout; open streams per key are limited (429); test events are limited per project (429 with
 * Retry-After, counted by the notifier).
 */
import { bootSystem, type BootedSystem } from '../support/system';
import { bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type MerchantFixture, type ProjectFixture } from '../support/http';

let system: BootedSystem;
let api: GatewayClient;

beforeAll(async () => {
  system = await bootSystem({ env: { EVENT_STREAMS_PER_KEY: '2', RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT: '3/1m' } });
  api = new GatewayClient(system.gatewayUrl);
}, 120_000);

afterAll(async () => {
  await system?.stop();
});

interface OpenStream {
  /** The first bytes the stream sent (its `ready` event). */
  ready: string;
  /** Resolves with the time the server ended the stream. */
  closed: Promise<number>;
  cancel(): Promise<void>;
}

/** Opens the stream and waits for its `ready` event; fails on any other answer than 200. */
async function openStream(headers: Record<string, string>, query = ''): Promise<OpenStream> {
  const res = await fetch(`${system.gatewayUrl}/api/events/stream${query}`, { headers });
  if (res.status !== 200 || !res.body) throw new Error(`stream answered ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let ready = '';
  while (!ready.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) throw new Error('stream ended before ready');
    ready += decoder.decode(value);
  }
  const closed = (async () => {
    for (;;) {
      const { done } = await reader.read().catch(() => ({ done: true }));
      if (done) return Date.now();
    }
  })();
  return { ready, closed, cancel: () => reader.cancel().catch(() => undefined) };
}

async function merchantWithProject(): Promise<{ merchant: MerchantFixture; project: ProjectFixture }> {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: 'http://127.0.0.1:9/hooks' });
  return { merchant, project };
}

/** Resolves with the close time, or rejects when the stream is still open after `ms`. */
function closedWithin(stream: OpenStream, ms: number): Promise<number> {
  return Promise.race([stream.closed, new Promise<number>((_, reject) => setTimeout(() => reject(new Error(`the stream was still open after ${ms} ms`)), ms))]);
}

test('an open stream closes within a second of its API key’s revocation; the key opens no new one', async () => {
  const { merchant, project } = await merchantWithProject();
  const stream = await openStream({ 'x-api-key': project.key });
  expect(stream.ready).toContain(`"projectId":"${project.id}"`);

  const revoked = await api.delete(`/api/merchant/projects/${project.id}/api-keys/${project.keyId}`, { headers: bearer(merchant.token) });
  expect(revoked.status).toBeLessThan(300);
  const revokedAt = Date.now();
  const closedAt = await closedWithin(stream, 3_000);
  expect(closedAt - revokedAt).toBeLessThan(1_000);

  const again = await fetch(`${system.gatewayUrl}/api/events/stream`, { headers: { 'x-api-key': project.key } });
  expect(again.status).toBe(401);
});

test('a stream opened with a dashboard session closes within a second of its logout; the session names one of its merchant’s projects', async () => {
  const { merchant, project } = await merchantWithProject();
  const stranger = await registerMerchant(api);
  // Another merchant's project is not found; a session must name the project.
  expectProblem(await api.get(`/api/events/stream?projectId=${project.id}`, { headers: bearer(stranger.token) }), 404, 'not_found');
  expectProblem(await api.get('/api/events/stream', { headers: bearer(merchant.token) }), 400, 'validation_failed');

  const stream = await openStream(bearer(merchant.token), `?projectId=${project.id}`);
  expect(stream.ready).toContain(`"projectId":"${project.id}"`);
  const loggedOut = await api.post('/api/merchant/logout', undefined, { headers: bearer(merchant.token) });
  expect(loggedOut.status).toBeLessThan(300);
  const at = Date.now();
  expect((await closedWithin(stream, 3_000)) - at).toBeLessThan(1_000);
  expect((await fetch(`${system.gatewayUrl}/api/events/stream?projectId=${project.id}`, { headers: bearer(merchant.token) })).status).toBe(401);
});

test('open streams per API key are limited (EVENT_STREAMS_PER_KEY=2): the third is 429 with Retry-After; closing one frees its place', async () => {
  const { project } = await merchantWithProject();
  const first = await openStream({ 'x-api-key': project.key });
  const second = await openStream({ 'x-api-key': project.key });
  const third = await api.get('/api/events/stream', { headers: { 'x-api-key': project.key } });
  expectProblem(third, 429, 'rate_limited');
  expect(Number(third.headers.get('retry-after'))).toBeGreaterThan(0);
  // Another key is not affected.
  const other = await merchantWithProject();
  const elsewhere = await openStream({ 'x-api-key': other.project.key });

  await first.cancel();
  const reopened = await eventuallyOpen({ 'x-api-key': project.key });
  for (const s of [second, elsewhere, reopened]) await s.cancel();
});

/** The server notices a client that left on its next write or round: retry for a few seconds. */
async function eventuallyOpen(headers: Record<string, string>): Promise<OpenStream> {
  const deadline = Date.now() + 5_000;
  for (;;) {
    try {
      return await openStream(headers);
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  }
}

test('test events are limited per project (3 a minute here): the fourth is 429 problem+json with Retry-After and the RateLimit headers', async () => {
  const { merchant, project } = await merchantWithProject();
  for (let i = 0; i < 3; i++) {
    expect((await api.post(`/api/merchant/projects/${project.id}/webhook-test`, undefined, { headers: bearer(merchant.token) })).status).toBe(201);
  }
  const refused = await api.post(`/api/merchant/projects/${project.id}/webhook-test`, undefined, { headers: bearer(merchant.token) });
  expectProblem(refused, 429, 'rate_limited');
  expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(refused.headers.get('ratelimit-policy')).toBe('"webhook-test-project";q=3;w=60');
  // Another project of the same merchant has its own count.
  const second = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: 'http://127.0.0.1:9/hooks', name: 'Second shop' });
  expect((await api.post(`/api/merchant/projects/${second.id}/webhook-test`, undefined, { headers: bearer(merchant.token) })).status).toBe(201);
});

/** The stream's events (SSE fields) until `until` holds or `ms` pass; then the stream is cancelled. */
async function readEvents(headers: Record<string, string>, until: (events: Array<{ id?: string; event?: string; data?: string }>) => boolean, ms = 10_000) {
  const res = await fetch(`${system.gatewayUrl}/api/events/stream`, { headers });
  if (res.status !== 200 || !res.body) throw new Error(`stream answered ${res.status}: ${await res.text()}`);
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  const events: Array<{ id?: string; event?: string; data?: string }> = [];
  let buffer = '';
  const deadline = Date.now() + ms;
  try {
    while (!until(events) && Date.now() < deadline) {
      const { value, done } = await Promise.race([reader.read(), new Promise<{ value: undefined; done: false }>((r) => setTimeout(() => r({ value: undefined, done: false }), 200))]);
      if (done) break;
      if (value) buffer += decoder.decode(value, { stream: true });
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (block.startsWith(':')) continue;
        const fields = Object.fromEntries(block.split('\n').map((line) => [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trimStart()]));
        events.push(fields);
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return events;
}

test('every event names its own resume point, ready too: a stream cut after the first event of a page, or before any event, resumes exactly there (an outside review lost events both ways)', async () => {
  const { project } = await merchantWithProject();
  const key = { 'x-api-key': project.key };
  // Where a stream starts: ready carries it.
  const [ready] = await readEvents(key, (events) => events.length >= 1);
  expect(ready).toMatchObject({ event: 'ready', id: expect.stringMatching(/^[A-Za-z0-9_-]{40,120}$/) });
  // Three events while no stream is open (a listener whose gateway was down).
  const paid: string[] = [];
  for (let i = 0; i < 3; i++) {
    const invoice = await api.post(
      '/api/invoice',
      { priceAmount: '10.00', priceCurrency: 'USD', payCurrency: 'BTC', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' },
      { headers: key },
    );
    expect((await api.post(`/api/invoice/${invoice.body.id}/sandbox/pay`, {}, { headers: key })).status).toBe(200);
    paid.push(invoice.body.id);
  }
  type Sse = { id?: string; event?: string; data?: string };
  const webhooks = (events: Sse[]) => events.filter((e) => e.event === 'webhook');
  // Resumed from ready's id: all three, in one page, each with an id of its own.
  const resumed = webhooks(await readEvents({ ...key, 'last-event-id': ready!.id! }, (events) => webhooks(events).length >= 3));
  expect(resumed.map((e) => (JSON.parse(JSON.parse(e.data!).body as string) as { invoiceId: string }).invoiceId)).toEqual(paid);
  const ids = resumed.map((e) => e.id);
  expect(new Set(ids).size).toBe(3);
  // Cut after the first: the other two come again, nothing lost, nothing repeated.
  // (Cursors are sealed afresh each time: the events are told apart by their webhook ids.)
  const eventIdOf = (e: Sse) => (JSON.parse(e.data!) as { eventId: string }).eventId;
  const afterFirst = webhooks(await readEvents({ ...key, 'last-event-id': ids[0]! }, (events) => webhooks(events).length >= 2, 3_000));
  expect(afterFirst.map(eventIdOf)).toEqual(resumed.slice(1).map(eventIdOf));
  // An id no stream sent — not a cursor's shape, or one sealed for another project — is refused
  // before the stream opens, not retried for ever.
  const other = await merchantWithProject();
  const [othersReady] = await readEvents({ 'x-api-key': other.project.key }, (events) => events.length >= 1);
  for (const id of ['18446744073709551616.1', othersReady!.id!]) {
    const refused = await api.get('/api/events/stream', { headers: { ...key, 'last-event-id': id } });
    expectProblem(refused, 400, 'validation_failed');
    expect(refused.body.errors).toEqual([{ field: 'last-event-id', message: 'must be an event id this stream sent' }]);
  }
});
