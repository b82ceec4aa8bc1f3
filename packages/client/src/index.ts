/**
 * The coinvoice REST API as a typed client: `openapi.ts` is generated from the gateway's OpenAPI
 * document (`npm run generate:client`; a test fails when it is stale), and openapi-fetch turns it
 * into `client.GET('/api/invoice/{id}', …)` calls whose paths, parameters, bodies and answers
 * are checked by the compiler.
 *
 *   const coinvoice = createCoinvoiceClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'SBX_…' });
 *   const { data, error } = await coinvoice.POST('/api/invoice', { body: { priceAmount: '19.90', … } });
 *
 * Errors are not thrown: `error` is the RFC 9457 problem (`Problem`), `response` the raw answer.
 */
import createClient, { type Client } from 'openapi-fetch';
import type { components, paths, webhooks } from './openapi';

export type { components, operations, paths, webhooks } from './openapi';

export interface CoinvoiceClientOptions {
  /** The gateway, e.g. http://127.0.0.1:8080. */
  baseUrl: string;
  /** A project API key (SBX_… or LIVE_…), sent as x-api-key. */
  apiKey?: string;
  /** A merchant session token (dashboard routes), sent as a Bearer token. */
  token?: string;
  /** Another fetch (tests, proxies). */
  fetch?: typeof globalThis.fetch;
}

export type CoinvoiceClient = Client<paths>;

export function createCoinvoiceClient(options: CoinvoiceClientOptions): CoinvoiceClient {
  const client = createClient<paths>({ baseUrl: options.baseUrl.replace(/\/+$/, ''), ...(options.fetch ? { fetch: options.fetch } : {}) });
  const credentials: Array<[string, string]> = [];
  if (options.apiKey) credentials.push(['x-api-key', options.apiKey]);
  if (options.token) credentials.push(['authorization', `Bearer ${options.token}`]);
  if (credentials.length > 0) {
    client.use({
      onRequest({ request }) {
        // A header given on the call wins (e.g. another key for one request).
        for (const [name, value] of credentials) if (!request.headers.has(name)) request.headers.set(name, value);
        return request;
      },
    });
  }
  return client;
}

/** Every error body (application/problem+json). */
export type Problem = components['schemas']['Problem'];
/** An invoice as every invoice route answers it. */
export type Invoice = paths['/api/invoice/{id}']['get']['responses'][200]['content']['application/json'];
/** The body of a webhook event, by event type: `WebhookBody<'invoice.paid'>`. */
export type WebhookBody<T extends keyof webhooks> = NonNullable<webhooks[T]['post']['requestBody']>['content']['application/json'];
/** Every event type a webhook endpoint receives (the `webhook-event-type` header). */
export type WebhookEventType = keyof webhooks;
