/**
 * The commands: login, invoices create|get|list, sandbox pay, trigger, rates. Each takes the parsed
 * options and an output function, and answers through the typed client (@coinvoice/client).
 */
import type { paths } from '@coinvoice/client';
import { apiKeyClient, merchantClient, unwrap } from './api';
import { CliError, readConfig, writeConfig, type CliConfig } from './config';
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
  const key = unwrap(
    await merchant.POST('/api/merchant/projects/{id}/api-keys', { params: { path: { id: project.id } }, body: { name: 'coinvoice CLI' } }),
    'creating an API key for the CLI',
  );
  const config: CliConfig = {
    baseUrl: o.baseUrl,
    email: o.email,
    token: session.token,
    tokenExpiresAt: session.expiresAt,
    projectId: project.id,
    projectName: project.name,
    environment: project.environment,
    apiKey: key.key,
  };
  writeConfig(io.configFile, config);
  io.out(`Logged in as ${o.email}: project "${project.name}" (${project.environment}, ${project.id}), API key ${key.prefix}… saved in ${io.configFile}`);
  return config;
}

export async function createInvoice(
  io: Io,
  o: { amount: string; currency: string; pay: string; orderId?: string; description?: string; successUrl: string; cancelUrl: string },
) {
  const client = apiKeyClient(readConfig(io.configFile));
  const invoice = unwrap(
    await client.POST('/api/invoice', {
      body: {
        priceAmount: o.amount,
        priceCurrency: o.currency,
        payCurrency: o.pay,
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
  const query: InvoiceListQuery = { ...(o.limit ? { limit: o.limit } : {}), ...(o.status ? { status: o.status } : {}) };
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

/**
 * A testnet address (bech32 P2WPKH, checksum valid) that `trigger` pays sandbox payouts to: sandbox
 * payouts are simulated, nothing is ever sent to it.
 */
export const TRIGGER_PAYOUT_ADDRESS = 'tb1qvr08xkp6hpqfltxnx4mj0apwry8m2gegzqp9la';

/**
 * Every event of the catalogue (README, docs/webhook-events.md), and how `trigger` causes it in a
 * sandbox project, through the public API as a shop would: `flow`, or why it cannot happen there.
 */
type TriggerFlow = 'invoice' | 'payout' | 'cancelled payout' | 'verified payout';
const LIVE_ONLY = 'happens only to live invoices, on chain (README: "Live payments: try them locally with anvil")';
export const TRIGGERS: Readonly<Record<string, { flow: TriggerFlow } | { impossible: string }>> = {
  'invoice.paid': { flow: 'invoice' },
  'invoice.expired': { impossible: 'comes when an unpaid invoice passes its expiredAt (the project\'s invoice lifetime, 5 minutes at least): create one and wait' },
  'invoice.confirming': { impossible: LIVE_ONLY },
  'invoice.partially_paid': { impossible: LIVE_ONLY },
  'invoice.late_payment': { impossible: LIVE_ONLY },
  'invoice.reopened': { impossible: LIVE_ONLY },
  'payout.requested': { flow: 'payout' },
  'payout.cancelled': { flow: 'cancelled payout' },
  // A sandbox payout completes by itself once verified: both events come from one verification.
  'payout.verified': { flow: 'verified payout' },
  'payout.completed': { flow: 'verified payout' },
  'payout.rejected': { impossible: 'comes from an operator refusing a live payout (Operator queue); sandbox payouts never wait for one' },
};

/** How long a paid sandbox invoice may take to reach the payout balance (an event between services). */
const BALANCE_WAIT_MS = 15_000;

/**
 * Causes `eventType` in the logged-in sandbox project, like `stripe trigger`. The payout flows pay
 * an invoice first (the payout's balance); the verified ones ask for the emailed code (`askCode`).
 */
export async function trigger(io: Io, eventType: string, askCode: (payoutId: string) => Promise<string>) {
  const how = TRIGGERS[eventType];
  if (how === undefined) throw new CliError(`unknown event ${eventType}; the catalogue: ${Object.keys(TRIGGERS).join(', ')}`);
  if ('impossible' in how) throw new CliError(`${eventType} cannot be triggered in the sandbox: it ${how.impossible}`);
  const config = readConfig(io.configFile);
  if (config.environment !== 'sandbox') throw new CliError(`trigger works in a sandbox project; you are logged in to ${config.environment} project "${config.projectName}"`);
  const client = apiKeyClient(config);
  const created = unwrap(
    await client.POST('/api/invoice', {
      body: {
        priceAmount: '10.00',
        priceCurrency: 'EUR',
        payCurrency: 'BTC',
        orderId: `cli-trigger-${Date.now()}`,
        successUrl: 'https://example.com/success',
        cancelUrl: 'https://example.com/cancel',
      },
    }),
    'creating a sandbox invoice',
  );
  const paid = unwrap(await client.POST('/api/invoice/{id}/sandbox/pay', { params: { path: { id: created.id } } }), `paying invoice ${created.id}`);
  io.out(`Triggered invoice.paid: sandbox invoice ${paid.id} paid (${paid.amountReceived} ${paid.payCurrency})`);
  if (how.flow === 'invoice') return paid;

  const amount = String(paid.amountReceived);
  const body = { amount, currency: paid.payCurrency, address: TRIGGER_PAYOUT_ADDRESS, note: `coinvoice trigger ${eventType}` };
  const deadline = Date.now() + BALANCE_WAIT_MS;
  let requested = await client.POST('/api/payout/request', { body });
  while (requested.response.status === 409 && requested.error?.code === 'insufficient_balance' && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    requested = await client.POST('/api/payout/request', { body });
  }
  const payout = unwrap(requested, 'requesting a sandbox payout');
  io.out(`Triggered payout.requested: payout ${payout.id} of ${amount} ${paid.payCurrency}`);
  if (how.flow === 'cancelled payout') {
    unwrap(await client.POST('/api/payout/{id}/cancel', { params: { path: { id: payout.id } } }), `cancelling payout ${payout.id}`);
    io.out(`Triggered payout.cancelled: payout ${payout.id}`);
  } else if (how.flow === 'verified payout') {
    const code = (await askCode(payout.id)).trim();
    unwrap(await client.POST('/api/payout/verify', { body: { payoutId: payout.id, code } }), `verifying payout ${payout.id}`);
    io.out(`Triggered payout.verified and payout.completed: payout ${payout.id} (a sandbox payout completes by itself once verified)`);
  }
  return payout;
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
  io.out(`source: ${answer.source} (a quote older than ${ageInWords(answer.maxAgeMs)} is never used)`);
  io.out(
    table(
      ['currency', 'price in USD', 'sources', 'age'],
      answer.rates.map((r) => [r.currency, String(r.usd), r.sources.join(', '), r.ageMs === null ? 'unknown' : ageInWords(r.ageMs)]),
    ),
  );
  return answer;
}
