/**
 * The OpenAPI document: valid OpenAPI 3.1, covering every route the gateway registers, and equal
 * to the committed snapshot so every change to the public contract is deliberate.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Validator } from '@seriousme/openapi-schema-validator';
import { buildForDocument } from '../src/openapi-document';

let built: Awaited<ReturnType<typeof buildForDocument>>;
let doc: Record<string, any>;

beforeAll(async () => {
  built = await buildForDocument();
  doc = built.openapi.document();
});
afterAll(async () => {
  await built.app.close();
});

test('the document is valid OpenAPI 3.1', async () => {
  const validator = new Validator();
  const result = await validator.validate(doc);
  expect(result.errors ?? []).toEqual([]);
  expect(result.valid).toBe(true);
  expect(validator.version).toBe('3.1');
});

test('every route the gateway registers is in the document, and nothing else', () => {
  const registered = built.openapi.registered().map((r) => `${r.method} ${r.path}`).sort();
  const documented = Object.entries(doc.paths as Record<string, Record<string, unknown>>)
    .flatMap(([p, ops]) => Object.keys(ops).map((m) => `${m} ${p}`))
    .sort();
  expect(documented).toEqual(registered);
  // Spot-check the service description's endpoints are there.
  for (const op of ['post /api/invoice', 'get /api/invoice/{id}', 'post /api/invoice/{id}/sandbox/pay', 'get /api/checkout/{id}']) {
    expect(registered).toContain(op);
  }
});

test('GET /api/currencies is documented as public and cacheable, each pair with its fields (docs/networks.md)', () => {
  const op = doc.paths['/api/currencies'].get;
  expect(op.security).toEqual([]);
  expect(op.tags).toEqual(['currencies']);
  expect(Object.keys(op.responses)).toEqual(expect.arrayContaining(['200', '304']));
  const item = op.responses['200'].content['application/json'].schema.properties.currencies.items;
  expect(Object.keys(item.properties)).toEqual(['currency', 'network', 'name', 'networkLabel', 'decimals', 'baseUnitDecimals', 'confirmations', 'minimumAmount', 'contract', 'chainId', 'watched']);
  expect(doc.tags.map((t: { name: string }) => t.name)).toContain('currencies');
  const body = doc.paths['/api/invoice'].post.requestBody.content['application/json'].schema;
  expect(body.properties.payNetwork).toMatchObject({ type: 'string' });
  expect(body.required).not.toContain('payNetwork');
});

test('every public field of the Invoice is documented with its contract type', () => {
  const invoice = doc.paths['/api/invoice'].post.responses['201'].content['application/json'].schema;
  const types = Object.fromEntries(Object.entries(invoice.properties as Record<string, { type?: string }>).map(([k, v]) => [k, v.type ?? 'union']));
  expect(types).toEqual({
    id: 'string', orderId: 'string', orderDescription: 'string', priceAmount: 'number', priceAmountInUsd: 'number',
    amountReceived: 'number', priceCurrency: 'string', payCurrency: 'string', status: 'union', createdAt: 'string',
    expiredAt: 'string', address: 'string', amountExpected: 'number', successUrl: 'string', cancelUrl: 'string',
    projectName: 'string', isDonation: 'boolean',
    // An addition of issue 24 on every invoice, required: the network payCurrency is paid on (docs/networks.md).
    payNetwork: 'string',
    // Additions for live invoices (docs/architecture.md#live-payments), optional: the 17 documented fields stay as they are.
    payments: 'array', confirmationsRequired: 'integer',
    // Exact decimal strings of a live invoice's amounts (docs/accounting.md), optional likewise.
    amountExpectedDecimal: 'string', amountReceivedDecimal: 'string',
  });
  expect(invoice.required).toContain('payNetwork');
  expect(invoice.required).not.toContain('amountReceivedDecimal');
  expect(invoice.required).not.toContain('payments');
  expect(invoice.required).not.toContain('confirmationsRequired');
  expect(doc.components.securitySchemes.apiKeyAuth).toMatchObject({ type: 'apiKey', in: 'header', name: 'x-api-key' });
  expect(doc.components.securitySchemes.bearerAuth).toMatchObject({ type: 'http', scheme: 'bearer' });
  expect(Object.keys(doc.webhooks)).toContain('invoice.paid');
  expect([...doc.webhooks['invoice.paid'].post.requestBody.content['application/json'].schema.required].sort()).toEqual(
    // The seed's six, and the additions amountDecimal (18-decimal live amounts), occurredAt and payNetwork (issue 24).
    ['amount', 'amountDecimal', 'currency', 'environment', 'invoiceId', 'occurredAt', 'orderId', 'payNetwork', 'status'],
  );
});

test('every error response is problem+json', () => {
  for (const ops of Object.values(doc.paths as Record<string, Record<string, any>>)) {
    for (const op of Object.values(ops)) {
      for (const [status, res] of Object.entries(op.responses as Record<string, any>)) {
        if (Number(status) >= 400) expect(Object.keys(res.content)).toEqual(['application/problem+json']);
      }
    }
  }
});

test('the statuses the routes answer beyond the obvious are documented: 409 on payout request and verify, 504 everywhere', () => {
  // Found by a newcomer checking live answers against the document: 409 insufficient_balance and
  // payout_not_verifiable were answered but not documented; a missed deadline answers 504.
  expect(Object.keys(doc.paths['/api/payout/request'].post.responses)).toContain('409');
  expect(Object.keys(doc.paths['/api/payout/verify'].post.responses)).toContain('409');
  expect(Object.keys(doc.paths['/api/merchant/email/verify'].post.responses)).toContain('409');
  expect(Object.keys(doc.paths['/api/merchant/login'].post.responses)).not.toContain('409');
  for (const [path, item] of Object.entries(doc.paths as Record<string, Record<string, { responses: Record<string, unknown> }>>)) {
    for (const [method, op] of Object.entries(item)) expect([`${method} ${path}`, Object.keys(op.responses).includes('504')]).toEqual([`${method} ${path}`, true]);
  }
});

test('the document equals the committed snapshot (run `npm run openapi:snapshot` for a deliberate change)', () => {
  const snapshot = JSON.parse(readFileSync(path.join(__dirname, '..', 'openapi.snapshot.json'), 'utf8'));
  expect(doc).toEqual(snapshot);
});

test('@redocly/cli lint (recommended rules) reports 0 errors and 0 warnings on the served document', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'openapi-lint-'));
  try {
    const file = path.join(dir, 'openapi.json');
    writeFileSync(file, JSON.stringify(doc));
    const redocly = path.join(__dirname, '..', '..', 'node_modules', '.bin', 'redocly');
    // Exits non-zero on errors; the JSON report is on stdout either way. Telemetry off: runs offline.
    const run = await promisify(execFile)(redocly, ['lint', file, '--extends=recommended', '--format=json'], {
      env: { ...process.env, REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' },
    }).catch((err: { stdout?: string }) => ({ stdout: err.stdout ?? '' }));
    const report = JSON.parse(run.stdout) as { totals: { errors: number; warnings: number }; problems: Array<{ ruleId: string; message: string }> };
    expect(report.problems.map((p) => `${p.ruleId}: ${p.message}`)).toEqual([]);
    expect(report.totals).toMatchObject({ errors: 0, warnings: 0 });
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}, 60_000);
