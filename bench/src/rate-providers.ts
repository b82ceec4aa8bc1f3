/**
 * Local stand-ins for Coinbase (`/v2/exchange-rates?currency=USD`) and Kraken
 * (`/0/public/Ticker`) in their JSON shapes, so that `npm run bench` can measure invoice creation
 * with RATES_SOURCE=live without the internet. Fixed prices; a fresh answer to every refresh.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';

const USD_PRICES: Record<string, number> = { BTC: 100_000, LTC: 90, ETH: 3_000, USDT: 1, USDC: 1, TRX: 0.25, EUR: 1.1, GBP: 1.25, AUD: 0.66 };
const PER_USD: Record<string, number> = { JPY: 147, CAD: 1.38, CHF: 0.89 };
const KRAKEN: Record<string, string> = {
  BTC: 'XXBTZUSD', LTC: 'XLTCZUSD', ETH: 'XETHZUSD', USDT: 'USDTZUSD', USDC: 'USDCUSD', TRX: 'TRXUSD',
  EUR: 'ZEURZUSD', GBP: 'ZGBPZUSD', AUD: 'AUDUSD', JPY: 'ZUSDZJPY', CAD: 'ZUSDZCAD', CHF: 'USDCHF',
};

function coinbaseBody(): unknown {
  const rates: Record<string, string> = { USD: '1' };
  for (const [code, usd] of Object.entries(USD_PRICES)) rates[code] = (1 / usd).toFixed(12);
  for (const [code, perUsd] of Object.entries(PER_USD)) rates[code] = perUsd.toFixed(4);
  return { data: { currency: 'USD', rates } };
}

function krakenBody(): unknown {
  const result: Record<string, unknown> = {};
  for (const [code, key] of Object.entries(KRAKEN)) {
    const last = (USD_PRICES[code] ?? PER_USD[code]!).toFixed(5);
    result[key] = { a: [last, '1', '1.000'], b: [last, '1', '1.000'], c: [last, '0.1'], v: ['1', '1'], p: [last, last], t: [1, 1], l: [last, last], h: [last, last], o: last };
  }
  return { error: [], result };
}

export async function startRateProviders(): Promise<{ coinbaseUrl: string; krakenUrl: string; close(): void }> {
  const server = http.createServer((req, res) => {
    const body = (req.url ?? '').startsWith('/0/public/Ticker') ? krakenBody() : coinbaseBody();
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { coinbaseUrl: url, krakenUrl: url, close: () => server.close() };
}
