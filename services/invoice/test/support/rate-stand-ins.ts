/**
 * Local stand-ins for the rate providers' public APIs, in their real JSON shapes:
 * Coinbase `GET /v2/exchange-rates?currency=USD` → {"data": {"currency": "USD", "rates": {CODE:
 * "units per USD"}}}; Kraken `GET /0/public/Ticker?pair=…` → {"error": [], "result": {PAIR: {"a",
 * "b", "c": [last price, lot volume], …}}}. A test sets what each answers: prices, raw entries
 * (garbage), an HTTP error, or a hang.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Decimal } from 'decimal.js';

/** USD price per code; a raw string/value for an entry replaces the computed one as is (garbage). */
export type StandInPrices = Record<string, string | number | null | { raw: unknown }>;

export type Behaviour =
  | { kind: 'prices'; prices: StandInPrices }
  | { kind: 'status'; status: number }
  | { kind: 'hang'; ms: number };

/** Realistic prices for everything the service asks for (USD per unit). */
export const BASE_PRICES: Readonly<Record<string, string>> = {
  BTC: '100000', LTC: '90', ETH: '3000', USDT: '1', USDC: '1', TRX: '0.25', POL: '0.21', BNB: '620',
  EUR: '1.1', GBP: '1.25', JPY: '0.0068', CHF: '1.12', CAD: '0.72', AUD: '0.66',
};

export class RateStandIn {
  behaviour: Behaviour = { kind: 'prices', prices: { ...BASE_PRICES } };
  requests = 0;
  private readonly sockets = new Set<import('node:net').Socket>();
  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(kind: 'coinbase' | 'kraken'): Promise<RateStandIn> {
    let standIn: RateStandIn | undefined;
    const server = createServer((req, res) => standIn!.handle(kind, req, res));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    standIn = new RateStandIn(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}`);
    server.on('connection', (socket) => {
      standIn!.sockets.add(socket);
      socket.on('close', () => standIn!.sockets.delete(socket));
    });
    return standIn;
  }

  setPrices(prices: StandInPrices): void {
    this.behaviour = { kind: 'prices', prices: { ...BASE_PRICES, ...prices } };
  }

  async close(): Promise<void> {
    for (const socket of this.sockets) socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private handle(kind: 'coinbase' | 'kraken', req: IncomingMessage, res: ServerResponse): void {
    this.requests += 1;
    const url = new URL(req.url ?? '/', 'http://stand-in');
    const behaviour = this.behaviour;
    if (behaviour.kind === 'hang') {
      const timer = setTimeout(() => this.answer(res, 200, kind === 'coinbase' ? coinbaseBody(BASE_PRICES) : krakenBody(BASE_PRICES)), behaviour.ms);
      res.on('close', () => clearTimeout(timer));
      return;
    }
    if (behaviour.kind === 'status') return this.answer(res, behaviour.status, { message: 'stand-in says no' });
    if (kind === 'coinbase') {
      if (url.pathname !== '/v2/exchange-rates' || url.searchParams.get('currency') !== 'USD') return this.answer(res, 404, { errors: [{ id: 'not_found' }] });
      return this.answer(res, 200, coinbaseBody(behaviour.prices));
    }
    if (url.pathname !== '/0/public/Ticker' || !url.searchParams.get('pair')) return this.answer(res, 404, { error: ['EGeneral:Unknown method'] });
    return this.answer(res, 200, krakenBody(behaviour.prices));
  }

  private answer(res: ServerResponse, status: number, body: unknown): void {
    if (res.destroyed) return;
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  }
}

/** Coinbase quotes "units of CODE per 1 USD": the inverse of the USD price. */
function coinbaseBody(prices: StandInPrices): unknown {
  const rates: Record<string, unknown> = { AED: '3.6725', USD: '1.0' };
  for (const [code, price] of Object.entries(prices)) {
    if (price === undefined) continue;
    rates[code] = entry(price, (usd) => new Decimal(1).div(usd).toSignificantDigits(20).toFixed());
  }
  return { data: { currency: 'USD', rates } };
}

const KRAKEN_KEYS: Record<string, { key: string; inverted: boolean }> = {
  BTC: { key: 'XXBTZUSD', inverted: false }, LTC: { key: 'XLTCZUSD', inverted: false }, ETH: { key: 'XETHZUSD', inverted: false },
  USDT: { key: 'USDTZUSD', inverted: false }, USDC: { key: 'USDCUSD', inverted: false }, TRX: { key: 'TRXUSD', inverted: false },
  POL: { key: 'POLUSD', inverted: false }, BNB: { key: 'BNBUSD', inverted: false },
  EUR: { key: 'ZEURZUSD', inverted: false }, GBP: { key: 'ZGBPZUSD', inverted: false }, AUD: { key: 'AUDUSD', inverted: false },
  JPY: { key: 'ZUSDZJPY', inverted: true }, CAD: { key: 'ZUSDZCAD', inverted: true }, CHF: { key: 'USDCHF', inverted: true },
};

function krakenBody(prices: StandInPrices): unknown {
  const result: Record<string, unknown> = {};
  for (const [code, price] of Object.entries(prices)) {
    const pair = KRAKEN_KEYS[code];
    if (!pair || price === undefined) continue;
    const last = entry(price, (usd) => (pair.inverted ? new Decimal(1).div(usd).toDecimalPlaces(5).toFixed() : new Decimal(usd).toFixed(5)));
    result[pair.key] = {
      a: [last, '1', '1.000'], b: [last, '2', '2.000'], c: [last, '0.00150000'],
      v: ['1219.10', '3350.77'], p: [last, last], t: [21020, 52880], l: [last, last], h: [last, last], o: last,
    };
  }
  return { error: [], result };
}

function entry(price: string | number | null | { raw: unknown }, format: (usd: string) => string): unknown {
  if (price !== null && typeof price === 'object') return price.raw;
  if (typeof price !== 'string') return price;
  return format(price);
}
