/**
 * The JSON the dashboard reads, taken from the typed client generated from the gateway's OpenAPI
 * document (packages/client, `npm run generate:client`): a field the gateway changes changes here,
 * and a page that reads it no longer compiles. Type-only: nothing of the client is bundled.
 */
import type { paths } from '../../packages/client/src/openapi';

type Method = 'get' | 'post' | 'put' | 'patch' | 'delete';

/** The JSON body `path` answers to `method` with a 200. */
type Answer<P extends keyof paths, M extends Method> = paths[P][M] extends {
  responses: { 200: { content: { 'application/json': infer Body } } };
}
  ? Body
  : never;

export type Merchant = Answer<'/api/merchant/me', 'get'>;
export type Project = Answer<'/api/merchant/projects', 'get'>['items'][number];
export type ApiKey = Answer<'/api/merchant/projects/{id}/api-keys', 'get'>['items'][number];
export type Invoice = Answer<'/api/merchant/invoices/{id}', 'get'>;
export type Payment = NonNullable<Invoice['payments']>[number];
/** One (asset, network) the deployment takes (GET /api/currencies, docs/networks.md). */
export type PayCurrency = Answer<'/api/currencies', 'get'>['currencies'][number];

/** A page of a list route: its items and the cursor of the next page (null on the last). */
export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export type DeliveryLog = Answer<'/api/merchant/projects/{id}/webhook-deliveries', 'get'>;
export type WebhookDelivery = DeliveryLog['items'][number];
export type EndpointHealth = DeliveryLog['endpoint'];
export type WebhookAttempt = Answer<'/api/merchant/projects/{id}/webhook-deliveries/{deliveryId}', 'get'>['attempts'][number];

export type Payout = Answer<'/api/payout/history', 'get'>['items'][number];
/** A payout in the operator queue, which spans projects. */
export type OperatorPayout = Answer<'/api/admin/payouts', 'get'>['items'][number];
export type Balances = Answer<'/api/payout/balance', 'get'>;

/** A project's auto-sweep configuration (services/payout/README.md#auto-sweep). */
export type AutoSweep = Answer<'/api/merchant/projects/{id}/auto-sweep', 'get'>;
export type AutoSweepEntry = AutoSweep['entries'][number];
/** The operators' Treasury page, per network. */
export type TreasuryNetwork = Answer<'/api/admin/treasury', 'get'>['networks'][number];
