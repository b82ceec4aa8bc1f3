/**
 * Invoices: the public API (x-api-key) — create, get, sandbox pay — and the dashboard's invoice
 * list and Simulate action (Bearer). Create also takes a merchant JWT with `projectId`, as the
 * payout routes do: the dashboard's "Create an invoice" form. Field for field the service description's Invoice table.
 */
import { decimalAsJsonNumber, decimalToJsonNumber } from '@coinvoice/domain/json-money';
import { writtenDecimal } from '../exact-json';
import type { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { InvoiceStatus, type Invoice, type InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { apiKeyPrincipal, merchantPrincipal, type authHooks } from '../auth/hooks';
import type { ProjectEnvironment } from '../auth/principal';
import { environmentName, environmentOf, isoTime, isoTimeOrNull, publicNames } from '../json';
import { HttpProblem, unknownProject, withRuleViolations } from '../problem';
import { IdParams, parseLimit } from '../schemas/common';
import {
  CreateInvoiceBody,
  IdempotencyKeyHeaders,
  InvoiceListQuery,
  InvoiceListSchema,
  InvoiceSchema,
  MerchantInvoiceSchema,
  SandboxPayBody,
} from '../schemas/invoice';

export interface InvoiceRouteDeps {
  auth: Client<typeof AuthService>;
  invoices: Client<typeof InvoiceService>;
  hooks: ReturnType<typeof authHooks>;
}

export const invoiceStatuses = publicNames('invoice status', [
  [InvoiceStatus.WAITING, 'Waiting'],
  [InvoiceStatus.CONFIRMING, 'Confirming'],
  [InvoiceStatus.PARTIALLY_PAID, 'PartiallyPaid'],
  [InvoiceStatus.PAID, 'Paid'],
  [InvoiceStatus.EXPIRED, 'Expired'],
] as const);

/**
 * Live invoices only: the sandbox's invoice JSON stays the documented 17 fields plus payNetwork. A live
 * payment can carry more digits than a JSON number's double (ETH has 18 decimals): every amount
 * here also comes as its exact decimal string, `…Decimal` (docs/accounting.md).
 */
function liveFields(i: Invoice) {
  if (i.environment !== Environment.LIVE) return {};
  return {
    amountExpectedDecimal: decimalAsJsonNumber(i.amountExpected),
    amountReceivedDecimal: decimalAsJsonNumber(i.amountReceived),
    payments: i.payments.map((p) => ({
      transactionHash: p.transactionHash,
      amount: decimalToJsonNumber(p.amount),
      amountDecimal: decimalAsJsonNumber(p.amount),
      asset: p.asset,
      network: p.network,
      confirmations: p.confirmations,
      status: p.status,
      detectedAt: isoTime(p.detectedAt),
    })),
    confirmationsRequired: i.confirmationsRequired,
  };
}

export function invoiceJson(i: Invoice | undefined) {
  if (!i) throw new Error('invoice missing from a service response');
  return {
    id: i.id,
    orderId: i.orderId ?? '',
    orderDescription: i.orderDescription ?? '',
    priceAmount: decimalToJsonNumber(i.priceAmount),
    priceAmountInUsd: decimalToJsonNumber(i.priceAmountInUsd),
    amountReceived: decimalToJsonNumber(i.amountReceived),
    priceCurrency: i.priceCurrency,
    payCurrency: i.payCurrency,
    // An addition to the seed's fields (issue 24, docs/networks.md).
    payNetwork: i.payNetwork,
    status: invoiceStatuses.name(i.status),
    createdAt: isoTime(i.createdAt),
    expiredAt: isoTime(i.expiredAt),
    address: i.address,
    amountExpected: decimalToJsonNumber(i.amountExpected),
    successUrl: i.successUrl,
    cancelUrl: i.cancelUrl,
    projectName: i.projectName,
    isDonation: i.isDonation,
    ...liveFields(i),
  };
}

/**
 * The invoice with its project's name now, not the one stored at its creation: the contract's
 * `projectName` is the name of the project that owns the key, and a read answers current values (the
 * key's cached project: a rename shows within API_KEY_CACHE_TTL_MS, as in new invoices).
 */
function withProjectName(invoice: Invoice | undefined, projectName: string): Invoice | undefined {
  return invoice && { ...invoice, projectName };
}

/** The invoice as its merchant sees it in the dashboard: the public shape plus how it was priced. */
export function merchantInvoiceJson(i: Invoice | undefined) {
  if (!i) throw new Error('invoice missing from a service response');
  const pricing = { rate: decimalToJsonNumber(i.rate), rateSources: [...i.rateSources], rateQuotedAt: isoTimeOrNull(i.rateQuotedAt) };
  return { ...invoiceJson(i), pricing };
}

function sandboxPayFields(body: SandboxPayBody) {
  let amountReceived: string | undefined;
  if (body?.amountReceived !== undefined) {
    const decimal = writtenDecimal(body, 'amountReceived');
    if ((decimal.split('.')[1] ?? '').length > 8) {
      throw new HttpProblem(400, 'validation_failed', 'the request body is invalid', [
        { field: 'amountReceived', message: 'must have at most 8 decimal places' },
      ]);
    }
    amountReceived = decimal;
  }
  return { amountReceived, transactionHash: body?.transactionHash };
}

const apiKeyAuth = [{ apiKeyAuth: [] }];
const bearer = [{ bearerAuth: [] }];
const apiKeyOrBearer: Array<Record<string, string[]>> = [{ apiKeyAuth: [] }, { bearerAuth: [] }];

/** What an invoice takes from its project: the API key's, or (merchant JWT) the named one of the merchant's. */
interface InvoicingProject {
  projectId: string;
  projectName: string;
  environment: ProjectEnvironment;
  invoiceLifetimeMinutes: number;
  paymentTolerancePercent: string;
}

/**
 * The project an invoice is created in. With an API key: the key's (a `projectId` must name it).
 * With a merchant JWT (the dashboard): the named project of that merchant; a live one only with a
 * verified email, as for live API keys (403 email_not_verified).
 */
async function invoicingProject(auth: InvoiceRouteDeps['auth'], req: FastifyRequest, projectId: string | undefined): Promise<InvoicingProject> {
  const principal = req.principal;
  if (principal?.kind === 'api_key') {
    if (projectId !== undefined && projectId.toLowerCase() !== principal.projectId.toLowerCase()) throw unknownProject('is not the project of this API key');
    return principal;
  }
  if (principal?.kind !== 'merchant') throw new Error('POST /api/invoice requires x-api-key or bearer authentication but no hook set it');
  if (projectId === undefined) {
    throw new HttpProblem(400, 'validation_failed', 'projectId is required with a merchant session token', [
      { field: 'projectId', message: 'is required with a merchant session token (Bearer); with an x-api-key it may be left out' },
    ]);
  }
  let project;
  try {
    project = (await auth.getProject({ merchantId: principal.merchantId, projectId })).project;
  } catch (err) {
    const code = ConnectError.from(err).code;
    if (code === Code.NotFound || code === Code.InvalidArgument) throw unknownProject('is not one of your projects');
    throw err;
  }
  if (!project) throw new Error('project missing from a service response');
  const environment = environmentName(project.environment);
  if (environment === 'live') {
    const { merchant } = await auth.getMerchant({ merchantId: principal.merchantId });
    if (!merchant?.emailVerified) throw new HttpProblem(403, 'email_not_verified', 'verify your email address before creating live invoices');
  }
  return {
    projectId: project.id,
    projectName: project.name,
    environment,
    invoiceLifetimeMinutes: project.invoiceLifetimeMinutes,
    paymentTolerancePercent: project.paymentTolerancePercent,
  };
}

function projectFields(project: InvoicingProject) {
  return {
    projectId: project.projectId,
    environment: environmentOf(project.environment),
    projectName: project.projectName,
    lifetimeMinutes: project.invoiceLifetimeMinutes,
    paymentTolerancePercent: project.paymentTolerancePercent,
  };
}

/** A body field the schema did not refuse, if it is text (the rest are left out of the rules' check). */
function textOf(fields: Record<string, unknown>, flagged: ReadonlySet<string>, name: string): string | undefined {
  const value = fields[name];
  return typeof value === 'string' && !flagged.has(name) ? value : undefined;
}

export function invoiceRoutes(app: FastifyInstance, { auth, invoices, hooks }: InvoiceRouteDeps): void {
  app.post<{ Body: CreateInvoiceBody; Headers: { 'idempotency-key'?: string } }>('/api/invoice', {
    schema: {
      tags: ['invoices'],
      summary: 'Create an invoice',
      security: apiKeyOrBearer,
      headers: IdempotencyKeyHeaders,
      body: CreateInvoiceBody,
      response: { 201: InvoiceSchema },
    },
    onRequest: hooks.apiKeyOrMerchant,
    // A body the schema refuses is answered in the handler, with the invoice rules' violations too.
    attachValidation: true,
    handler: async (req, reply) => {
      if (req.validationError) {
        throw await withRuleViolations(req.validationError, req.body, async (fields, flagged) => {
          const text = (name: string) => textOf(fields, flagged, name);
          const project = await invoicingProject(auth, req, text('projectId'));
          return invoices.createInvoice({
            ...projectFields(project),
            validateOnly: true,
            priceAmount: text('priceAmount') ?? '',
            priceCurrency: text('priceCurrency') ?? '',
            payCurrency: text('payCurrency') ?? '',
            payNetwork: text('payNetwork'),
            successUrl: text('successUrl') ?? '',
            cancelUrl: text('cancelUrl') ?? '',
            orderId: text('orderId'),
            orderDescription: text('orderDescription'),
            isDonation: typeof fields.isDonation === 'boolean' ? fields.isDonation : false,
          });
        });
      }
      const project = await invoicingProject(auth, req, req.body.projectId);
      const res = await invoices.createInvoice({
        ...projectFields(project),
        priceAmount: req.body.priceAmount,
        priceCurrency: req.body.priceCurrency,
        payCurrency: req.body.payCurrency,
        payNetwork: req.body.payNetwork,
        successUrl: req.body.successUrl,
        cancelUrl: req.body.cancelUrl,
        orderId: req.body.orderId,
        orderDescription: req.body.orderDescription,
        isDonation: req.body.isDonation ?? false,
        idempotencyKey: req.headers['idempotency-key'],
      });
      if (res.idempotentReplay) reply.header('idempotent-replayed', 'true');
      return reply.code(201).send(invoiceJson(res.invoice));
    },
  });

  app.get<{ Params: { id: string } }>('/api/invoice/:id', {
    schema: { tags: ['invoices'], summary: 'Get an invoice with its current status', security: apiKeyAuth, params: IdParams, response: { 200: InvoiceSchema } },
    onRequest: hooks.apiKey,
    handler: async (req) => {
      const project = apiKeyPrincipal(req);
      const res = await invoices.getInvoice({ projectId: project.projectId, invoiceId: req.params.id });
      return invoiceJson(withProjectName(res.invoice, project.projectName));
    },
  });

  app.post<{ Params: { id: string }; Body: SandboxPayBody }>('/api/invoice/:id/sandbox/pay', {
    schema: {
      tags: ['invoices', 'sandbox'],
      summary: 'Simulate a payment of a Waiting sandbox invoice (sends invoice.paid)',
      security: apiKeyAuth,
      params: IdParams,
      body: SandboxPayBody,
      response: { 200: InvoiceSchema },
    },
    onRequest: hooks.apiKey,
    handler: async (req) => {
      const project = apiKeyPrincipal(req);
      if (project.environment !== 'sandbox') {
        throw new HttpProblem(403, 'sandbox_key_required', 'simulated payments need the sandbox key of a sandbox project');
      }
      const res = await invoices.payInvoice({ projectId: project.projectId, invoiceId: req.params.id, ...sandboxPayFields(req.body) });
      return invoiceJson(withProjectName(res.invoice, project.projectName));
    },
  });

  app.get<{ Params: { id: string }; Querystring: InvoiceListQuery }>('/api/merchant/projects/:id/invoices', {
    schema: {
      tags: ['dashboard'],
      summary: 'List a project’s invoices, newest first',
      security: bearer,
      params: IdParams,
      querystring: InvoiceListQuery,
      response: { 200: InvoiceListSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      // Ownership first: another merchant's project answers 404 as if it did not exist.
      const { project } = await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId: req.params.id });
      const res = await invoices.listInvoices({
        projectId: req.params.id,
        status: req.query.status ? invoiceStatuses.value(req.query.status) : undefined,
        orderId: req.query.orderId,
        pageSize: parseLimit(req.query.limit),
        cursor: req.query.cursor ?? '',
      });
      return { items: res.invoices.map((invoice) => invoiceJson(withProjectName(invoice, project?.name ?? invoice.projectName))), nextCursor: res.nextCursor || null };
    },
  });

  /**
   * The project of an invoice of the signed-in merchant's. Another merchant's invoice answers the
   * very 404 a missing one does — same code, same words — so its existence is not told.
   */
  async function merchantInvoiceProject(req: FastifyRequest, invoiceId: string) {
    const owner = await invoices.getInvoiceProject({ invoiceId });
    try {
      const { project } = await auth.getProject({ merchantId: merchantPrincipal(req).merchantId, projectId: owner.projectId });
      return { ...owner, projectName: project?.name ?? '' };
    } catch (err) {
      if (err instanceof ConnectError && err.code === Code.NotFound) throw new HttpProblem(404, 'not_found', 'invoice not found'); // the invoice service's own words for a missing one
      throw err;
    }
  }

  app.get<{ Params: { id: string } }>('/api/merchant/invoices/:id', {
    schema: {
      tags: ['dashboard'],
      summary: 'One of your invoices, with its current status and how it was priced (the dashboard’s invoice page)',
      security: bearer,
      params: IdParams,
      response: { 200: MerchantInvoiceSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const owner = await merchantInvoiceProject(req, req.params.id);
      const res = await invoices.getInvoice({ projectId: owner.projectId, invoiceId: req.params.id });
      return merchantInvoiceJson(withProjectName(res.invoice, owner.projectName));
    },
  });

  app.post<{ Params: { id: string }; Body: SandboxPayBody }>('/api/merchant/invoices/:id/simulate', {
    schema: {
      tags: ['dashboard', 'sandbox'],
      summary: 'The dashboard’s Simulate action: pay a Waiting sandbox invoice',
      security: bearer,
      params: IdParams,
      body: SandboxPayBody,
      response: { 200: InvoiceSchema },
    },
    onRequest: hooks.merchant,
    handler: async (req) => {
      const owner = await merchantInvoiceProject(req, req.params.id);
      if (owner.environment !== Environment.SANDBOX) {
        throw new HttpProblem(403, 'sandbox_project_required', 'only invoices of sandbox projects can be simulated');
      }
      const res = await invoices.payInvoice({ projectId: owner.projectId, invoiceId: req.params.id, ...sandboxPayFields(req.body) });
      return invoiceJson(withProjectName(res.invoice, owner.projectName));
    },
  });
}
