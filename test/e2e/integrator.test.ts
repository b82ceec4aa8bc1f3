/**
 * The integrator kit against the running system (one boot for the file): the typed client
 * (@coinvoice/client, generated from the OpenAPI document) drives the API end to end, and the
 * `coinvoice` CLI logs in, creates, gets, lists and pays invoices, `coinvoice trigger` sends test
 * events of any catalogue type, and `coinvoice listen` forwards them to a local receiver that
 * verifies them with the `standardwebhooks` package.
 */
import { EVM_NETWORKS } from '@coinvoice/chains/evm/networks';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createCoinvoiceClient, type Invoice, type WebhookBody } from '@coinvoice/client';
import { Webhook } from 'standardwebhooks';
import { Receiver } from '../../services/notifier/test/support/receiver';
import { bootSystem, REPO_ROOT, type BootedSystem } from '../support/system';
import { awaitSignUpCode } from '../../deploy/local/src/mailbox';

const CLI = path.join(REPO_ROOT, 'packages', 'cli', 'bin', 'coinvoice.js');
let system: BootedSystem;
let workDir: string;
const children: ChildProcessWithoutNullStreams[] = [];

beforeAll(async () => {
  workDir = mkdtempSync(path.join(tmpdir(), 'coinvoice-cli-'));
  system = await bootSystem({ env: { PASSWORD_HASH_MEMORY_KIB: '1024' } });
}, 120_000);

afterAll(async () => {
  for (const child of children) child.kill('SIGTERM');
  await system?.stop();
  rmSync(workDir, { recursive: true, force: true });
});

/** A merchant with a sandbox project (no webhook URL) made through the typed client. */
async function merchantWithProject(email: string, password: string) {
  const anonymous = createCoinvoiceClient({ baseUrl: system.gatewayUrl });
  const started = await anonymous.POST('/api/merchant/register', { body: { email, password, name: 'Typed Shop' } });
  if (!started.data) throw new Error(`register: ${started.response.status}`);
  // The account comes with the code emailed to the address (issue 27).
  const code = await awaitSignUpCode(() => system.mail.messages(), started.data.email);
  const registered = await anonymous.POST('/api/merchant/register/confirm', { body: { email, code, password } });
  if (!registered.data) throw new Error(`register confirm: ${registered.response.status}`);
  const dashboard = createCoinvoiceClient({ baseUrl: system.gatewayUrl, token: registered.data.token });
  const project = await dashboard.POST('/api/merchant/projects', { body: { name: 'CLI sandbox', environment: 'sandbox' } });
  if (!project.data) throw new Error(`project: ${project.response.status}`);
  return { dashboard, project: project.data };
}

