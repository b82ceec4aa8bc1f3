/**
 * The commands: login, invoices create|get|list, sandbox pay, trigger, rates, currencies. Each takes the parsed
 * options and an output function, and answers through the typed client (@coinvoice/client).
 */
import type { paths } from '@coinvoice/client';
import { apiKeyClient, merchantClient, unwrap } from './api';
import { CliError, projectKeyRef, readConfig, writeConfig, type CliConfig } from './config';
import { ageInWords, table } from './format';

export interface Io {
  out(line: string): void;
  configFile: string;
}

const json = (value: unknown) => JSON.stringify(value, null, 2);

export async function login(io: Io, o: { baseUrl: string; email: string; password: string; project?: string }): Promise<CliConfig> {
  const anonymous = merchantClient({ baseUrl: o.baseUrl, token: '' });
  const session = unwrap(await anonymous.POST('/api/merchant/login', { body: { email: o.email, password: o.password } }), 'login');
  const merchant = merchantClient({ baseUrl: o.baseUrl, token: session.token });
  const projects = unwrap(await merchant.GET('/api/merchant/projects'), 'listing your projects');
  const items = projects.items;
  const project = o.project ? items.find((p) => p.id === o.project) : (items.find((p) => p.environment === 'sandbox') ?? items[0]);
  if (!project) {
    throw new CliError(o.project ? `no project ${o.project} among yours` : 'you have no project yet: create a sandbox project first (POST /api/merchant/projects)');
  }
  // The key an earlier login made for this project is used again while it is not revoked: a new
  // key per login would use up the project's keys (MAX_ACTIVE_API_KEYS_PER_PROJECT) and its
  // hourly key creations, and leave the old ones active — also after logins to other projects.
  const previous = previousConfig(io.configFile);
  const projectKeys = { ...knownProjectKeys(previous) };
  const ref = projectKeyRef(o.baseUrl, project.id);
  const earlier = projectKeys[ref];
  const keys = earlier
    ? unwrap(await merchant.GET('/api/merchant/projects/{id}/api-keys', { params: { path: { id: project.id } } }), 'listing the project\'s API keys').items
    : [];
  const kept = keys.find((k) => k.id === earlier?.apiKeyId && k.revokedAt === null);
  const key = kept
    ? { id: kept.id, key: earlier!.apiKey, prefix: kept.prefix }
    : unwrap(
        await merchant.POST('/api/merchant/projects/{id}/api-keys', { params: { path: { id: project.id } }, body: { name: 'coinvoice CLI' } }),
        'creating an API key for the CLI',
      );
  projectKeys[ref] = { apiKey: key.key, apiKeyId: key.id };
  const config: CliConfig = {
    baseUrl: o.baseUrl,
    email: o.email,
    token: session.token,
    tokenExpiresAt: session.expiresAt,
    projectId: project.id,
    projectName: project.name,
    environment: project.environment,
    apiKey: key.key,
    apiKeyId: key.id,
    projectKeys,
  };
  writeConfig(io.configFile, config);
  io.out(
    `Logged in as ${o.email}: project "${project.name}" (${project.environment}, ${project.id}), API key ${key.prefix}… ${kept ? 'of an earlier login to this project kept' : 'saved'} in ${io.configFile}`,
  );
  return config;
}

/** The CLI keys an earlier config holds: its projectKeys, and its current key (configs of earlier versions had only that). */
function knownProjectKeys(previous: CliConfig | undefined): Record<string, { apiKey: string; apiKeyId: string }> {
  if (!previous) return {};
  const known: Record<string, { apiKey: string; apiKeyId: string }> = {};
  for (const [ref, entry] of Object.entries(previous.projectKeys ?? {})) {
    if (typeof entry?.apiKey === 'string' && typeof entry.apiKeyId === 'string') known[ref] = { apiKey: entry.apiKey, apiKeyId: entry.apiKeyId };
  }
  if (previous.apiKeyId) known[projectKeyRef(previous.baseUrl, previous.projectId)] = { apiKey: previous.apiKey, apiKeyId: previous.apiKeyId };
  return known;
}

