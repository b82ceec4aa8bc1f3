/**
 * x-api-key authentication. A key with a bad checksum is refused here, without a lookup; a
 * well-formed key is verified by the auth service once and then served from a short-lived cache
 * keyed by its SHA-256. Revocations arrive over NATS and drop the cached entry at once, so a
 * revoked key stops working on every gateway replica within a second, not at cache expiry. While
 * that feed is down (NATS away, or not reached yet since the start) a verification is kept for a
 * second only (docs/architecture.md#starting-while-nats-is-down): a key revoked meanwhile stops
 * working within a second too.
 */
import { Environment } from '@coinvoice/runtime/gen/coinvoice/common/v1/environment_pb';
import { AuthService } from '@coinvoice/runtime/gen/coinvoice/auth/v1/auth_pb';
import { Code, ConnectError, type Client } from '@connectrpc/connect';
import { hashApiKey, parseApiKey } from '@coinvoice/domain/credentials/api-keys';
import { environmentFromProto, type ProjectEnvironment } from '@coinvoice/domain/environment';
import { HttpProblem } from '../problem';
import type { ApiKeyPrincipal } from './principal';

export const API_KEY_HEADER = 'x-api-key';

/** How long a verification is kept while the revocation feed is down. */
const TTL_WITHOUT_FEED_MS = 1_000;

interface CacheEntry {
  principal: ApiKeyPrincipal;
  /** When auth answered it: kept for the TTL, a second while the revocation feed is down. */
  verifiedAt: number;
}

export interface ApiKeyVerifierOptions {
  ttlMs: number;
  maxEntries?: number;
  now?: () => number;
}

export function invalidApiKey(detail = 'the API key is missing, malformed, unknown or revoked'): HttpProblem {
  return new HttpProblem(401, 'invalid_api_key', detail, [], { 'www-authenticate': 'ApiKey header="x-api-key"' });
}

/** A key's environment as auth answered it; unspecified or unknown is refused, never taken for live. */
export function environmentOfKey(environment: Environment): ProjectEnvironment {
  const name = environmentFromProto(environment);
  if (name === undefined) throw invalidApiKey('the API key belongs to a project whose environment is unspecified or unknown');
  return name;
}

export class ApiKeyVerifier {
  private readonly cache = new Map<string, CacheEntry>();
  /** Concurrent first requests with one key share a single auth call. */
  private readonly inFlight = new Map<string, Promise<ApiKeyPrincipal>>();
  private readonly maxEntries: number;
  private readonly now: () => number;
  /** Bumped by every revocation, so a lookup that started before it is not cached after it. */
  private generation = 0;
  /** Revocations arrive (setFeedLive). */
  private feedLive = true;
  /** Told of revocations: what holds a key open beyond one request (an event stream) listens. */
  private readonly revocationListeners = new Set<(keyHash: string | undefined) => void>();

  constructor(
    private readonly auth: Client<typeof AuthService>,
    private readonly options: ApiKeyVerifierOptions,
  ) {
    this.maxEntries = options.maxEntries ?? 10_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * The key's principal: from the cache, else from auth. `guardLookup`, when given, wraps only the
   * call to auth (a key neither cached nor malformed): the per-address limit of unknown keys.
   */
  async verify(raw: unknown, guardLookup?: (lookUp: () => Promise<ApiKeyPrincipal>) => Promise<ApiKeyPrincipal>): Promise<ApiKeyPrincipal> {
    if (raw === undefined || raw === '') throw invalidApiKey('the x-api-key header is required');
    if (typeof raw !== 'string') throw invalidApiKey();
    // A cached key was well-formed when it was first verified: its checksum need not be re-checked.
    const hash = hashApiKey(raw);
    const cached = this.cache.get(hash);
    const now = this.now();
    if (cached && now - cached.verifiedAt < (this.feedLive ? this.options.ttlMs : TTL_WITHOUT_FEED_MS)) return cached.principal;
    if (!parseApiKey(raw).wellFormed) throw invalidApiKey();
    const key = raw;
    const pending = this.inFlight.get(hash);
    if (pending) return pending;
    const lookup = (guardLookup ? guardLookup(() => this.lookup(key, hash)) : this.lookup(key, hash)).finally(() => this.inFlight.delete(hash));
    this.inFlight.set(hash, lookup);
    return lookup;
  }

  private async lookup(key: string, hash: string): Promise<ApiKeyPrincipal> {
    const generation = this.generation;
    let principal: ApiKeyPrincipal;
    try {
      const res = await this.auth.verifyApiKey({ key });
      principal = {
        kind: 'api_key',
        keyId: res.keyId,
        projectId: res.projectId,
        projectName: res.projectName,
        // Fails closed: a key whose environment is unspecified or unknown is no key at all.
        environment: environmentOfKey(res.environment),
        merchantId: res.merchantId,
        invoiceLifetimeMinutes: res.invoiceLifetimeMinutes,
        paymentTolerancePercent: res.paymentTolerancePercent || '0',
      };
    } catch (err) {
      if (err instanceof ConnectError && (err.code === Code.Unauthenticated || err.code === Code.NotFound)) throw invalidApiKey();
      throw err;
    }
    if (generation === this.generation) {
      if (this.cache.size >= this.maxEntries) {
        const oldest = this.cache.keys().next().value;
        if (oldest !== undefined) this.cache.delete(oldest);
      }
      this.cache.set(hash, { principal, verifiedAt: this.now() });
    }
    return principal;
  }

  /** A key was revoked: forget it now. */
  revokeHash(keyHash: string): void {
    this.generation++;
    this.cache.delete(keyHash);
    for (const listener of this.revocationListeners) listener(keyHash);
  }

  /**
   * Calls `listener` with the hash of every key revoked from now on, and with undefined when the
   * cache is dropped after a gap in the revocation feed (any key may have been revoked meanwhile:
   * verify again). Returns the unsubscribe.
   */
  onRevocation(listener: (keyHash: string | undefined) => void): () => void {
    this.revocationListeners.add(listener);
    return () => this.revocationListeners.delete(listener);
  }

  /** A project changed (name, lifetime): cached principals of it are stale. */
  forgetProject(projectId: string): void {
    this.generation++;
    for (const [hash, entry] of this.cache) if (entry.principal.projectId === projectId) this.cache.delete(hash);
  }

  /**
   * Whether revocations arrive now (the feed is subscribed and connected). While they do not, a
   * verification is kept for a second only: a key revoked meanwhile stops working within it.
   */
  setFeedLive(live: boolean): void {
    this.feedLive = live;
  }

  /** After a gap in the revocation feed (NATS reconnect) nothing cached can be trusted. */
  clear(): void {
    this.generation++;
    this.cache.clear();
    for (const listener of this.revocationListeners) listener(undefined);
  }
}
