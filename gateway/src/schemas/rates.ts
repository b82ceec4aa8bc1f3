import { Type } from '@sinclair/typebox';
import { Timestamp } from './common';

const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/** GET /api/rates: the prices live invoices are created at now, and how old they are. */
export const RatesSchema = Type.Object(
  {
    source: Type.Union([Type.Literal('live'), Type.Literal('static')], {
      description: 'live: the median of fresh Coinbase and Kraken quotes; static: the configured table',
    }),
    maxAgeMs: Type.Integer({ description: 'a quote older than this is never used; a live invoice without a fresh quote answers 503 rates_unavailable' }),
    rates: Type.Array(
      Type.Object(
        {
          currency: Type.String({ description: 'BTC, LTC, ETH, USDT, USDC, TRX, or a fiat code (USD is 1 and not listed)' }),
          usd: Type.Number({ description: 'price of one unit in USD' }),
          sources: Type.Array(Type.String(), { description: '"coinbase", "kraken" or "static"' }),
          quotedAt: NullableTimestamp,
          ageMs: Type.Union([Type.Integer(), Type.Null()], { description: 'how old the oldest quote used is' }),
        },
        { additionalProperties: false },
      ),
      { description: 'every currency with a usable price now; a missing one cannot be invoiced live' },
    ),
    providers: Type.Array(
      Type.Object(
        {
          name: Type.String(),
          fetchedAt: NullableTimestamp,
          ageMs: Type.Union([Type.Integer(), Type.Null()]),
          healthy: Type.Boolean({ description: 'whether its last attempt succeeded' }),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { $id: 'Rates', additionalProperties: false },
);
