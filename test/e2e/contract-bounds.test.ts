/**
 * The OpenAPI document against what the running system enforces (issue 14): every length and
 * range bound of a request field is read from the document and probed through the gateway at the
 * bound (accepted as far as that field goes) and one past it (400 naming the field), so a schema
 * that says 1000 where a service enforces 500 fails here. Also: payout `amount` as a decimal
 * string or a number, exactly, and 415 for a body that is not JSON.
 */
import { createAddressDeriver, generateDevelopmentKeyPair } from '@coinvoice/chains/addresses';
import { buildForDocument } from '../../gateway/src/openapi-document';
import { apiKeyHeader, bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant, type JsonResponse, type MerchantFixture, type ProjectFixture } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';

let system: BootedSystem;
let api: GatewayClient;
let merchant: MerchantFixture;
let shop: ProjectFixture;
let doc: Record<string, any>;

beforeAll(async () => {
  const built = await buildForDocument();
  doc = built.openapi.document();
  await built.app.close();
  system = await bootSystem({ env: { PASSWORD_HASH_MEMORY_KIB: '1024' } });
  api = new GatewayClient(system.gatewayUrl);
  merchant = await registerMerchant(api);
  shop = await createProjectWithKey(api, merchant, 'sandbox');
}, 120_000);

afterAll(async () => {
  await system?.stop();
});

const deriver = (() => {
  const created = createAddressDeriver(generateDevelopmentKeyPair('BTC', 'testnet').xpub, 'BTC', 'testnet');
  if (!created.ok) throw new Error(created.reason);
  return created.value;
})();
let nextAddress = 0;

/** A text of exactly `n` characters that is valid for the field apart from its length. */
type Filler = (n: number) => string;
const text: Filler = (n) => 'a'.repeat(n);
const url: Filler = (n) => `https://shop.example/${'a'.repeat(n - 'https://shop.example/'.length)}`;
/** Local part of 64, then DNS labels of at most 63 until the length is reached. */
const email: Filler = (n) => {
  let domain = 'example.com';
  const local = 'a'.repeat(64);
  while (local.length + 1 + domain.length < n) {
    const room = n - (local.length + 1 + domain.length) - 1;
    domain = `${'b'.repeat(Math.min(63, Math.max(1, room)))}.${domain}`;
  }
  return `${local}@${domain}`;
};

interface Probe {
  method: 'post' | 'patch';
  path: string;
  field: string;
  /** A valid body; the probed field is set on top of it. */
  body: () => Record<string, unknown>;
  auth: () => Record<string, string>;
  /** Path with its parameters filled in. */
  url?: () => string;
  filler?: Filler;
}

const merchantAuth = () => bearer(merchant.token);
const keyAuth = () => apiKeyHeader(shop.key);
const registerBody = () => ({ email: `${Math.random().toString(36).slice(2)}@example.com`, password: 'a-long-password', name: 'Shop' });
const projectBody = () => ({ name: 'Shop', environment: 'sandbox' });
const invoiceBody = () => ({ priceAmount: '10.00', priceCurrency: 'EUR', payCurrency: 'BTC' });
const payoutBody = () => ({ amount: '0.001', currency: 'BTC', address: deriver.addressAt(nextAddress++) });

const PROBES: Probe[] = [
  { method: 'post', path: '/api/merchant/register', field: 'email', body: registerBody, auth: () => ({}), filler: email },
  { method: 'post', path: '/api/merchant/register', field: 'password', body: registerBody, auth: () => ({}) },
  { method: 'post', path: '/api/merchant/register', field: 'name', body: registerBody, auth: () => ({}) },
  { method: 'post', path: '/api/merchant/projects', field: 'name', body: projectBody, auth: merchantAuth },
  { method: 'post', path: '/api/merchant/projects', field: 'webhookUrl', body: projectBody, auth: merchantAuth, filler: url },
  { method: 'patch', path: '/api/merchant/projects/{id}', url: () => `/api/merchant/projects/${shop.id}`, field: 'invoiceLifetimeMinutes', body: () => ({}), auth: merchantAuth },
  { method: 'post', path: '/api/invoice', field: 'orderId', body: invoiceBody, auth: keyAuth },
  { method: 'post', path: '/api/invoice', field: 'orderDescription', body: invoiceBody, auth: keyAuth },
  { method: 'post', path: '/api/invoice', field: 'successUrl', body: invoiceBody, auth: keyAuth, filler: url },
  { method: 'post', path: '/api/invoice', field: 'cancelUrl', body: invoiceBody, auth: keyAuth, filler: url },
  { method: 'post', path: '/api/payout/request', field: 'note', body: payoutBody, auth: keyAuth },
];

