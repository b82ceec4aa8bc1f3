/**
 * The README and docs/ of a fresh clone: every link stays inside the repository (and names a file
 * and heading that exist) except public standards and package pages; the event catalogue is the
 * one written from the OpenAPI document, and lists every event the notifier sends as a webhook.
 */
import { readdirSync, readFileSync, existsSync, statSync } from 'node:fs';
import path from 'node:path';
import { buildForDocument } from '../../gateway/src/openapi-document';
import { eventCatalogueMarkdown, withReadmeCatalogue } from '../../gateway/src/event-catalogue';
import { EVENT_WEBHOOK_TABLE, isWebhookEventType } from '../../services/notifier/src/domain/payloads';
import { anchorsOf, linksOf } from '../support/markdown';
import { REPO_ROOT } from '../support/system';

/** Public standards and package registries: the only places outside the repository a doc may link to. */
const ALLOWED_HOSTS = new Set(['www.standardwebhooks.com', 'www.rfc-editor.org', 'datatracker.ietf.org', 'spec.openapis.org', 'www.npmjs.com', 'pypi.org', 'pkg.go.dev', 'packagist.org']);

const DOCS = ['README.md', ...readdirSync(path.join(REPO_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

test.each(DOCS)('%s links only inside the repository, to files and headings that exist (or to standards and package pages)', (doc) => {
  const file = path.join(REPO_ROOT, doc);
  const text = readFileSync(file, 'utf8');
  const problems: string[] = [];
  for (const target of linksOf(text)) {
    if (/^https?:\/\//.test(target)) {
      const host = new URL(target).host;
      if (!ALLOWED_HOSTS.has(host)) problems.push(`${target}: outside the repository`);
      continue;
    }
    if (/^[a-z]+:/i.test(target)) {
      problems.push(`${target}: not a link into the repository`);
      continue;
    }
    const [relative = '', anchor] = target.split('#');
    const resolved = relative === '' ? file : path.resolve(path.dirname(file), relative);
    if (path.relative(REPO_ROOT, resolved).startsWith('..')) {
      problems.push(`${target}: leaves the repository`);
      continue;
    }
    if (!existsSync(resolved)) {
      problems.push(`${target}: no such file`);
      continue;
    }
    if (anchor && statSync(resolved).isFile() && resolved.endsWith('.md') && !anchorsOf(readFileSync(resolved, 'utf8')).has(anchor)) {
      problems.push(`${target}: no heading #${anchor}`);
    }
  }
  expect(problems).toEqual([]);
});

test('the link check catches what it claims to', () => {
  expect(linksOf('[a](../shared/notes.md) <https://example.com/x> see https://cdn.example/y `https://in.code/z`')).toEqual([
    '../shared/notes.md',
    'https://example.com/x',
    'https://cdn.example/y',
  ]);
  expect(anchorsOf('## invoice.paid\n## Payouts end to end')).toEqual(new Set(['invoicepaid', 'payouts-end-to-end']));
});

describe('the event catalogue', () => {
  let doc: ReturnType<Awaited<ReturnType<typeof buildForDocument>>['openapi']['document']>;
  beforeAll(async () => {
    const built = await buildForDocument();
    doc = built.openapi.document();
    await built.app.close();
  });

  test('docs/webhook-events.md and the README table are written from the OpenAPI document (npm run openapi:snapshot)', () => {
    expect(readFileSync(path.join(REPO_ROOT, 'docs', 'webhook-events.md'), 'utf8')).toBe(eventCatalogueMarkdown(doc));
    const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
    expect(readme).toBe(withReadmeCatalogue(readme, doc));
  });

  test('every event the notifier sends as a webhook is in the catalogue, with its webhook-event-type', () => {
    const catalogue = readFileSync(path.join(REPO_ROOT, 'docs', 'webhook-events.md'), 'utf8');
    for (const type of Object.keys(EVENT_WEBHOOK_TABLE).filter(isWebhookEventType)) {
      expect(catalogue).toContain(`## ${type}\n`);
      expect(catalogue).toContain(`\`webhook-event-type: ${type}\``);
    }
  });
});

describe('the walkthroughs hold no trap for a newcomer', () => {
  const readme = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
  const guide = readFileSync(path.join(REPO_ROOT, 'docs', 'integration-guide.md'), 'utf8');
  const webhookUrls = (environment: string) =>
    [...readme.matchAll(/"environment":"(\w+)","webhookUrl":"([^"]+)"/g)].filter((m) => m[1] === environment).map((m) => m[2]);

  test('the live walkthrough gives the live project a receiver of its own (each project has its own whsec_ secret)', () => {
    const [sandbox] = webhookUrls('sandbox');
    const [live] = webhookUrls('live');
    expect(sandbox).toBeDefined();
    expect(live).toBeDefined();
    expect(new URL(live!).port).not.toBe(new URL(sandbox!).port);
    expect(readme).toMatch(/its own webhookSecret/);
  });

  test('each walkthrough starts a receiver that exists, on the port its project’s webhook URL names, with that project’s secret', () => {
    expect(existsSync(path.join(REPO_ROOT, 'docs', 'examples', 'webhook-receiver.mjs'))).toBe(true);
    for (const environment of ['sandbox', 'live']) {
      const [url] = webhookUrls(environment);
      expect(readme).toContain(`COINVOICE_WEBHOOK_SECRET='whsec_…' PORT=${new URL(url!).port} node docs/examples/webhook-receiver.mjs`);
    }
    // The live walkthrough restarts npm start with a chain watcher: the sandbox one must stop first.
    expect(readme).toMatch(/Stop the\s+#\s+npm start of the sandbox walkthrough first/);
  });

  test('an emailed code is found by recipient and subject, never as "the newest .eml"', () => {
    for (const text of [readme, guide]) expect(text).not.toMatch(/newest \.eml/);
    expect(readme).toContain("grep -l '^To: me@shop.example' .data/mailbox/*.eml | xargs grep -l '^Subject: Your coinvoice sign-up code'");
    expect(guide).toContain("grep -l '^Subject: Confirm your payout of 0.0002 BTC' .data/mailbox/*.eml");
  });

  test('the payout example uses a valid Bitcoin testnet address, and the guide says EIP-55 checksums are required', () => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const bitcoin = require('bitcoinjs-lib') as typeof import('bitcoinjs-lib');
    const example = /"currency":"BTC","address":"([^"]+)"/.exec(guide)?.[1];
    expect(example).toBeDefined();
    expect(example).not.toContain('…');
    expect(() => bitcoin.address.toOutputScript(example!, bitcoin.networks.testnet)).not.toThrow();
    expect(() => bitcoin.address.toOutputScript(example!, bitcoin.networks.bitcoin)).toThrow();
    expect(guide).toMatch(/EIP-55 mixed-case checksum/);
  });
});
