/**
 * The hosted checkout page at /pay/{invoiceId} (no API key): a page, its own assets, and the
 * public read endpoint it polls. Everything is served by the gateway: no third-party requests.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { decimalAsJsonNumber, decimalToJsonNumber } from '@coinvoice/domain/json-money';
import { packageRoot, type Logger } from '@coinvoice/runtime';
import type { Checkout, InvoiceService, ListCurrenciesResponse, PayCurrency } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import type { FastifyInstance, FastifyReply } from 'fastify';
import QRCode from 'qrcode';
import { isoTime } from '../json';
import { CheckoutSchema } from '../schemas/checkout';
import { currenciesMarkdown } from './currencies';
import { IdParams } from '../schemas/common';
import { DASHBOARD_DIST } from './dashboard';
import { invoiceStatuses } from './invoices';
import { HttpProblem } from '../problem';
import type { GatewayRateLimits } from '../rate-limits';

const ASSETS = path.join(packageRoot(__dirname), 'assets');
const asset = (name: string) => readFileSync(path.join(ASSETS, name), 'utf8');
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The page may run its own script and styles only, and may not be framed (clickjacking). */
const PAGE_HEADERS = {
  'content-security-policy': "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'cache-control': 'no-store',
};

export function checkoutJson(c: Checkout | undefined) {
  if (!c) throw new Error('checkout missing from a service response');
  return {
    id: c.id,
    status: invoiceStatuses.name(c.status),
    payCurrency: c.payCurrency,
    payNetwork: c.payNetwork,
    payNetworkLabel: c.payNetworkLabel,
    tokenContract: c.tokenContract ?? null,
    amountExpected: decimalToJsonNumber(c.amountExpected),
    amountExpectedDecimal: decimalAsJsonNumber(c.amountExpected),
    amountReceived: decimalToJsonNumber(c.amountReceived),
    amountReceivedDecimal: decimalAsJsonNumber(c.amountReceived),
    address: c.address,
    paymentUri: c.paymentUri,
    priceAmount: decimalToJsonNumber(c.priceAmount),
    priceCurrency: c.priceCurrency,
    createdAt: isoTime(c.createdAt),
    expiredAt: isoTime(c.expiredAt),
    isSandbox: c.isSandbox,
    successUrl: c.successUrl,
    cancelUrl: c.cancelUrl,
    // Live only (the sandbox skips confirmations): "N of M" and what is still missing.
    ...(c.isSandbox
      ? {}
      : {
          confirmations: c.confirmations,
          confirmationsRequired: c.confirmationsRequired,
          amountRemaining: decimalToJsonNumber(c.amountRemaining),
          amountRemainingDecimal: decimalAsJsonNumber(c.amountRemaining),
        }),
  };
}

function isNotFound(err: unknown): boolean {
  return err instanceof ConnectError && (err.code === Code.NotFound || err.code === Code.InvalidArgument);
}