function fieldSchema(probe: Probe): Record<string, any> {
  const schema = doc.paths[probe.path]?.[probe.method]?.requestBody?.content['application/json'].schema;
  const field = schema?.properties?.[probe.field];
  if (!field) throw new Error(`${probe.method} ${probe.path} documents no field ${probe.field}`);
  return field;
}

function fieldErrors(res: JsonResponse, field: string): string[] {
  if (res.status !== 400) return [];
  return ((res.body?.errors ?? []) as Array<{ field: string; message: string }>).filter((e) => e.field === field).map((e) => e.message);
}

async function send(probe: Probe, value: unknown): Promise<JsonResponse> {
  return api.request(probe.method.toUpperCase(), probe.url?.() ?? probe.path, { body: { ...probe.body(), [probe.field]: value }, headers: probe.auth() });
}

test.each(PROBES.map((p) => [`${p.method} ${p.path} ${p.field}`, p] as const))('%s: the documented bounds are the enforced ones', async (_name, probe) => {
  const schema = fieldSchema(probe);
  const checks: Array<{ value: unknown; accepted: boolean; what: string }> = [];
  if (schema.type === 'string') {
    const fill = probe.filler ?? text;
    expect(typeof schema.maxLength).toBe('number');
    checks.push({ value: fill(schema.maxLength), accepted: true, what: `maxLength ${schema.maxLength}` });
    checks.push({ value: fill(schema.maxLength + 1), accepted: false, what: `maxLength ${schema.maxLength} + 1` });
    if (typeof schema.minLength === 'number' && schema.minLength > 1) {
      checks.push({ value: fill(schema.minLength), accepted: true, what: `minLength ${schema.minLength}` });
      checks.push({ value: fill(schema.minLength - 1), accepted: false, what: `minLength ${schema.minLength} - 1` });
    }
  } else if (schema.type === 'integer') {
    expect(typeof schema.minimum).toBe('number');
    expect(typeof schema.maximum).toBe('number');
    checks.push({ value: schema.minimum, accepted: true, what: `minimum ${schema.minimum}` });
    checks.push({ value: schema.minimum - 1, accepted: false, what: `minimum ${schema.minimum} - 1` });
    checks.push({ value: schema.maximum, accepted: true, what: `maximum ${schema.maximum}` });
    checks.push({ value: schema.maximum + 1, accepted: false, what: `maximum ${schema.maximum} + 1` });
  } else {
    throw new Error(`no probe for a ${String(schema.type)} field`);
  }
  const outcomes = [];
  for (const check of checks) {
    const res = await send(probe, check.value);
    outcomes.push({ what: check.what, fieldRefused: fieldErrors(res, probe.field).length > 0, status: res.status });
  }
  expect(outcomes.map((o) => ({ what: o.what, fieldRefused: o.fieldRefused }))).toEqual(checks.map((c) => ({ what: c.what, fieldRefused: !c.accepted })));
});

test('every documented string bound of a request body the probes can reach is probed', () => {
  const probed = new Set(PROBES.map((p) => `${p.method} ${p.path} ${p.field}`));
  for (const path of ['/api/merchant/register', '/api/merchant/projects', '/api/invoice', '/api/payout/request']) {
    const schema = doc.paths[path].post.requestBody.content['application/json'].schema;
    for (const [field, s] of Object.entries(schema.properties as Record<string, any>)) {
      // Names from a list (a currency, a network: GET /api/currencies) are checked against the list, not as free text.
      const freeText = s.type === 'string' && s.maxLength !== undefined && s.format === undefined && !/currency|network|environment|priceAmount|amount|address/i.test(field);
      if (freeText) expect(probed).toContain(`post ${path} ${field}`);
    }
  }
});

