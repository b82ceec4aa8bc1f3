/**
 * The gateway's own rate limits (docs/architecture.md#rate-limits): API calls per key (generous: it stops a runaway
 * client, not an attacker with a secret) and the public checkout endpoints per client IP. They
 * count in memory per replica; the limits that guard secrets (login, registration, payout and
 * email codes) are counted by the services in Postgres and hold across replicas.
 */
import { clientAddressKey, MemoryRateLimitStore, rateLimitSetting, type RateLimitPolicy, type RateLimitStore } from '@coinvoice/runtime';
import type { onRequestAsyncHookHandler } from 'fastify';
import { HttpProblem, rateLimitHeaders } from './problem';

export const gatewayRateLimitSettings = {
  /** Calls per API key (all routes authenticated by x-api-key), per gateway replica. */
  RATE_LIMIT_API_PER_KEY: rateLimitSetting('api-key', '6000/1m'),
  /** Calls to the public checkout page and its endpoints per client IP, per gateway replica. */
  RATE_LIMIT_CHECKOUT_PER_IP: rateLimitSetting('checkout-ip', '300/1m'),
};

export interface GatewayRateLimitOptions {
  apiPerKey: RateLimitPolicy;
  checkoutPerIp: RateLimitPolicy;
  store?: RateLimitStore;
}

export class GatewayRateLimits {
  private readonly store: RateLimitStore;

  constructor(private readonly options: GatewayRateLimitOptions) {
    this.store = options.store ?? new MemoryRateLimitStore();
  }

  /** Counts one call of the API key; a 429 problem when over the limit. */
  async apiKey(keyId: string): Promise<void> {
    await this.enforce(this.options.apiPerKey, keyId);
  }

  /** onRequest hook of the public checkout routes. */
  readonly checkout: onRequestAsyncHookHandler = async (request) => {
    await this.enforce(this.options.checkoutPerIp, clientAddressKey(request.ip));
  };

  private async enforce(policy: RateLimitPolicy, key: string): Promise<void> {
    const outcome = await this.store.consume(policy, key);
    if (!outcome.allowed) {
      throw new HttpProblem(
        429,
        'rate_limited',
        `too many requests (${policy.name}): try again in ${outcome.retryAfterSeconds} s`,
        [],
        rateLimitHeaders({ policy: policy.name, limit: policy.limit, windowSeconds: policy.windowSeconds, retryAfterSeconds: outcome.retryAfterSeconds }),
      );
    }
  }
}
