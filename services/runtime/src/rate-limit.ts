/**
 * Rate limits (docs/architecture.md#rate-limits): at most `limit` calls per `windowSeconds` for one key (an account,
 * an IP, a project, an API key), counted in fixed windows. Limits that guard secrets (login,
 * registration, payout codes) count in Postgres, so every replica shares one count; the others
 * may count in memory per replica. A refused call is a RESOURCE_EXHAUSTED ServiceError with code
 * `rate_limited` and a RateLimitExceeded detail, which the gateway turns into a 429 with
 * Retry-After, RateLimit-Policy and RateLimit headers.
 *
 * Fixed windows may let up to twice the limit through around a window boundary; the limits are
 * set with that in mind. Keys are stored as SHA-256 (no IPs or emails in the counter table).
 */
import { createHash } from 'node:crypto';
import { isIPv6 } from 'node:net';
import { create } from '@bufbuild/protobuf';
import { Code, ConnectError } from '@connectrpc/connect';
import type { Setting } from './config';
import type { Queryable, Sql } from './db';
import { ErrorDetailSchema, RateLimitExceededSchema } from './gen/coinvoice/common/v1/error_pb';
import type { Logger } from './log';
import type { Worker } from './worker';

export interface RateLimitPolicy {
  /** Names the limit in the RateLimit headers and logs, e.g. "login-account". */
  name: string;
  limit: number;
  windowSeconds: number;
}

export type RateLimitDecision =
  | { allowed: true; remaining: number; resetSeconds: number }
  | { allowed: false; retryAfterSeconds: number };

export interface RateLimitStore {
  /** Counts one call of `key` under `policy` and says whether it is within the limit. */
  consume(policy: RateLimitPolicy, key: string): Promise<RateLimitDecision>;
  /**
   * Takes back one counted call of `key` in the current window (a call that turned out to be the
   * replay of another); nothing when the window has ended meanwhile.
   */
  refund(policy: RateLimitPolicy, key: string): Promise<void>;
}

function bucketOf(policy: RateLimitPolicy, key: string): string {
  return `${policy.name}:${createHash('sha256').update(key, 'utf8').digest('hex')}`;
}

function decision(policy: RateLimitPolicy, hits: number, resetSeconds: number): RateLimitDecision {
  const reset = Math.max(1, Math.ceil(resetSeconds));
  return hits <= policy.limit ? { allowed: true, remaining: policy.limit - hits, resetSeconds: reset } : { allowed: false, retryAfterSeconds: reset };
}

/** Counts in the service's own schema: one upsert per call, shared by every replica. */
export class PostgresRateLimitStore implements RateLimitStore {
  constructor(private readonly sql: Queryable) {}

  async consume(policy: RateLimitPolicy, key: string): Promise<RateLimitDecision> {
    const w = policy.windowSeconds;
    const [row] = await this.sql<{ hits: number; reset_seconds: number }[]>`
      insert into rate_limit_counters as c (bucket, window_start, expires_at, hits)
      values (
        ${bucketOf(policy, key)},
        to_timestamp(floor(extract(epoch from clock_timestamp()) / ${w}) * ${w}),
        to_timestamp((floor(extract(epoch from clock_timestamp()) / ${w}) + 1) * ${w}),
        1)
      on conflict (bucket, window_start) do update set hits = c.hits + 1
      returning hits, extract(epoch from (expires_at - clock_timestamp()))::float8 as reset_seconds`;
    if (!row) throw new Error('rate limit upsert returned no row');
    return decision(policy, row.hits, row.reset_seconds);
  }

  async refund(policy: RateLimitPolicy, key: string): Promise<void> {
    const w = policy.windowSeconds;
    await this.sql`
      update rate_limit_counters set hits = hits - 1
      where bucket = ${bucketOf(policy, key)} and hits > 0
        and window_start = to_timestamp(floor(extract(epoch from clock_timestamp()) / ${w}) * ${w})`;
  }

  /** Deletes windows that have ended. */
  async deleteExpired(): Promise<number> {
    const rows = await this.sql`delete from rate_limit_counters where expires_at < now() returning 1`;
    return rows.length;
  }
}

/** Counts in this process only (limits that need not hold across replicas). Bounded in size. */
export class MemoryRateLimitStore implements RateLimitStore {
  private readonly windows = new Map<string, { windowEnd: number; hits: number }>();

  constructor(
    private readonly maxKeys = 100_000,
    private readonly now: () => number = Date.now,
  ) {}

  async consume(policy: RateLimitPolicy, key: string): Promise<RateLimitDecision> {
    const now = this.now();
    const bucket = `${policy.name}:${key}`;
    let entry = this.windows.get(bucket);
    if (!entry || entry.windowEnd <= now) {
      const windowMs = policy.windowSeconds * 1000;
      entry = { windowEnd: (Math.floor(now / windowMs) + 1) * windowMs, hits: 0 };
      if (!this.windows.has(bucket) && this.windows.size >= this.maxKeys) this.evictExpired(now);
      this.windows.set(bucket, entry);
    }
    entry.hits += 1;
    return decision(policy, entry.hits, (entry.windowEnd - now) / 1000);
  }