describe('the typed client', () => {
  test('creates, reads and pays an invoice, and answers errors as typed problems', async () => {
    const { dashboard, project } = await merchantWithProject(`typed-${Date.now()}@example.com`, 'a-long-password');
    const key = await dashboard.POST('/api/merchant/projects/{id}/api-keys', { params: { path: { id: project.id } }, body: { name: 'typed client' } });
    expect(key.response.status).toBe(201);
    const api = createCoinvoiceClient({ baseUrl: system.gatewayUrl, apiKey: key.data?.key ?? '' });

    const created = await api.POST('/api/invoice', {
      body: { priceAmount: '19.90', priceCurrency: 'EUR', payCurrency: 'BTC', orderId: 'typed-1', successUrl: 'https://shop.example/ok', cancelUrl: 'https://shop.example/cancel' },
      headers: { 'idempotency-key': 'typed-1' },
    });
    expect(created.response.status).toBe(201);
    const invoice: Invoice | undefined = created.data;
    expect(invoice).toMatchObject({ orderId: 'typed-1', priceAmount: 19.9, priceCurrency: 'EUR', payCurrency: 'BTC', status: 'Waiting' });

    const paid = await api.POST('/api/invoice/{id}/sandbox/pay', { params: { path: { id: invoice?.id ?? '' } } });
    expect(paid.data?.status).toBe('Paid');
    const read = await api.GET('/api/invoice/{id}', { params: { path: { id: invoice?.id ?? '' } } });
    expect(read.data).toMatchObject({ id: invoice?.id, status: 'Paid', amountReceived: invoice?.amountExpected });

    const missing = await api.GET('/api/invoice/{id}', { params: { path: { id: '00000000-0000-4000-8000-000000000000' } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error).toMatchObject({ status: 404, code: 'not_found' });
    const invalid = await api.POST('/api/invoice', { body: { priceAmount: 'abc', priceCurrency: 'EUR', payCurrency: 'BTC', successUrl: 'https://a.example', cancelUrl: 'https://a.example' } });
    expect(invalid.error?.code).toBe('validation_failed');
    expect(invalid.error?.errors?.map((e) => e.field)).toContain('priceAmount');

    // The credit follows the payment as an event (the payout service's ledger consumer): read until it is there.
    const credited = async () => (await api.GET('/api/payout/balance')).data?.balances.find((b) => b.currency === 'BTC')?.available;
    const deadline = Date.now() + 15_000;
    while ((await credited()) === undefined && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
    expect(await credited()).toBe(invoice?.amountExpected);

    // A page size is a number to the typed client, as to the API (it had to be the string '1').
    const page = await dashboard.GET('/api/merchant/projects/{id}/invoices', { params: { path: { id: project.id }, query: { limit: 1 } } });
    expect(page.data?.items.map((i) => i.id)).toEqual([invoice?.id]);
    expect((await dashboard.GET('/api/merchant/projects/{id}/invoices', { params: { path: { id: project.id }, query: { limit: 0 } } })).error?.errors).toEqual([
      { field: 'limit', message: 'must be at least 1' },
    ]);
  });
});

describe('the coinvoice CLI', () => {
  const email = `cli-${Date.now()}@example.com`;
  const password = 'a-long-password';
  let webhookSecret = '';
  const env = () => ({ ...process.env, COINVOICE_CONFIG: path.join(workDir, 'config.json'), COINVOICE_PASSWORD: password });

  function cli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
    return new Promise((resolve) => {
      const child = spawn(process.execPath, [CLI, ...args], { env: env() });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (code) => resolve({ code, stdout, stderr }));
    });
  }

  async function ok(args: string[]): Promise<string> {
    const run = await cli(args);
    expect({ args, code: run.code, stderr: run.stderr }).toEqual({ args, code: 0, stderr: '' });
    return run.stdout;
  }

  beforeAll(async () => {
    const { project } = await merchantWithProject(email, password);
    webhookSecret = project.webhookSecret;
  });

  test('login keeps a session and a CLI API key of the sandbox project, readable by its owner only', async () => {
    expect(await cli(['invoices', 'get', 'x'])).toMatchObject({ code: 1, stderr: expect.stringContaining('not logged in') });
    const out = await ok(['login', '--email', email, '--base-url', system.gatewayUrl]);
    expect(out).toMatch(/Logged in as .*project "CLI sandbox" \(sandbox/);
    expect(statSync(path.join(workDir, 'config.json')).mode & 0o777).toBe(0o600);
    expect(await cli(['login', '--email', email, '--password', 'wrong-password', '--base-url', system.gatewayUrl])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('login failed: 401'),
    });
  });

  test('logging in again keeps the CLI key while it is active (no key per login: a project holds at most 20); a revoked one is replaced', async () => {
    const configFile = path.join(workDir, 'config.json');
    const first = JSON.parse(readFileSync(configFile, 'utf8')) as { apiKey: string; apiKeyId: string; projectId: string; token: string };
    const again = await ok(['login', '--email', email, '--base-url', system.gatewayUrl]);
    expect(again).toContain('of an earlier login to this project kept');
    const second = JSON.parse(readFileSync(configFile, 'utf8')) as typeof first;
    expect({ apiKey: second.apiKey, apiKeyId: second.apiKeyId }).toEqual({ apiKey: first.apiKey, apiKeyId: first.apiKeyId });
    const listed = async () =>
      (await (await fetch(`${system.gatewayUrl}/api/merchant/projects/${first.projectId}/api-keys`, { headers: { authorization: `Bearer ${second.token}` } })).json()) as {
        items: Array<{ id: string; name: string; revokedAt: string | null }>;
      };
    expect((await listed()).items.filter((k) => k.name === 'coinvoice CLI' && k.revokedAt === null).map((k) => k.id)).toEqual([first.apiKeyId]);
    // Revoked in the dashboard: the next login makes a new key.
    const revoked = await fetch(`${system.gatewayUrl}/api/merchant/projects/${first.projectId}/api-keys/${first.apiKeyId}`, { method: 'DELETE', headers: { authorization: `Bearer ${second.token}` } });
    expect(revoked.status).toBeLessThan(300);
    expect(await ok(['login', '--email', email, '--base-url', system.gatewayUrl])).toMatch(/API key .*… saved in/);
    const third = JSON.parse(readFileSync(configFile, 'utf8')) as typeof first;
    expect(third.apiKeyId).not.toBe(first.apiKeyId);
    expect((await listed()).items.filter((k) => k.name === 'coinvoice CLI' && k.revokedAt === null).map((k) => k.id)).toEqual([third.apiKeyId]);
  });

  test('switching to another project and back keeps each project\'s CLI key: no new key per switch', async () => {
    const configFile = path.join(workDir, 'config.json');
    type Saved = { apiKey: string; apiKeyId: string; projectId: string; token: string };
    const first = JSON.parse(readFileSync(configFile, 'utf8')) as Saved;
    const headers = { authorization: `Bearer ${first.token}`, 'content-type': 'application/json' };
    const created = await fetch(`${system.gatewayUrl}/api/merchant/projects`, { method: 'POST', headers, body: JSON.stringify({ name: 'CLI second', environment: 'sandbox', webhookUrl: 'https://shop.example/hooks' }) });
    expect(created.status).toBe(201);
    const other = ((await created.json()) as { id: string }).id;
    const activeCliKeys = async (projectId: string) =>
      ((await (await fetch(`${system.gatewayUrl}/api/merchant/projects/${projectId}/api-keys`, { headers })).json()) as { items: Array<{ id: string; name: string; revokedAt: string | null }> }).items
        .filter((k) => k.name === 'coinvoice CLI' && k.revokedAt === null)
        .map((k) => k.id);

    expect(await ok(['login', '--email', email, '--base-url', system.gatewayUrl, '--project', other])).toMatch(/API key .*… saved in/);
    const onOther = JSON.parse(readFileSync(configFile, 'utf8')) as Saved;
    for (let round = 0; round < 2; round++) {
      expect(await ok(['login', '--email', email, '--base-url', system.gatewayUrl, '--project', first.projectId])).toContain('of an earlier login to this project kept');
      expect(JSON.parse(readFileSync(configFile, 'utf8'))).toMatchObject({ projectId: first.projectId, apiKey: first.apiKey, apiKeyId: first.apiKeyId });
      expect(await ok(['login', '--email', email, '--base-url', system.gatewayUrl, '--project', other])).toContain('of an earlier login to this project kept');
      expect(JSON.parse(readFileSync(configFile, 'utf8'))).toMatchObject({ projectId: other, apiKey: onOther.apiKey, apiKeyId: onOther.apiKeyId });
    }
    expect(await activeCliKeys(first.projectId)).toEqual([first.apiKeyId]);
    expect(await activeCliKeys(other)).toEqual([onOther.apiKeyId]);
    // The kept key is the one in force: an unknown invoice is 404 with it, not 401.
    expect(await cli(['invoices', 'get', '00000000-0000-4000-8000-000000000000'])).toMatchObject({ code: 1, stderr: expect.stringMatching(/404/) });
    // Back to the first project for the tests below.
    await ok(['login', '--email', email, '--base-url', system.gatewayUrl, '--project', first.projectId]);
  });

  test('invoices create, get, list and sandbox pay', async () => {
    const urls = ['--success-url', 'https://shop.example/thanks', '--cancel-url', 'https://shop.example/cart'];
    // Currency codes in any letter case, answered in canonical upper case.
    const created = JSON.parse(await ok(['invoices', 'create', '--amount', '12.50', '--currency', 'eur', '--pay', 'ltc', '--order-id', 'cli-1', ...urls])) as Invoice;
    expect(created).toMatchObject({ orderId: 'cli-1', priceAmount: 12.5, priceCurrency: 'EUR', payCurrency: 'LTC', status: 'Waiting', successUrl: 'https://shop.example/thanks' });
    // The shop's own pages are never guessed.
    expect(await cli(['invoices', 'create', '--amount', '12.50', '--currency', 'EUR', '--pay', 'LTC'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('--success-url is required'),
    });
    expect(JSON.parse(await ok(['invoices', 'get', created.id]))).toMatchObject({ id: created.id, status: 'Waiting' });
    const list = JSON.parse(await ok(['invoices', 'list', '--limit', '5'])) as { items: Array<{ id: string }> };
    expect(list.items.map((i) => i.id)).toContain(created.id);
    expect(JSON.parse(await ok(['sandbox', 'pay', created.id]))).toMatchObject({ id: created.id, status: 'Paid' });
    const bad = await cli(['invoices', 'create', '--amount', 'twelve', '--currency', 'EUR', '--pay', 'LTC', ...urls]);
    expect(bad).toMatchObject({ code: 1, stderr: expect.stringMatching(/creating the invoice failed: 400 validation_failed.*priceAmount/) });
  });

  test('invoices list filters by every status, live ones included; rates shows the prices new invoices get', async () => {
    const paid = JSON.parse(await ok(['invoices', 'list', '--status', 'Paid'])) as { items: Array<{ status: string }> };
    expect(paid.items.length).toBeGreaterThan(0);
    expect(paid.items.every((i) => i.status === 'Paid')).toBe(true);
    for (const status of ['PartiallyPaid', 'Confirming']) {
      expect(JSON.parse(await ok(['invoices', 'list', '--status', status]))).toEqual({ items: [], nextCursor: null });
    }
    expect(await cli(['invoices', 'list', '--status', 'Done'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining('--status must be one of Waiting, PartiallyPaid, Confirming, Paid, Expired'),
    });
    const rates = JSON.parse(await ok(['rates', '--json'])) as { source: string; rates: Array<{ currency: string; usd: number }> };
    expect(rates.source).toBe('static');
    expect(rates.rates).toContainEqual(expect.objectContaining({ currency: 'BTC', usd: 105000 }));
    // For a person: a table, each price's age in words (the static table is from 2025-06-01).
    const table = await ok(['rates']);
    expect(table).toContain('source: static (the development table: fixed prices of a past date, not the market; RATES_SOURCE=live prices from live quotes)');
    expect(table).toMatch(/^currency\s+price in USD\s+sources\s+age$/m);
    expect(table).toMatch(/^BTC\s+105000\s+static\s+\d+ days$/m);
    expect(table).not.toContain('ageMs');
  });

  test('currencies lists the assets and networks invoices take; invoices create --network pays on one', async () => {
    const listed = JSON.parse(await ok(['currencies', '--json'])) as { currencies: Array<{ currency: string; network: string; contract: string | null }> };
    expect(listed.currencies).toContainEqual(expect.objectContaining({ currency: 'USDT', network: 'bsc', contract: '0x55d398326f99059fF775485246999027B3197955' }));
    const table = await ok(['currencies']);
    expect(table).toMatch(/^currency\s+network\s+network name\s+decimals\s+confirmations\s+minimum\s+contract$/m);
    expect(table).toMatch(new RegExp(`^USDT\\s+bsc\\s+BNB Smart Chain\\s+6 \\(18 on chain\\)\\s+${EVM_NETWORKS.bsc.confirmations}\\s+0\\.000001\\s+0x55d398326f99059fF775485246999027B3197955$`, 'm'));
    // Amounts written out plainly, never in exponent notation.
    expect(table).toMatch(/^ETH\s+ethereum\s+Ethereum\s+8 \(18 on chain\)\s+\d+\s+0\.00000001\s+-$/m);
    expect(table).not.toMatch(/\de-\d/);
    expect(table).toMatch(/^BTC\s+bitcoin\s+Bitcoin\s+8\s+\d+\s+0\.00000294\s+-$/m);
    const urls = ['--success-url', 'https://shop.example/thanks', '--cancel-url', 'https://shop.example/cart'];
    const created = JSON.parse(await ok(['invoices', 'create', '--amount', '5', '--currency', 'USD', '--pay', 'USDC', '--network', 'polygon', ...urls])) as Invoice;
    expect(created).toMatchObject({ payCurrency: 'USDC', payNetwork: 'polygon' });
    const refused = await cli(['invoices', 'create', '--amount', '5', '--currency', 'USD', '--pay', 'USDT', '--network', 'base', ...urls]);
    expect(refused).toMatchObject({ code: 1, stderr: expect.stringMatching(/400 validation_failed.*payNetwork.*ethereum, arbitrum, optimism, polygon, bsc, tron/) });
  });

  test('listen forwards triggered test events, a live-only type included, to a local URL, signed like a real delivery', async () => {
    const receiver = await new Receiver(() => ({ status: 204 })).start();
    try {
      const listener = spawn(process.execPath, [CLI, 'listen', '--forward-to', receiver.url], { env: env() });
      children.push(listener);
      let output = '';
      listener.stdout.on('data', (c: Buffer) => (output += c.toString()));
      listener.stderr.on('data', (c: Buffer) => (output += c.toString()));
      const waitForOutput = async (pattern: RegExp, timeoutMs = 20_000) => {
        const deadline = Date.now() + timeoutMs;
        while (!pattern.test(output)) {
          if (Date.now() > deadline) throw new Error(`listen printed no ${pattern} within ${timeoutMs} ms:\n${output}`);
          await new Promise((r) => setTimeout(r, 100));
        }
      };
      await waitForOutput(/Ready! Forwarding the events of project "CLI sandbox"/);

      // invoice.paid, and invoice.confirming, which only live invoices on chain have for real.
      const paid = await ok(['trigger', 'invoice.paid']);
      expect(paid).toMatch(/Triggered a test invoice\.paid event \[[0-9a-f-]{36}\] in project "CLI sandbox" \(sandbox\): the project has no webhook URL: it reaches `coinvoice listen` only/);
      const confirming = await ok(['trigger', 'invoice.confirming']);
      const eventIds = [paid, confirming].map((out) => /event \[([0-9a-f-]{36})\]/.exec(out)?.[1]);

      const requests = await receiver.waitFor(2, 20_000);
      for (const [i, eventType] of (['invoice.paid', 'invoice.confirming'] as const).entries()) {
        const req = requests.find((r) => r.headers['webhook-id'] === eventIds[i]);
        if (!req) throw new Error(`${eventType} not forwarded`);
        // The local endpoint verifies it exactly as it verifies production deliveries.
        const verified = new Webhook(webhookSecret).verify(req.body, {
          'webhook-id': String(req.headers['webhook-id']),
          'webhook-timestamp': String(req.headers['webhook-timestamp']),
          'webhook-signature': String(req.headers['webhook-signature']),
        }) as WebhookBody<typeof eventType>;
        expect(verified).toMatchObject({ invoiceId: '00000000-0000-4000-8000-000000000000', orderId: 'coinvoice-test-event', environment: 'sandbox' });
        expect(req.headers['webhook-event-type']).toBe(eventType);
        expect(req.headers['content-type']).toBe('application/json');
        expect(() => new Webhook(`whsec_${Buffer.alloc(32, 1).toString('base64')}`).verify(req.body, req.headers as Record<string, string>)).toThrow();
      }
      await waitForOutput(new RegExp(`--> invoice\\.confirming \\[${eventIds[1]}\\]\\s+<-- \\[204\\] POST ${receiver.url.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')}`));
      listener.kill('SIGTERM');
    } finally {
      await receiver.stop();
    }
  });

  test('trigger --help lists every event type of the catalogue; an unknown type is refused with that list', async () => {
    const help = await ok(['trigger', '--help']);
    const catalogue = ['webhook.test', ...Object.keys((await (await fetch(`${system.gatewayUrl}/openapi.json`)).json() as { webhooks: Record<string, unknown> }).webhooks)];
    expect(catalogue).toHaveLength(12);
    for (const type of catalogue) expect(help).toMatch(new RegExp(`^  ${type.replace('.', '\\.')}\\s`, 'm'));
    expect(await cli(['trigger', 'invoice.nope'])).toMatchObject({
      code: 1,
      stderr: expect.stringContaining(`unknown event type invoice.nope; one of: ${catalogue.join(', ')}`),
    });
    expect(await cli(['trigger'])).toMatchObject({ code: 1, stderr: expect.stringContaining('<event type> is required') });
  });

  test('listen with a key the stream refuses says why (the problem\'s code and words) and stops', async () => {
    const configFile = path.join(workDir, 'config.json');
    const badConfig = path.join(workDir, 'bad-key.json');
    writeFileSync(badConfig, JSON.stringify({ ...JSON.parse(readFileSync(configFile, 'utf8')), apiKey: 'SBX_not-a-key' }), { mode: 0o600 });
    const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
      const child = spawn(process.execPath, [CLI, 'listen', '--forward-to', 'http://127.0.0.1:9/hook'], { env: { ...env(), COINVOICE_CONFIG: badConfig } });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      child.on('close', (code) => resolve({ code, stderr }));
    });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/the event stream answered 401 invalid_api_key: .+ \(run `coinvoice login` again\)/);
  });

  test('the event stream needs a valid API key', async () => {
    const res = await fetch(`${system.gatewayUrl}/api/events/stream`, { headers: { 'x-api-key': 'SBX_not-a-key' } });
    expect(res.status).toBe(401);
    expect(res.headers.get('content-type')).toContain('application/problem+json');
  });
});
