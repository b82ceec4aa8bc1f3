/**
 * GET /api/currencies (public, no API key, cacheable): the (asset, network) pairs this deployment
 * takes, from InvoiceService.ListCurrencies (services/invoice/src/domain/pay-methods.ts, the one
 * catalog that also checks a new invoice's payNetwork; docs/networks.md). The list changes only
 * with the invoice service's configuration: shared caches may keep it for a few minutes, and an
 * ETag lets a client revalidate it for free.
 */
import { createHash } from 'node:crypto';
import { decimalAsJsonNumber } from '@coinvoice/domain/json-money';
import type { InvoiceService, ListCurrenciesResponse, PayCurrency } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import type { Client } from '@connectrpc/connect';
import { Type } from '@sinclair/typebox';
import type { FastifyInstance } from 'fastify';
import { CurrenciesSchema } from '../schemas/currencies';

/** How long a client or shared cache may reuse the list without asking again. */
export const CURRENCIES_MAX_AGE_SECONDS = 300;

/**
 * The body as exact JSON text (as the balance body is): minimumAmount is written from its decimal
 * digit for digit ("0.00000001", never 1e-8 rounded through a double), keys in the schema's order.
 */
export function currenciesJsonText(res: ListCurrenciesResponse): string {
  const items = res.currencies.map(
    (c) =>
      `{"currency":${JSON.stringify(c.currency)},"network":${JSON.stringify(c.network)},"name":${JSON.stringify(c.name)},` +
      `"networkLabel":${JSON.stringify(c.networkLabel)},"decimals":${c.decimals},"baseUnitDecimals":${c.baseUnitDecimals},` +
      `"confirmations":${c.confirmations},"minimumAmount":${decimalAsJsonNumber(c.minimumAmount)},` +
      `"contract":${JSON.stringify(c.contract ?? null)},"chainId":${c.chainId === undefined ? 'null' : c.chainId.toString()},"watched":${c.watched}}`,
  );
  return `{"currencies":[${items.join(',')}]}`;
}

/** A strong validator of the exact body. */
function etagOf(body: string): string {
  return `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
}

/** Whether an If-None-Match header names this entity tag (or is `*`). */
function matches(ifNoneMatch: string | undefined, etag: string): boolean {
  if (ifNoneMatch === undefined) return false;
  return ifNoneMatch.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t === etag || t === `W/${etag}`;
  });
}

/**
 * The pairs as a Markdown table for the API reference (/docs): generated from the same answer as
 * GET /api/currencies, so the page lists what this deployment takes, with contracts and confirmations.
 */
export function currenciesMarkdown(currencies: readonly PayCurrency[]): string {
  const rows = currencies.map(
    (c) =>
      `| ${c.currency} | \`${c.network}\` (${c.networkLabel}) | ${c.contract ? `\`${c.contract}\`` : '—'} | ${c.chainId ?? '—'} | ${c.confirmations} | ${c.decimals} (${c.baseUnitDecimals} on chain) | ${c.minimumAmount} |`,
  );
  return [
    '| payCurrency | payNetwork | contract | chain id | confirmations | decimals | minimum |',
    '| --- | --- | --- | --- | --- | --- | --- |',
    ...rows,
  ].join('\n');
}

export function currencyRoutes(app: FastifyInstance, { invoices }: { invoices: Client<typeof InvoiceService> }): void {
  app.get<{ Headers: { 'if-none-match'?: string } }>('/api/currencies', {
    schema: {
      tags: ['currencies'],
      summary: 'The assets and networks invoices can be paid in (public, no API key, cacheable)',
      description:
        'Every enabled (asset, network): pass `currency` as an invoice’s `payCurrency` and `network` as its `payNetwork`. ' +
        'Decimals, confirmations, the minimum amount and the token contract of each. The answer changes only with the ' +
        'deployment’s configuration: it is `Cache-Control: public` and carries an `ETag` (If-None-Match answers 304).',
      headers: Type.Object({ 'if-none-match': Type.Optional(Type.String({ description: 'An ETag of an earlier answer: 304 while it is current' })) }),
      response: { 200: CurrenciesSchema, 304: Type.Null({ description: 'Not modified' }) },
    },
    handler: async (req, reply) => {
      const body = currenciesJsonText(await invoices.listCurrencies({}));
      const etag = etagOf(body);
      reply.headers({ 'cache-control': `public, max-age=${CURRENCIES_MAX_AGE_SECONDS}`, etag });
      if (matches(req.headers['if-none-match'], etag)) return reply.code(304).send();
      return reply.type('application/json; charset=utf-8').send(body);
    },
  });
}