/** The config an earlier login wrote, if it is readable; anything else is no earlier login. */
function previousConfig(file: string): CliConfig | undefined {
  try {
    return readConfig(file);
  } catch {
    return undefined;
  }
}

export async function createInvoice(
  io: Io,
  o: { amount: string; currency: string; pay: string; network?: string; orderId?: string; description?: string; successUrl: string; cancelUrl: string },
) {
  const client = apiKeyClient(readConfig(io.configFile));
  const invoice = unwrap(
    await client.POST('/api/invoice', {
      body: {
        priceAmount: o.amount,
        priceCurrency: o.currency,
        payCurrency: o.pay,
        ...(o.network ? { payNetwork: o.network } : {}),
        successUrl: o.successUrl,
        cancelUrl: o.cancelUrl,
        ...(o.orderId ? { orderId: o.orderId } : {}),
        ...(o.description ? { orderDescription: o.description } : {}),
      },
    }),
    'creating the invoice',
  );
  io.out(json(invoice));
  return invoice;
}

export async function getInvoice(io: Io, id: string) {
  const client = apiKeyClient(readConfig(io.configFile));
  const invoice = unwrap(await client.GET('/api/invoice/{id}', { params: { path: { id } } }), `getting invoice ${id}`);
  io.out(json(invoice));
  return invoice;
}

type InvoiceListQuery = NonNullable<paths['/api/merchant/projects/{id}/invoices']['get']['parameters']['query']>;
export type InvoiceStatusFilter = NonNullable<InvoiceListQuery['status']>;
/** Every status an invoice can be in (live invoices also pass through PartiallyPaid and Confirming). */
export const INVOICE_STATUSES: readonly InvoiceStatusFilter[] = ['Waiting', 'PartiallyPaid', 'Confirming', 'Paid', 'Expired'];

export async function listInvoices(io: Io, o: { limit?: string; status?: InvoiceListQuery['status'] }) {
  const config = readConfig(io.configFile);
  const client = merchantClient(config);
  if (o.limit !== undefined && !/^\d{1,15}$/.test(o.limit)) throw new CliError(`--limit ${o.limit}: expected a whole number from 1 to 100`);
  const query: InvoiceListQuery = { ...(o.limit ? { limit: Number(o.limit) } : {}), ...(o.status ? { status: o.status } : {}) };
  const page = unwrap(
    await client.GET('/api/merchant/projects/{id}/invoices', { params: { path: { id: config.projectId }, query } }),
    'listing invoices',
  );
  io.out(json(page));
  return page;
}

export async function sandboxPay(io: Io, id: string) {
  const client = apiKeyClient(readConfig(io.configFile));
  const invoice = unwrap(await client.POST('/api/invoice/{id}/sandbox/pay', { params: { path: { id } } }), `paying invoice ${id}`);
  io.out(json(invoice));
  return invoice;
}

type WebhookTestBody = NonNullable<paths['/api/merchant/projects/{id}/webhook-test']['post']['requestBody']>['content']['application/json'];
export type TriggerEventType = NonNullable<WebhookTestBody['eventType']>;

/**
 * Every type `trigger` sends, with what the event means: each event of the catalogue
 * (docs/webhook-events.md) and the ping. Keyed by the API's own list of test event types, so a
 * catalogue event without a line here does not compile.
 */
export const TRIGGER_EVENTS: Readonly<Record<TriggerEventType, string>> = {
  'webhook.test': 'a ping {eventId, projectId, message, sentAt}',
  'invoice.paid': 'an invoice was paid',
  'invoice.expired': 'an unpaid invoice expired',
  'invoice.confirming': 'live: a payment is on chain, awaiting confirmations',
  'invoice.partially_paid': 'live: less than the price was received',
  'invoice.late_payment': 'live: a payment after expiry, after Paid, or in another asset',
  'invoice.reopened': 'live: a chain reorg removed payments before Paid',
  'payout.requested': 'a payout was requested, awaiting its emailed code',
  'payout.verified': 'a payout was confirmed with its code',
  'payout.completed': 'a payout was sent on chain',
  'payout.rejected': 'an operator refused a payout',
  'payout.cancelled': 'a payout was cancelled',
};

function isTriggerEventType(value: string): value is TriggerEventType {
  return Object.hasOwn(TRIGGER_EVENTS, value);
}