export function checkoutRoutes(
  app: FastifyInstance,
  { invoices, rateLimits }: { invoices: Client<typeof InvoiceService>; rateLimits: GatewayRateLimits },
): void {
  const page = asset('checkout.html');
  const notFoundPage = asset('not-found.html');
  // A Map, not an object literal: a name like "constructor" must not find an inherited property.
  const files = new Map<string, { body: string; type: string }>([
    ['checkout.css', { body: asset('checkout.css'), type: 'text/css; charset=utf-8' }],
    ['checkout.js', { body: asset('checkout.js'), type: 'text/javascript; charset=utf-8' }],
  ]);
  const sendNotFound = (reply: FastifyReply) => reply.code(404).headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(notFoundPage);

  app.get<{ Params: { file: string } }>('/pay/assets/:file', { schema: { hide: true } }, async (req, reply) => {
    const file = files.get(req.params.file);
    if (!file) return sendNotFound(reply);
    return reply.headers({ 'x-content-type-options': 'nosniff', 'cache-control': 'public, max-age=300' }).type(file.type).send(file.body);
  });

  app.get<{ Params: { invoiceId: string } }>('/pay/:invoiceId', { schema: { hide: true }, onRequest: rateLimits.checkout }, async (req, reply) => {
    const { invoiceId } = req.params;
    if (!UUID.test(invoiceId)) return sendNotFound(reply);
    try {
      await invoices.getCheckout({ invoiceId });
    } catch (err) {
      if (isNotFound(err)) return sendNotFound(reply);
      throw err;
    }
    return reply.headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(page.replace('{{INVOICE_ID}}', invoiceId.toLowerCase()));
  });

  app.get<{ Params: { id: string } }>('/api/checkout/:id', {
    schema: {
      tags: ['checkout'],
      summary: 'What the hosted checkout page shows the customer (public, no API key)',
      params: IdParams,
      response: { 200: CheckoutSchema },
    },
    onRequest: rateLimits.checkout,
    handler: async (req, reply) => {
      const res = await invoices.getCheckout({ invoiceId: req.params.id });
      reply.header('cache-control', 'no-store');
      return checkoutJson(res.checkout);
    },
  });

  app.get<{ Params: { id: string } }>('/api/checkout/:id/qr.svg', {
    schema: { hide: true, params: IdParams },
    onRequest: rateLimits.checkout,
    handler: async (req, reply) => {
      const res = await invoices.getCheckout({ invoiceId: req.params.id });
      const status = res.checkout ? invoiceStatuses.name(res.checkout.status) : undefined;
      // Only while a payment is asked: a paid, confirming or expired invoice's URI asks its whole
      // amount again, and a kept QR image (a screenshot, a cached page) would have a customer pay twice.
      if (status !== 'Waiting' && status !== 'PartiallyPaid') {
        throw new HttpProblem(404, 'not_found', 'this invoice asks for no payment now: no payment QR code');
      }
      const svg = await QRCode.toString(res.checkout?.paymentUri ?? '', { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
      return reply.headers({ 'cache-control': 'no-store', 'x-content-type-options': 'nosniff' }).type('image/svg+xml').send(svg);
    },
  });
}

/**
 * Scalar API Reference's self-contained browser build, copied from its npm package by the
 * dashboard's build (dashboard/vite.config.ts) with the other static files: the package and its
 * ~290 MB of dependencies are build tools, not run-time dependencies of the gateway. Undefined
 * (a 404) when the dashboard was not built.
 */
function scalarStandalone(): string | undefined {
  const file = path.join(DASHBOARD_DIST, 'docs', 'scalar.js');
  return existsSync(file) ? readFileSync(file, 'utf8') : undefined;
}

/**
 * The document as /openapi.json serves it: its introduction (what /docs shows first) ends with the
 * pairs this deployment takes, a table generated from ListCurrencies (the answer of
 * GET /api/currencies), so /docs lists every (asset, network) with its contract and confirmations
 * (docs/networks.md). The snapshot has no table: what is enabled is configuration.
 */
export function documentWithCurrencies(document: unknown, currencies: readonly PayCurrency[]): unknown {
  const doc = document as { info?: { description?: string } };
  const intro = doc.info?.description ?? '';
  const table = currenciesMarkdown(currencies);
  return {
    ...doc,
    info: {
      ...doc.info,
      description: `${intro}\n\n## Currencies and networks\n\nAn invoice is paid in \`payCurrency\` on \`payNetwork\`; taken here (\`GET /api/currencies\`):\n\n${table}`,
    },
  };
}

/** /docs: the OpenAPI document rendered by Scalar API Reference, under the checkout page's CSP. */
export function docsRoutes(
  app: FastifyInstance,
  document: () => unknown,
  listCurrencies: () => Promise<ListCurrenciesResponse>,
  logger: Logger,
): void {
  const html = asset('docs.html');
  // Read on the first request: 4 MB an idle gateway need not hold.
  let scalar: string | undefined;
  const files: Record<string, () => string | undefined> = { 'scalar.js': () => (scalar ??= scalarStandalone()) };
  const headers = { ...PAGE_HEADERS, 'cache-control': 'public, max-age=60' };
  app.get('/openapi.json', { schema: { hide: true } }, async () => {
    try {
      return documentWithCurrencies(document(), (await listCurrencies()).currencies);
    } catch (err) {
      // The reference still renders without the table; GET /api/currencies answers the same list.
      logger.warn({ err }, 'openapi.json without the currencies table: ListCurrencies failed');
      return document();
    }
  });
  app.get('/docs', { schema: { hide: true } }, async (_req, reply) => reply.headers(headers).type('text/html; charset=utf-8').send(html));
  app.get<{ Params: { file: string } }>('/docs/assets/:file', { schema: { hide: true } }, async (req, reply) => {
    const file = Object.hasOwn(files, req.params.file) ? files[req.params.file] : undefined;
    const body = file?.();
    if (body === undefined) return reply.code(404).headers(PAGE_HEADERS).type('text/html; charset=utf-8').send(asset('not-found.html'));
    return reply.headers({ 'x-content-type-options': 'nosniff', 'cache-control': 'public, max-age=300' }).type('text/javascript; charset=utf-8').send(body);
  });
}
