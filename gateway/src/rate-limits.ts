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
  /**
   * Unknown API keys per client IP that auth is asked about, per gateway replica: a well-formed
   * forged key (its checksum is public) cost an auth call and a lookup each, unlimited. A key auth
   * knows gives its count back.
   */
  RATE_LIMIT_API_KEY_LOOKUPS_PER_IP: rateLimitSetting('api-key-lookup-ip', '120/1m'),
};

export interface GatewayRateLimitOptions {
  apiPerKey: RateLimitPolicy;
  checkoutPerIp: RateLimitPolicy;
  /** Optional for callers that build a gateway for its document only; absent: no limit. */
  apiKeyLookupsPerIp?: RateLimitPolicy;
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

  /**
   * A key auth is to be asked about, for this client address: refused (429, auth not asked) while
   * the address is over its limit of keys auth did not know; counted only when auth answers that
   * it does not know this one. A client whose cache entries expire, or many behind one address,
   * or many requests at once, are never refused for valid keys (a review).
   */
  async apiKeyLookup<T>(clientIp: string, lookUp: () => Promise<T>): Promise<T> {
    const policy = this.options.apiKeyLookupsPerIp;
    if (!policy) return lookUp();
    const key = clientAddressKey(clientIp);
    // Whether the address is over the limit: a count taken and given back at once.
    await this.enforce(policy, key);
    await this.store.refund(policy, key);
    try {
      return await lookUp();
    } catch (err) {
      // Only "no such key" counts: auth unreachable is no fault of the client's.
      if (err instanceof HttpProblem && err.status === 401) await this.store.consume(policy, key);
      throw err;
    }
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
