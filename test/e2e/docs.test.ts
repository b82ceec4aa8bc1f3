/**
 * /docs in a real browser (Debian's Chromium, as the checkout page is tested): Scalar API
 * Reference served by the gateway from its npm package renders every operation and webhook of
 * /openapi.json under the page's strict CSP, with no request leaving the gateway and no CSP
 * violation. The gateway runs in-process (the reference needs no backend).
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Browser } from 'playwright-core';
import { buildForDocument } from '../../gateway/src/openapi-document';
import { launchBrowser } from '../support/browser';
import { REPO_ROOT } from '../support/system';

const ARTIFACTS = path.join(REPO_ROOT, 'test-artifacts');
let built: Awaited<ReturnType<typeof buildForDocument>>;
let browser: Browser;
let origin: string;

beforeAll(async () => {
  mkdirSync(ARTIFACTS, { recursive: true });
  [built, browser] = await Promise.all([buildForDocument(), launchBrowser()]);
  origin = await built.app.listen({ port: 0, host: '127.0.0.1' });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await built?.app.close();
});

test('/docs is Scalar API Reference under a strict CSP, with every operation and webhook, and nothing fetched elsewhere', async () => {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await context.newPage();
  const requests: string[] = [];
  const blockedByCsp: string[] = [];
  const problems: string[] = [];
  page.on('request', (r) => requests.push(r.url()));
  page.on('requestfailed', (r) => {
    if (r.failure()?.errorText === 'csp') blockedByCsp.push(r.url());
  });
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(m.text());
  });
  page.on('pageerror', (e) => problems.push(e.message));

  const res = await page.goto(`${origin}/docs`);
  expect(res?.headers()['content-security-policy']).toMatch(/default-src 'none'; script-src 'self'/);
  // Scalar's own page, filled from the document: its title as a heading on screen, the sidebar's
  // operations and webhooks.
  await page.getByRole('heading', { name: 'coinvoice API', exact: true }).waitFor({ state: 'visible', timeout: 30_000 });
  await expect(page.getByText('Webhooks', { exact: true }).first().isVisible()).resolves.toBe(true);
  const doc = built.openapi.document() as { paths: Record<string, Record<string, { summary?: string }>>; webhooks: Record<string, unknown> };
  const text = (await page.textContent('body')) ?? '';
  expect(text).toContain('coinvoice API');
  const invoiceSummary = doc.paths['/api/invoice']?.post?.summary ?? '';
  expect(invoiceSummary).not.toBe('');
  expect(text).toContain(invoiceSummary);
  expect(text).toContain('invoice.paid');
  // No Scalar cloud features on the page (AI agent, MCP generation, developer tools).
  expect(text).not.toContain('Ask AI');
  expect(text).not.toContain('Generate MCP');
  await page.screenshot({ path: path.join(ARTIFACTS, 'docs-1280x800.png') });

  expect(requests).toContain(`${origin}/docs/assets/scalar.js`);
  // Scalar's stylesheet declares web fonts on its CDN, which it asks for whatever the config
  // says; the CSP refuses them in the browser (system fonts are used), so nothing leaves the
  // page. Anything else from elsewhere, or refused for another reason, fails here.
  const elsewhere = requests.filter((u) => !u.startsWith(origin) && !u.startsWith('data:'));
  expect(elsewhere.filter((u) => !/^https:\/\/fonts\.scalar\.com\/[a-z-]+\.woff2$/.test(u))).toEqual([]);
  expect(blockedByCsp.sort()).toEqual(elsewhere.sort());
  expect(problems.filter((p) => /Content Security Policy|Refused to/i.test(p) && !/Loading the font 'https:\/\/fonts\.scalar\.com\//.test(p))).toEqual([]);
  await context.close();
}, 60_000);

test('the library is the npm package\'s own build, served as is', async () => {
  const served = await fetch(`${origin}/docs/assets/scalar.js`);
  expect(served.status).toBe(200);
  expect(served.headers.get('content-type')).toMatch(/javascript/);
  const { readFileSync } = await import('node:fs');
  const file = path.join(path.dirname(require.resolve('@scalar/api-reference', { paths: [path.join(REPO_ROOT, 'dashboard')] })), 'browser', 'standalone.js');
  expect(await served.text()).toBe(readFileSync(file, 'utf8'));
  expect((await fetch(`${origin}/docs/assets/nothing.js`)).status).toBe(404);
});