  async refund(policy: RateLimitPolicy, key: string): Promise<void> {
    const entry = this.windows.get(`${policy.name}:${key}`);
    if (entry && entry.windowEnd > this.now() && entry.hits > 0) entry.hits -= 1;
  }

  private evictExpired(now: number): void {
    for (const [bucket, entry] of this.windows) if (entry.windowEnd <= now) this.windows.delete(bucket);
    // Still full: drop the oldest entries (a flood of fresh keys cannot grow memory without bound).
    for (const bucket of this.windows.keys()) {
      if (this.windows.size < this.maxKeys) break;
      this.windows.delete(bucket);
    }
  }
}

/**
 * What a per-address limit counts a client by (docs/http-edge.md#client-addresses): an IPv4 address
 * as it is, an IPv6 address by its /64 — one subscriber's network, every address of which it
 * controls (RFC 6177), so counting single IPv6 addresses is no limit at all. An IPv4-mapped IPv6
 * address (::ffff:192.0.2.1) is its IPv4 address; a zone (%eth0) is left out. Anything else
 * (no address: an internal call) is counted as itself.
 */
export function clientAddressKey(ip: string): string {
  if (ip === '') return 'unknown';
  const address = ip.split('%')[0]!.toLowerCase();
  if (!isIPv6(address)) return address;
  const groups = ipv6Groups(address);
  if (groups.slice(0, 5).every((g) => g === 0) && groups[5] === 0xffff) {
    return [groups[6]! >> 8, groups[6]! & 0xff, groups[7]! >> 8, groups[7]! & 0xff].join('.');
  }
  return `${groups.slice(0, 4).map((g) => g.toString(16).padStart(4, '0')).join(':')}::/64`;
}

/** The eight 16-bit groups of a valid IPv6 address ("::" expanded, a dotted IPv4 tail as two groups). */
function ipv6Groups(address: string): number[] {
  let text = address;
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const headGroups = head === '' ? [] : head.split(':');
  const tailGroups = tail === undefined || tail === '' ? [] : tail.split(':');
  const all = tail === undefined ? headGroups : [...headGroups, ...Array<string>(8 - headGroups.length - tailGroups.length).fill('0'), ...tailGroups];
  return all.map((g) => parseInt(g, 16));
}

/** The error a refused call fails with (RESOURCE_EXHAUSTED → 429). */
export function rateLimitedError(policy: RateLimitPolicy, retryAfterSeconds: number): ConnectError {
  const detail = create(ErrorDetailSchema, {
    code: 'rate_limited',
    rateLimit: create(RateLimitExceededSchema, {
      policy: policy.name,
      limit: policy.limit,
      windowSeconds: policy.windowSeconds,
      retryAfterSeconds,
    }),
  });
  return new ConnectError(`too many requests (${policy.name}): try again in ${retryAfterSeconds} s`, Code.ResourceExhausted, undefined, [
    { desc: ErrorDetailSchema, value: detail },
  ]);
}

/** Counts the call; throws `rate_limited` when it is over the limit. */
export async function enforceRateLimit(store: RateLimitStore, policy: RateLimitPolicy, key: string): Promise<void> {
  const outcome = await store.consume(policy, key);
  if (!outcome.allowed) throw rateLimitedError(policy, outcome.retryAfterSeconds);
}

const DURATION_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** "<limit>/<window>" such as "10/15m" (units s, m, h, d): a limit setting with its policy name. */
export function rateLimitSetting(name: string, defaultValue: string): Setting<RateLimitPolicy> {
  return {
    expected: 'a limit per window like "10/15m" (a count, "/", a duration in s, m, h or d)',
    default: defaultValue,
    parse(raw) {
      const match = /^\s*(\d{1,9})\s*\/\s*(\d{1,7})\s*([smhd])\s*$/.exec(raw);
      if (!match) return undefined;
      const limit = Number(match[1]);
      const windowSeconds = Number(match[2]) * (DURATION_SECONDS[match[3]!] ?? 0);
      if (limit < 1 || windowSeconds < 1 || windowSeconds > 7 * 86_400) return undefined;
      return { name, limit, windowSeconds };
    },
  };
}

/** Deletes ended windows every `intervalMs` (a service worker next to its RPCs). */
export function rateLimitCleaner(sql: Sql, logger: Logger, intervalMs = 60_000): Worker {
  const store = new PostgresRateLimitStore(sql);
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<unknown> | undefined;
  return {
    start() {
      timer = setInterval(() => {
        running ??= store
          .deleteExpired()
          .catch((err: unknown) => logger.warn({ err }, 'could not delete expired rate limit windows'))
          .finally(() => (running = undefined));
      }, intervalMs);
      timer.unref();
    },
    async stop() {
      if (timer) clearInterval(timer);
      await running;
    },
  };
}