describe('payout amount', () => {
  async function request(amount: unknown) {
    return api.post('/api/payout/request', { ...payoutBody(), amount }, { headers: keyAuth() });
  }

  test('a decimal string and the same JSON number reach the balance check alike (no balance: 409), exactly', async () => {
    // (The smallest BTC payout is its dust limit, 0.00000294.)
    for (const amount of ['0.00000301', '12.5', 0.00000301, 12.5]) {
      expectProblem(await request(amount), 409, 'insufficient_balance');
    }
  });

  test('malformed strings answer 400 on amount, never a rounding', async () => {
    for (const amount of ['abc', '0.000000001', '-1', '0', '1e3', '', ' 1']) {
      const problem = expectProblem(await request(amount), 400);
      expect(problem.errors.map((e: { field: string }) => e.field)).toContain('amount');
    }
  });

  test('the document says string or number', () => {
    const amount = doc.paths['/api/payout/request'].post.requestBody.content['application/json'].schema.properties.amount;
    expect(amount.anyOf.map((s: { type: string }) => s.type).sort()).toEqual(['number', 'string']);
  });
});

test('JSON is UTF-8: bytes that are not UTF-8 are refused (never read as U+FFFD), another charset is 415', async () => {
  const json = Buffer.from(JSON.stringify({ ...invoiceBody(), orderId: 'XX' }));
  const at = json.indexOf('XX');
  json[at] = 0xff; // the reviewers' case: raw \xff\xfe in orderId was stored as "��"
  json[at + 1] = 0xfe;
  const bad = expectProblem(await api.request('POST', '/api/invoice', { raw: json, headers: { ...keyAuth(), 'content-type': 'application/json' } }), 400, 'validation_failed');
  expect(bad.errors).toEqual([{ field: 'body', message: 'must be UTF-8 text: it holds bytes that are not' }]);
  const utf16 = await api.request('POST', '/api/invoice', { raw: JSON.stringify(invoiceBody()), headers: { ...keyAuth(), 'content-type': 'application/json; charset=utf-16' } });
  expectProblem(utf16, 415, 'unsupported_media_type');
  for (const charset of ['utf-8', 'UTF-8', '"utf-8"', 'utf8']) {
    const full = { ...invoiceBody(), successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/cancel', orderId: 'café' };
    const ok = await api.request('POST', '/api/invoice', { raw: JSON.stringify(full), headers: { ...keyAuth(), 'content-type': `application/json; charset=${charset}` } });
    expect(ok.status).toBe(201);
    expect(ok.body.orderId).toBe('café');
  }
});

test('a body that is not JSON answers 415 unsupported_media_type (text/plain, form)', async () => {
  for (const contentType of ['text/plain', 'application/x-www-form-urlencoded', 'text/plain; charset=utf-8']) {
    const res = await api.request('POST', '/api/invoice', { raw: JSON.stringify(invoiceBody()), headers: { ...keyAuth(), 'content-type': contentType } });
    expectProblem(res, 415, 'unsupported_media_type');
  }
});

test("an empty body is no body whatever its type: curl -d '' (a form type, 0 bytes) pays a sandbox invoice; a create still needs its JSON (an outside review got 415)", async () => {
  const created = await api.post('/api/invoice', { ...invoiceBody(), successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/no' }, { headers: keyAuth() });
  expect(created.status).toBe(201);
  const paid = await api.request('POST', `/api/invoice/${created.body.id}/sandbox/pay`, { raw: '', headers: { ...keyAuth(), 'content-type': 'application/x-www-form-urlencoded' } });
  expect(paid.status).toBe(200);
  expect(paid.body).toMatchObject({ id: created.body.id, status: 'Paid' });
  const empty = await api.request('POST', '/api/invoice', { raw: '', headers: { ...keyAuth(), 'content-type': 'application/x-www-form-urlencoded' } });
  expect(empty.status).toBe(400);
});
