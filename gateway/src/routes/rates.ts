/** GET /api/rates (public, no API key): the invoice service's cached quotes and their age. */
import { decimalToJsonNumber } from '@coinvoice/domain/json-money';
import type { InvoiceService } from '@coinvoice/runtime/gen/coinvoice/invoice/v1/invoice_pb';
import { timestampDate, type Timestamp } from '@bufbuild/protobuf/wkt';
import type { Client } from '@connectrpc/connect';
import type { FastifyInstance } from 'fastify';
import { isoTimeOrNull } from '../json';
import { RatesSchema } from '../schemas/rates';

function ageMs(ts: Timestamp | undefined, now: number): number | null {
  return ts ? Math.max(0, now - timestampDate(ts).getTime()) : null;
}

export function rateRoutes(app: FastifyInstance, { invoices }: { invoices: Client<typeof InvoiceService> }): void {
  app.get('/api/rates', {
    schema: {
      tags: ['rates'],
      summary: 'Current exchange rates and their age (public, no API key)',
      response: { 200: RatesSchema },
    },
    handler: async (_req, reply) => {
      const res = await invoices.getRates({});
      const now = Date.now();
      reply.header('cache-control', 'no-store');
      return {
        source: res.source === 'live' ? 'live' : 'static',
        maxAgeMs: Number(res.maxAgeMs),
        rates: res.rates.map((r) => ({
          currency: r.currency,
          usd: decimalToJsonNumber(r.usd),
          sources: r.sources,
          quotedAt: isoTimeOrNull(r.quotedAt),
          ageMs: ageMs(r.quotedAt, now),
        })),
        providers: res.providers.map((p) => ({
          name: p.name,
          fetchedAt: isoTimeOrNull(p.fetchedAt),
          ageMs: ageMs(p.fetchedAt, now),
          healthy: p.healthy,
        })),
      };
    },
  });
}
