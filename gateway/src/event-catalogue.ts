/**
 * The webhook event catalogue as Markdown, written from the OpenAPI document's `webhooks` (which
 * come from schemas/webhook-events.ts): docs/webhook-events.md in full and the README's table.
 * `npm run openapi:snapshot` rewrites both; a test fails when either is stale. A new event is
 * documented by adding it to WEBHOOK_EVENTS, nothing else.
 */
type Schema = { type?: string; const?: unknown; anyOf?: Schema[]; format?: string; description?: string; properties?: Record<string, Schema>; required?: string[] };
type WebhookOperation = { post: { summary?: string; requestBody: { content: { 'application/json': { schema: Schema } } } } };

export const README_CATALOGUE_START = '<!-- event-catalogue:start (npm run openapi:snapshot writes this table) -->';
export const README_CATALOGUE_END = '<!-- event-catalogue:end -->';

function typeOf(s: Schema): string {
  if (s.const !== undefined) return `\`${JSON.stringify(s.const)}\``;
  if (s.anyOf) return s.anyOf.map(typeOf).join(' \\| ');
  if (s.format) return `${s.type ?? 'string'} (${s.format})`;
  return s.type ?? 'any';
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|').replace(/\n/g, ' ');
}

/** The OpenAPI document as OpenApiRegistry.document() gives it; its webhooks are ours, in WebhookOperation's shape. */
type OpenApiDocument = Record<string, unknown>;

function eventsOf(document: OpenApiDocument): Array<[string, WebhookOperation]> {
  return Object.entries((document.webhooks ?? {}) as Record<string, WebhookOperation>);
}

/** docs/webhook-events.md */
export function eventCatalogueMarkdown(document: OpenApiDocument): string {
  const lines = [
    '# Webhook event catalogue',
    '',
    '<!-- Written by `npm run openapi:snapshot` from the OpenAPI document; do not edit by hand. -->',
    '',
    'Every delivery is a `POST` of a flat JSON body to the project’s webhook URL with the headers',
    '`webhook-id` (the event id, the same on every retry: de-duplicate on it), `webhook-timestamp`,',
    '`webhook-signature` (Standard Webhooks, see [the integration guide](integration-guide.md#webhooks)) and',
    '`webhook-event-type` (the event type below: dispatch on it). Bodies of different events arrive',
    'at the same URL; the header says which one it is. Amounts are JSON numbers written from exact',
    'decimals.',
    '',
    '| event | sent when |',
    '| --- | --- |',
    ...eventsOf(document).map(([name, op]) => `| [\`${name}\`](#${name.replace(/[^a-z0-9_-]/g, '')}) | ${cell(op.post.summary ?? '')} |`),
    '',
    '## Test events',
    '',
    'Any event above can be sent as a test, the live-only ones too, in a sandbox or a live project:',
    '`coinvoice trigger <event type>` ([the CLI](cli-and-client.md#trigger)), or',
    '`POST /api/merchant/projects/{id}/webhook-test` with `{"eventType":"<event type>"}` (without a',
    'body: `webhook.test`, a ping `{eventId, projectId, message, sentAt}`). A test event is signed,',
    'delivered, retried and logged exactly like a real one (the same headers, `webhook-event-type`',
    'included) and reaches `coinvoice listen` too; a project without a webhook URL gets it there only.',
    'Its body has exactly the fields, order and types of a real event of its type, holding sample',
    'values that mark it as a test:',
    '',
    '- `invoiceId` / `payoutId`: `00000000-0000-4000-8000-000000000000` (no invoice or payout has',
    '  it: a receiver that looks it up finds nothing);',
    '- `orderId`: `"coinvoice-test-event"`; a `transactionHash` is all zeros; `adminNote` says it is a',
    '  test;',
    '- `environment`: the project’s; `occurredAt`: when it was sent.',
    '',
    'Test events count against a per-project limit (10 a minute; 429 `rate_limited` beyond). An',
    'unknown `eventType` is a 400 `validation_failed` naming the field and listing every valid type.',
    '',
  ];
  for (const [name, op] of eventsOf(document)) {
    const body = op.post.requestBody.content['application/json'].schema;
    const required = new Set(body.required ?? []);
    lines.push(`## ${name}`, '', `${op.post.summary ?? ''}.`, '', `Header \`webhook-event-type: ${name}\`. Body:`, '', '| field | type | always present | meaning |', '| --- | --- | --- | --- |');
    for (const [field, schema] of Object.entries(body.properties ?? {})) {
      lines.push(`| \`${field}\` | ${typeOf(schema)} | ${required.has(field) ? 'yes' : 'no'} | ${cell(schema.description ?? '')} |`);
    }
    lines.push('');
  }
  return `${lines.join('\n')}`;
}

/** The README's table (between the markers). */
export function readmeCatalogueTable(document: OpenApiDocument): string {
  return [
    '| event (`webhook-event-type`) | sent when | body fields |',
    '| --- | --- | --- |',
    ...eventsOf(document).map(([name, op]) => {
      const fields = Object.keys(op.post.requestBody.content['application/json'].schema.properties ?? {}).map((f) => `\`${f}\``).join(', ');
      return `| [\`${name}\`](docs/webhook-events.md#${name.replace(/[^a-z0-9_-]/g, '')}) | ${cell(op.post.summary ?? '')} | ${fields} |`;
    }),
  ].join('\n');
}

/** The README with its catalogue table replaced; throws when the markers are missing. */
export function withReadmeCatalogue(readme: string, document: OpenApiDocument): string {
  const start = readme.indexOf(README_CATALOGUE_START);
  const end = readme.indexOf(README_CATALOGUE_END);
  if (start < 0 || end < start) throw new Error('README.md has no event catalogue markers');
  return `${readme.slice(0, start + README_CATALOGUE_START.length)}\n${readmeCatalogueTable(document)}\n${readme.slice(end)}`;
}
