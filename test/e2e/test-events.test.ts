/**
 * Test events of every type of the catalogue (POST /api/merchant/projects/{id}/webhook-test with
 * an eventType, what `coinvoice trigger` sends): each is delivered like a real event (Standard
 * Webhooks headers, verified here with the stock `standardwebhooks` package), its body valid
 * against the schema the OpenAPI document publishes for real events of that type, with the keys
 * and value types of a real sandbox invoice.paid for that type; an unknown type is a 400 naming
 * the field and every valid type; the per-project limit of test events holds for every type.
 */
import { FormatRegistry } from '@sinclair/typebox';
import { Value } from '@sinclair/typebox/value';
import { Webhook } from 'standardwebhooks';
import { WEBHOOK_EVENTS } from '../../gateway/src/schemas/webhook-events';
import { bearer, createProjectWithKey, expectProblem, GatewayClient, registerMerchant } from '../support/http';
import { bootSystem, type BootedSystem } from '../support/system';
import { createAndPay, deleteStreams, Receiver, type ReceivedRequest } from './webhooks.support';

FormatRegistry.Set('uuid', (v) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(v));
FormatRegistry.Set('date-time', (v) => !Number.isNaN(Date.parse(v)) && /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/.test(v));

const CATALOGUE = Object.keys(WEBHOOK_EVENTS);
/** Every catalogue type once, and one more: the limit is the last one allowed. */
const LIMIT = CATALOGUE.length + 1;
const TEST_SUBJECT_ID = '00000000-0000-4000-8000-000000000000';

let system: BootedSystem;
let api: GatewayClient;
let receiver: Receiver;

beforeAll(async () => {
  receiver = await new Receiver().start();
  system = await bootSystem({ env: { RATE_LIMIT_WEBHOOK_TEST_PER_PROJECT: `${LIMIT}/1m`, PASSWORD_HASH_MEMORY_KIB: '1024' } });
  api = new GatewayClient(system.gatewayUrl);
}, 120_000);

afterAll(async () => {
  await system?.stop();
  if (system) await deleteStreams(system.namespace);
  await receiver?.stop();
});

const typeOf = (value: unknown) => (value === null ? 'null' : typeof value);

test('every catalogue type as a test event: signed and delivered like a real one, with the body of a real one; unknown types are a 400', async () => {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });
  const send = (body: unknown) => api.post(`/api/merchant/projects/${project.id}/webhook-test`, body, { headers: bearer(merchant.token) });

  const sent = new Map<string, string>();
  for (const eventType of CATALOGUE) {
    const res = await send({ eventType });
    expect({ eventType, status: res.status }).toEqual({ eventType, status: 201 });
    expect(res.body).toMatchObject({ eventType, delivery: { eventType, eventId: res.body.eventId, url: receiver.url, status: 'pending', payload: res.body.payload } });
    sent.set(eventType, res.body.eventId);
  }

  const unknown = expectProblem(await send({ eventType: 'invoice.refunded' }), 400, 'validation_failed');
  expect(unknown.errors).toEqual([{ field: 'eventType', message: `must be one of webhook.test, ${CATALOGUE.join(', ')}` }]);

  const requests = await receiver.waitFor(CATALOGUE.length, 20_000);
  const wh = new Webhook(project.webhookSecret);
  const bodies = new Map<string, Record<string, unknown>>();
  for (const eventType of CATALOGUE) {
    const req = requests.find((r) => r.headers['webhook-id'] === sent.get(eventType));
    if (!req) throw new Error(`no delivery of the test ${eventType}`);
    expect(req.headers['webhook-event-type']).toBe(eventType);
    expect(req.headers['content-type']).toBe('application/json');
    const body = wh.verify(req.body, headersOf(req)) as Record<string, unknown>;
    const schema = WEBHOOK_EVENTS[eventType]!.body;
    expect({ eventType, errors: [...Value.Errors(schema, body)].map((e) => `${e.path} ${e.message}`) }).toEqual({ eventType, errors: [] });
    expect(Object.keys(body)).toEqual(Object.keys(schema.properties as Record<string, unknown>));
    expect(body.invoiceId ?? body.payoutId).toBe(TEST_SUBJECT_ID);
    expect(body.environment).toBe('sandbox');
    bodies.set(eventType, body);
  }

  // The test invoice.paid and a real one: the same keys in the same order, each of the same type.
  const paid = await createAndPay(api, project.key);
  const [real] = await receiver.waitFor(1, 20_000, (r) => r.body.includes(paid.id));
  const realBody = wh.verify(real!.body, headersOf(real!)) as Record<string, unknown>;
  const testBody = bodies.get('invoice.paid')!;
  expect(Object.entries(testBody).map(([k, v]) => [k, typeOf(v)])).toEqual(Object.entries(realBody).map(([k, v]) => [k, typeOf(v)]));
}, 90_000);

test('test events of every type share the project’s limit of test events, as the ping did', async () => {
  const merchant = await registerMerchant(api);
  const project = await createProjectWithKey(api, merchant, 'sandbox', { webhookUrl: receiver.url });
  const send = (body: unknown) => api.post(`/api/merchant/projects/${project.id}/webhook-test`, body, { headers: bearer(merchant.token) });
  // The limit counts per minute of the clock: start early in one, so all the sends fall in it.
  const intoMinute = Date.now() % 60_000;
  if (intoMinute > 40_000) await new Promise((resolve) => setTimeout(resolve, 60_000 - intoMinute + 200));
  const statuses: number[] = [];
  for (const eventType of CATALOGUE) statuses.push((await send({ eventType })).status);
  statuses.push((await send(undefined)).status);
  expect(statuses).toEqual(Array(LIMIT).fill(201));
  expectProblem(await send({ eventType: 'invoice.paid' }), 429, 'rate_limited');
}, 90_000);

test('a project without a webhook URL gets the test event in its event stream only; its environment is the project’s', async () => {
  const merchant = await registerMerchant(api);
  const live = await api.post('/api/merchant/projects', { name: 'No URL yet', environment: 'live' }, { headers: bearer(merchant.token) });
  expect(live.status).toBe(201);
  const res = await api.post(`/api/merchant/projects/${live.body.id}/webhook-test`, { eventType: 'payout.completed' }, { headers: bearer(merchant.token) });
  expect(res.status).toBe(201);
  expect(res.body).toMatchObject({ eventType: 'payout.completed', delivery: null });
  expect(JSON.parse(res.body.payload)).toMatchObject({ payoutId: TEST_SUBJECT_ID, status: 'Completed', environment: 'live' });
  const stranger = await registerMerchant(api);
  expectProblem(await api.post(`/api/merchant/projects/${live.body.id}/webhook-test`, { eventType: 'payout.completed' }, { headers: bearer(stranger.token) }), 404, 'not_found');
});

function headersOf(req: ReceivedRequest): Record<string, string> {
  return {
    'webhook-id': String(req.headers['webhook-id']),
    'webhook-timestamp': String(req.headers['webhook-timestamp']),
    'webhook-signature': String(req.headers['webhook-signature']),
  };
}