/** `coinvoice trigger --help`: every type it sends. */
export function triggerUsage(): string {
  const width = Math.max(...Object.keys(TRIGGER_EVENTS).map((t) => t.length));
  return [
    'usage: coinvoice trigger <event type>',
    '',
    'Sends a signed test event of that type to your project: to its webhook URL (with one) and to',
    '`coinvoice listen`. Its body has the fields and types of a real event of that type, holding',
    'test values: invoiceId/payoutId 00000000-0000-4000-8000-000000000000, orderId "coinvoice-test-event".',
    '',
    'event types:',
    ...Object.entries(TRIGGER_EVENTS).map(([type, meaning]) => `  ${type.padEnd(width)}  ${meaning}`),
  ].join('\n');
}

/**
 * Sends a test event of `eventType` to the logged-in project (POST …/webhook-test), like
 * `stripe trigger`: any event of the catalogue, the live-only ones too, in a sandbox or a live
 * project, signed and delivered as a real one is.
 */
export async function trigger(io: Io, eventType: string) {
  if (!isTriggerEventType(eventType)) {
    throw new CliError(`unknown event type ${eventType}; one of: ${Object.keys(TRIGGER_EVENTS).join(', ')}`);
  }
  const config = readConfig(io.configFile);
  const sent = unwrap(
    await merchantClient(config).POST('/api/merchant/projects/{id}/webhook-test', { params: { path: { id: config.projectId } }, body: { eventType } }),
    `sending a test ${eventType} event`,
  );
  const where = sent.delivery
    ? `queued to ${sent.delivery.url} (delivery ${sent.delivery.id}) and to \`coinvoice listen\``
    : 'the project has no webhook URL: it reaches `coinvoice listen` only';
  io.out(`Triggered a test ${sent.eventType} event [${sent.eventId}] in project "${config.projectName}" (${config.environment}): ${where}`);
  io.out(sent.payload);
  return sent;
}

/**
 * The exchange rates new invoices are priced at now (public: no login needed): a table with each
 * price's sources and age in words, or the API's JSON with `json`.
 */
export async function rates(io: Io, baseUrl: string, o: { json?: boolean } = {}) {
  const answer = unwrap(await merchantClient({ baseUrl, token: '' }).GET('/api/rates'), 'reading the rates');
  if (o.json) {
    io.out(json(answer));
    return answer;
  }
  io.out(
    answer.source === 'static'
      ? 'source: static (the development table: fixed prices of a past date, not the market; RATES_SOURCE=live prices from live quotes)'
      : `source: ${answer.source} (a quote older than ${ageInWords(answer.maxAgeMs)} is never used)`,
  );
  io.out(
    table(
      ['currency', 'price in USD', 'sources', 'age'],
      answer.rates.map((r) => [r.currency, String(r.usd), r.sources.join(', '), r.ageMs === null ? 'unknown' : ageInWords(r.ageMs)]),
    ),
  );
  return answer;
}

/**
 * The assets and networks invoices can be paid in (public: no login needed): a table of each
 * (asset, network) with its decimals, confirmations, minimum and contract, or the API's JSON with
 * `json` (GET /api/currencies, docs/networks.md).
 */
export async function currencies(io: Io, baseUrl: string, o: { json?: boolean } = {}) {
  const answer = unwrap(await merchantClient({ baseUrl, token: '' }).GET('/api/currencies'), 'reading the currencies');
  if (o.json) {
    io.out(json(answer));
    return answer;
  }
  io.out(
    table(
      ['currency', 'network', 'network name', 'decimals', 'confirmations', 'minimum', 'contract'],
      answer.currencies.map((c) => [
        c.currency,
        c.network,
        c.networkLabel,
        c.baseUnitDecimals === c.decimals ? String(c.decimals) : `${c.decimals} (${c.baseUnitDecimals} on chain)`,
        String(c.confirmations),
        // A JSON number of at most `decimals` places: written out plainly (String gives 1e-8).
        c.minimumAmount.toFixed(c.decimals).replace(/\.?0+$/, ''),
        c.contract ?? '-',
      ]),
    ),
  );
  return answer;
}
