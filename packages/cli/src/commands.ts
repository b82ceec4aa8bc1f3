/**
 * The commands: login, invoices create|get|list, sandbox pay, trigger, rates. Each takes the parsed
 * options and an output function, and answers through the typed client (@coinvoice/client).
 */
import type { paths } from '@coinvoice/client';
import { apiKeyClient, merchantClient, unwrap } from './api';
import { CliError, readConfig, writeConfig, type CliConfig } from './config';

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

/** Events `trigger` can cause, and how. */
export const TRIGGERS = ['invoice.paid'] as const;

export async function trigger(io: Io, eventType: string) {
  if (!(TRIGGERS as readonly string[]).includes(eventType)) throw new CliError(`cannot trigger ${eventType}; events that can be triggered: ${TRIGGERS.join(', ')}`);
  const client = apiKeyClient(readConfig(io.configFile));
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
  return paid;
}

/** The exchange rates new invoices are priced at now (public: no login needed), with their age. */
export async function rates(io: Io, baseUrl: string) {
  const answer = unwrap(await merchantClient({ baseUrl, token: '' }).GET('/api/rates'), 'reading the rates');
  io.out(json(answer));
  return answer;
}
