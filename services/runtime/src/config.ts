/**
 * Configuration comes from environment variables only, parsed once at start into a typed object.
 * A missing or malformed value stops the process with one line naming the variable and what was
 * expected (main.ts prints it and exits 1).
 */

import { isIP } from 'node:net';

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    readonly expected: string,
    /** The offending value as it may be shown (see Setting.shown); absent when missing. */
    got: string | undefined,
    missing = got === undefined,
  ) {
    super(
      missing
        ? `config: ${variable} is required: expected ${expected}`
        : got === undefined
          ? `config: ${variable} is invalid (value not shown): expected ${expected}`
          : `config: ${variable}=${JSON.stringify(got.length > 80 ? `${got.slice(0, 80)}…` : got)} is invalid: expected ${expected}`,
    );
    this.name = 'ConfigError';
  }
}

export interface Setting<T> {
  /** What a valid value looks like, for the error line and the README. */
  expected: string;
  /** Used when the variable is unset or empty; absent means the variable is required. */
  default?: string;
  /**
   * Used when unset outside production only: a laptop finds Postgres on localhost, but a
   * production process with no DATABASE_URL must stop instead of quietly looking there.
   */
  devDefault?: string;
  /**
   * How a bad value may appear in the error line: `false` never (a pasted private key, a
   * password), a function to redact (a URL's password). Default: as given.
   */
  shown?: false | ((raw: string) => string);
  parse(raw: string): T | undefined;
}

export type Settings = Record<string, Setting<unknown>>;
export type ConfigOf<S extends Settings> = { [K in keyof S]: S[K] extends Setting<infer T> ? T : never };

export type Env = Record<string, string | undefined>;

/** Parses every variable of `settings` from `env`; throws ConfigError on the first bad one. */
export function loadConfig<S extends Settings>(settings: S, env: Env = process.env): ConfigOf<S> {
  const production = env.APP_ENV === 'production';
  const out: Record<string, unknown> = {};
  for (const [name, setting] of Object.entries(settings)) {
    const given = env[name];
    const fallback = setting.default ?? (production ? undefined : setting.devDefault);
    const raw = given === undefined || given === '' ? fallback : given;
    if (raw === undefined) throw new ConfigError(name, setting.expected, undefined);
    const value = setting.parse(raw);
    if (value === undefined) {
      const shown = setting.shown === false ? undefined : setting.shown ? setting.shown(raw) : raw;
      throw new ConfigError(name, setting.expected, shown, false);
    }
    out[name] = value;
  }
  return out as ConfigOf<S>;
}

/**
 * postgres://user:secret@host → postgres://user:***@host, so an error line never carries a
 * password: whatever lies between the user's ":" and the LAST "@", so a password with an
 * unencoded "/" or "@" — the usual reason such a URL is refused — and a mistyped scheme
 * ("postgres//…") are masked too (an outside review saw one printed in full).
 */
export function redactUrlPassword(raw: string): string {
  const at = raw.lastIndexOf('@');
  if (at < 0) return raw;
  // The scheme and its slashes, however mistyped ("postgres:/", "postgres//"); none: user first.
  const scheme = /^[a-z][a-z0-9+.-]*(:\/+|\/\/+)/i.exec(raw);
  const userStart = scheme && scheme[0].length <= at ? scheme[0].length : 0;
  const colon = raw.indexOf(':', userStart);
  if (colon < 0 || colon > at) return raw;
  return `${raw.slice(0, colon)}:***${raw.slice(at)}`;
}

const DURATION_UNIT_MS = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000, d: 86_400_000 } as const;

/**
 * `30d` → 2592000000; undefined for anything but a whole number followed by ms, s, m, h or d (or,
 * with `bareMilliseconds`, a whole number alone: milliseconds). The one duration syntax of the
 * system's settings.
 */
export function parseDurationMs(raw: string, options: { bareMilliseconds?: boolean } = {}): number | undefined {
  const match = /^(\d{1,12})(ms|s|m|h|d)?$/.exec(raw.trim());
  if (!match || (match[2] === undefined && !options.bareMilliseconds)) return undefined;
  const ms = Number(match[1]) * DURATION_UNIT_MS[(match[2] ?? 'ms') as keyof typeof DURATION_UNIT_MS];
  return Number.isSafeInteger(ms) ? ms : undefined;
}

/** The largest whole unit: 2592000000 → `30d`, 90000 → `90s`. */
export function formatDurationMs(ms: number): string {
  for (const unit of ['d', 'h', 'm', 's'] as const) {
    if (ms >= DURATION_UNIT_MS[unit] && ms % DURATION_UNIT_MS[unit] === 0) return `${ms / DURATION_UNIT_MS[unit]}${unit}`;
  }
  return `${ms}ms`;
}

