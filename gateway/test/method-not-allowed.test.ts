/**
 * A known path asked with a method it does not answer gets 405 with `Allow` (problem+json
 * `method_not_allowed`); an unknown path stays 404. Requests never reach a backend here.
 */
import { buildForDocument } from '../src/openapi-document';

let built: Awaited<ReturnType<typeof buildForDocument>>;
let base: string;

beforeAll(async () => {
  built = await buildForDocument();
  base = await built.app.listen({ host: '127.0.0.1', port: 0 });
});
afterAll(async () => {
  await built.app.close();
});

test.each([
  ['DELETE', '/api/invoice/0b0b0b0b-0000-4000-8000-000000000000', 'GET, HEAD'],
  ['PUT', '/api/invoice', 'POST'],
  // A path that is a route of its own is that resource, though GET /api/payout/{id} matches it too:
  // "request" and "verify" are not payout ids (an outside review had GET answered 400 on the id).
  ['DELETE', '/api/payout/request', 'POST'],
  ['GET', '/api/payout/request', 'POST'],
  ['HEAD', '/api/payout/verify', 'POST'],
  ['PUT', '/api/payout/verify', 'POST'],
  ['POST', '/api/payout/balance', 'GET, HEAD'],
  ['POST', '/api/payout/history', 'GET, HEAD'],
  ['POST', '/api/rates', 'GET, HEAD'],
  ['PATCH', '/api/checkout/some-id/qr.svg', 'GET, HEAD'],
  ['POST', '/dashboard/invoices/123', 'GET, HEAD'],
])('%s %s → 405, Allow: %s', async (method, url, allow) => {
  const res = await fetch(`${base}${url}?x=1`, { method });
  expect(res.status).toBe(405);
  expect(res.headers.get('allow')).toBe(allow);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  if (method === 'HEAD') return; // no body
  expect(await res.json()).toMatchObject({ status: 405, code: 'method_not_allowed', detail: `${url} answers ${allow}, not ${method}` });
});

test('a payout id is still answered by GET /api/payout/{id} (405 only for the paths that are routes of their own)', async () => {
  const res = await fetch(`${base}/api/payout/0b0b0b0b-0000-4000-8000-000000000000`);
  expect(res.status).toBe(401); // reached the route: it asks for authentication
});

test('an unknown path is 404 whatever the method', async () => {
  for (const method of ['GET', 'POST', 'DELETE'] as const) {
    const res = await fetch(`${base}/api/nothing-here`, { method });
    expect(res.status).toBe(404);
    expect(res.headers.get('allow')).toBeNull();
    expect(await res.json()).toMatchObject({ status: 404, code: 'not_found' });
  }
});

test('a path of a parameter route with an extra segment is unknown, not another method', async () => {
  const res = await fetch(`${base}/api/invoice/abc/def`, { method: 'DELETE' });
  expect(res.status).toBe(404);
});

test.each(['/api/invoice/%E0%A4%A', '/api/invoice/%', '/api/payout/%zz/cancel', '/pay/%zz'])('a path with a malformed percent-encoding (%s) → 400 problem+json with the request id, as every refusal', async (url) => {
  const res = await fetch(`${base}${url}`, { method: url.endsWith('cancel') ? 'POST' : 'GET', headers: { 'x-request-id': 'bad-url-1' } });
  expect(res.status).toBe(400);
  expect(res.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(res.headers.get('x-request-id')).toBe('bad-url-1');
  expect(await res.json()).toEqual({
    type: expect.stringContaining('bad_request'),
    title: 'Bad Request',
    status: 400,
    code: 'bad_request',
    detail: 'the request path is not a valid URL: a percent-encoding in it is malformed',
    requestId: 'bad-url-1',
  });
});