export const setting = {
  string(options: { default?: string; expected?: string } = {}): Setting<string> {
    return { expected: options.expected ?? 'a non-empty string', default: options.default, parse: (raw) => raw };
  },
  port(defaultPort?: number): Setting<number> {
    return {
      expected: 'a TCP port number from 0 to 65535',
      default: defaultPort === undefined ? undefined : String(defaultPort),
      parse: (raw) => {
        if (!/^\d{1,5}$/.test(raw)) return undefined;
        const port = Number(raw);
        return port <= 65535 ? port : undefined;
      },
    };
  },
  int(options: { default?: number; min?: number; max?: number } = {}): Setting<number> {
    const { min = Number.MIN_SAFE_INTEGER, max = Number.MAX_SAFE_INTEGER } = options;
    return {
      expected: `a whole number from ${min} to ${max}`,
      default: options.default === undefined ? undefined : String(options.default),
      parse: (raw) => {
        if (!/^-?\d+$/.test(raw)) return undefined;
        const n = Number(raw);
        return Number.isSafeInteger(n) && n >= min && n <= max ? n : undefined;
      },
    };
  },
  url(protocols: string[], options: { default?: string; devDefault?: string } = {}): Setting<string> {
    return {
      expected: `a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}`,
      default: options.default,
      devDefault: options.devDefault,
      shown: redactUrlPassword,
      parse: (raw) => {
        try {
          const url = new URL(raw);
          return protocols.includes(url.protocol) && url.host !== '' ? raw : undefined;
        } catch {
          return undefined;
        }
      },
    };
  },
  /** Like `url`, or a comma-separated list of such URLs (the seed servers of a NATS cluster). */
  urlList(protocols: string[], options: { default?: string; devDefault?: string } = {}): Setting<string> {
    const one = setting.url(protocols);
    return {
      expected: `a URL starting with ${protocols.map((p) => `${p}//`).join(' or ')}, or a comma-separated list of them`,
      default: options.default,
      devDefault: options.devDefault,
      shown: (raw) => raw.split(',').map(redactUrlPassword).join(','),
      parse: (raw) => {
        const urls = raw.split(',').map((part) => part.trim());
        return urls.every((url) => one.parse(url) !== undefined) ? urls.join(',') : undefined;
      },
    };
  },
  oneOf<T extends string>(values: readonly T[], options: { default?: T } = {}): Setting<T> {
    return {
      expected: `one of ${values.join(', ')}`,
      default: options.default,
      parse: (raw) => (values as readonly string[]).includes(raw) ? (raw as T) : undefined,
    };
  },
  bool(options: { default?: boolean } = {}): Setting<boolean> {
    return {
      expected: 'true or false',
      default: options.default === undefined ? undefined : String(options.default),
      parse: (raw) => (raw === 'true' ? true : raw === 'false' ? false : undefined),
    };
  },
  list(options: { default?: string } = {}): Setting<string[]> {
    return {
      expected: 'a comma-separated list',
      default: options.default ?? '',
      parse: (raw) => raw.split(',').map((s) => s.trim()).filter((s) => s !== ''),
    };
  },
  /** A duration such as `30d`, `12h`, `90m`, `45s` or `500ms`, in milliseconds. */
  duration(options: { default?: string; minMs?: number; maxMs?: number } = {}): Setting<number> {
    const { minMs = 0, maxMs = Number.MAX_SAFE_INTEGER } = options;
    return {
      expected: `a duration like 30d, 12h, 90m or 45s (number + ms|s|m|h|d), from ${formatDurationMs(minMs)} to ${formatDurationMs(maxMs)}`,
      default: options.default,
      parse: (raw) => {
        const ms = parseDurationMs(raw);
        return ms !== undefined && ms >= minMs && ms <= maxMs ? ms : undefined;
      },
    };
  },
  /**
   * A NATS subject token / stream-name prefix. Lower case only: stream names are upper-cased, so
   * "Foo" and "foo" would share a stream while publishing on different subjects.
   */
  name(options: { default?: string } = {}): Setting<string> {
    return {
      expected: 'lower-case letters, digits, - or _ (1 to 32 characters)',
      default: options.default,
      parse: (raw) => (/^[a-z0-9_-]{1,32}$/.test(raw) ? raw : undefined),
    };
  },
};

/**
 * BIND_HOST: the interface every listening port of a process binds. Loopback by default, so a
 * development process (gRPC without mutual TLS) never faces a network; the image and the
 * manifests set 0.0.0.0 (README, Configuration).
 */
export const bindHostSetting: Setting<string> = {
  expected: 'an IP address to listen on: 127.0.0.1 (this machine only), 0.0.0.0 (every interface), or one interface\'s address',
  default: '127.0.0.1',
  parse: (raw) => (isIP(raw.trim()) === 0 ? undefined : raw.trim()),
};

/** Settings every service process shares. */
export const commonSettings = {
  /** development: local defaults apply; production: connection settings must be given. */
  APP_ENV: setting.oneOf(['development', 'production'] as const, { default: 'development' }),
  DATABASE_URL: setting.url(['postgres:', 'postgresql:'], { devDefault: 'postgres://postgres@127.0.0.1:5432/postgres' }),
  DATABASE_POOL_MAX: setting.int({ default: 10, min: 1, max: 200 }),
  /** One server, or several of one cluster (the client also learns the others from the server). */
  NATS_URL: setting.urlList(['nats:', 'tls:'], { devDefault: 'nats://127.0.0.1:4222' }),
  EVENT_NAMESPACE: setting.name({ default: 'coinvoice' }),
  /** Copies of each JetStream stream a NATS cluster keeps: 1, or 3/5 on a cluster of that many servers. */
  NATS_STREAM_REPLICAS: setting.int({ default: 1, min: 1, max: 5 }),
  /** How long a stream keeps events (JetStream drops older ones). */
  NATS_STREAM_MAX_AGE: setting.duration({ default: '30d', minMs: 60 * 60_000, maxMs: 3_650 * 86_400_000 }),
  LOG_LEVEL: setting.oneOf(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, { default: 'info' }),
  SHUTDOWN_GRACE_MS: setting.int({ default: 10_000, min: 0, max: 120_000 }),
  /**
   * How long a published event stays in the outbox. 0 (the default): deleted in the relay's batch
   * that published it, so the table holds only what is unsent (docs/performance.md#events); more:
   * kept for inspection, then swept (the tests that read events from the table use this).
   */
  OUTBOX_KEEP_PUBLISHED: setting.duration({ default: '0s', minMs: 0, maxMs: 7 * 86_400_000 }),
  /** How long processed_events records are kept: longer than a stream keeps events (30 days). */
  PROCESSED_EVENTS_RETENTION_DAYS: setting.int({ default: 35, min: 1, max: 3650 }),
};
