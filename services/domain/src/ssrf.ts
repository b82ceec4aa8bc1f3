/**
 * SSRF guard for webhook destinations (docs/architecture.md#ssrf): a merchant chooses the URL we POST to, so
 * in production it must not reach our own network: loopback, private, link-local (including the
 * cloud metadata service at 169.254.169.254), CGNAT, multicast, reserved ranges, the IPv6 forms
 * that embed such an IPv4 address, and host names that only mean something inside a network.
 *
 * Two checks use it:
 * - checkAtConfigTime(url) when a project sets its webhook URL (the auth service, through
 *   webhookUrlPolicyOf): a clear error right away;
 * - vetDestination(url) before every attempt: DNS can change after configuration (DNS
 *   rebinding), so it resolves again, refuses if ANY address is blocked, and returns the vetted
 *   addresses. The delivery must connect to exactly those (pinnedLookup), never resolve again.
 *
 * Only http and https are accepted in any mode. In development mode (laptops, tests) every host
 * is allowed: receivers there run on 127.0.0.1. Ports are not restricted: a public address is
 * public on any port.
 *
 * Host parsing is WHATWG URL's, the same the HTTP client uses, so the forms it normalises
 * ("2130706433", "0177.0.0.1", "0x7f.1", "127.1" → 127.0.0.1; "[::ffff:127.0.0.1]" →
 * "[::ffff:7f00:1]") are checked as the address they really are.
 */
import { lookup } from 'node:dns/promises';
import { isIPv4, isIPv6, type LookupFunction } from 'node:net';
import type { Setting } from '@coinvoice/runtime';

export type SsrfMode = 'production' | 'development';

/**
 * WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: "true" lets webhooks reach loopback, private and link-local
 * addresses (laptops, tests), "false" refuses them; unset or empty: false when APP_ENV=production,
 * true otherwise. Every process that checks webhook URLs (auth at configuration, the notifier at
 * delivery) spreads these settings into its own, so one variable drives both.
 */
export const webhookDestinationSettings = {
  WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: {
    expected: 'true or false (empty: false when APP_ENV=production, true otherwise)',
    default: '',
    parse: (raw: string) => (raw === '' ? 'auto' : raw === 'true' ? true : raw === 'false' ? false : undefined),
  } satisfies Setting<boolean | 'auto'>,
};

/** The guard's mode for a process's configuration (see webhookDestinationSettings). */
export function ssrfModeOf(config: { APP_ENV: string; WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: boolean | 'auto' }): SsrfMode {
  const allow = config.WEBHOOK_ALLOW_PRIVATE_DESTINATIONS;
  const allowPrivate = allow === 'auto' ? config.APP_ENV !== 'production' : allow;
  return allowPrivate ? 'development' : 'production';
}

/**
 * The check a service runs when a merchant sets a webhook URL, shaped as the auth service's
 * WebhookUrlPolicy: the refusal message for the `webhookUrl` field, or undefined when acceptable.
 * A host name that does not resolve (yet) is accepted: DNS may follow the configuration, and the
 * notifier resolves and checks again before every delivery. In development mode nothing is
 * resolved at all (every destination is allowed there).
 */
export function webhookUrlPolicyOf(guard: SsrfGuard): { refusal(url: string): Promise<string | undefined> } {
  return {
    async refusal(url) {
      // Development allows every destination: nothing to resolve (and no DNS wait on a laptop).
      if (guard.mode === 'development') {
        try {
          const protocol = new URL(url).protocol;
          return protocol === 'http:' || protocol === 'https:' ? undefined : `webhook URLs must use http or https, not ${protocol.slice(0, -1)}`;
        } catch {
          return 'is not a valid URL';
        }
      }
      const check = await guard.checkAtConfigTime(url);
      if (check.ok || check.reason === 'unresolvable') return undefined;
      return check.message;
    },
  };
}

export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to every address a client could connect to. */
export type HostResolver = (hostname: string) => Promise<readonly ResolvedAddress[]>;

/** getaddrinfo, as Node's HTTP client would resolve (so /etc/hosts counts too). */
export const systemResolver: HostResolver = async (hostname) => {
  const answers = await lookup(hostname, { all: true, verbatim: true });
  return answers.map(({ address, family }) => ({ address, family: family === 6 ? 6 : 4 }));
};

export type AddressCategory =
  | 'public'
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link_local'
  | 'shared_cgnat'
  | 'multicast'
  | 'reserved';

export type RefusalReason = 'invalid_url' | 'unsupported_scheme' | 'blocked_host_name' | 'blocked_address' | 'unresolvable';

export type DestinationVerdict =
  | {
      ok: true;
      url: URL;
      /** The host name as the HTTP client sees it (brackets stripped from IPv6 literals). */
      hostname: string;
      port: number;
      /** Connect only to these (pinnedLookup): each one was checked. */
      addresses: readonly ResolvedAddress[];
    }
  | { ok: false; reason: RefusalReason; message: string };

export type ConfigCheck = { ok: true; url: string } | { ok: false; reason: RefusalReason; message: string };

export interface SsrfGuard {
  readonly mode: SsrfMode;
  /** Before each attempt: resolve, check every address, return the ones to connect to. */
  vetDestination(url: string): Promise<DestinationVerdict>;
  /** When a project sets its webhook URL: the same checks, answered as a config error. */
  checkAtConfigTime(url: string): Promise<ConfigCheck>;
}

export function createSsrfGuard(options: { mode: SsrfMode; resolve?: HostResolver }): SsrfGuard {
  const { mode, resolve = systemResolver } = options;
  const production = mode === 'production';

  async function vetDestination(text: string): Promise<DestinationVerdict> {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      return refuse('invalid_url', `${quote(text)} is not a valid URL`);
    }
    if (url.protocol !== 'http:' && url.protocol !== 'https:') {
      return refuse('unsupported_scheme', `webhook URLs must use http or https, not ${url.protocol.slice(0, -1)}`);
    }
    const hostname = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
    const port = url.port === '' ? (url.protocol === 'https:' ? 443 : 80) : Number(url.port);

    const literal = ipLiteral(hostname);
    if (production && literal === undefined) {
      const nameProblem = blockedHostName(hostname);
      if (nameProblem !== undefined) return refuse('blocked_host_name', `${hostname} ${nameProblem}`);
    }

    let addresses: readonly ResolvedAddress[];
    if (literal !== undefined) {
      addresses = [literal];
    } else {
      try {
        addresses = await resolve(hostname);
      } catch (error) {
        const code = error instanceof Error && 'code' in error && typeof error.code === 'string' ? ` (${error.code})` : '';
        return refuse('unresolvable', `${hostname} does not resolve${code}`);
      }
      if (addresses.length === 0) return refuse('unresolvable', `${hostname} does not resolve`);
    }

    if (production) {
      // Every address, not just the first: a client (or a later lookup) may pick any of them.
      for (const { address } of addresses) {
        const classified = classifyIpAddress(address);
        if (classified.category !== 'public') {
          // A resolved address is never echoed: the message reaches the merchant (API answers,
          // the delivery log) and must not map the internal network for them.
          const via = literal === undefined ? `${hostname} resolves to an address that` : address;
          const range = literal === undefined && classified.embeddedIPv4 ? classified.range.replace(` ${classified.embeddedIPv4}`, '') : classified.range;
          return refuse('blocked_address', `${via} is in the ${range}: webhook URLs must point to a public address`);
        }
      }
    }
    return { ok: true, url, hostname, port, addresses };
  }

  return {
    mode,
    vetDestination,
    async checkAtConfigTime(text) {
      const verdict = await vetDestination(text);
      return verdict.ok ? { ok: true, url: verdict.url.href } : verdict;
    },
  };
}

/**
 * A `lookup` for http.request / https.request that answers only with the vetted addresses, so
 * the connection goes where the guard looked while Host and TLS SNI keep the URL's name.
 * Asking for any other host name fails (nothing may re-resolve behind the guard's back).
 */
export function pinnedLookup(verdict: Extract<DestinationVerdict, { ok: true }>): LookupFunction {
  return (hostname, options, callback) => {
    const wanted = options.family === 'IPv4' ? 4 : options.family === 'IPv6' ? 6 : options.family;
    const candidates = verdict.addresses.filter((a) => wanted === undefined || wanted === 0 || a.family === wanted);
    const first = candidates[0];
    if (hostname !== verdict.hostname || first === undefined) {
      const error: NodeJS.ErrnoException = new Error(`lookup of ${hostname} refused: only the vetted ${verdict.hostname} may be used`);
      error.code = 'ENOTFOUND';
      callback(error, '', 0);
      return;
    }
    if (options.all) callback(null, candidates.map(({ address, family }) => ({ address, family })));
    else callback(null, first.address, first.family);
  };
}

export interface ClassifiedAddress {
  category: AddressCategory;
  /** Which range, for messages: "loopback range 127.0.0.0/8, as IPv4-mapped (::ffff:0:0/96) 127.0.0.1". */
  range: string;
  /** The IPv4 address inside an IPv6 one (mapped, NAT64, 6to4) that decided the category. */
  embeddedIPv4?: string;
}

/** The category of an IP address literal (IPv4 dotted quad or IPv6, zone id allowed). */
export function classifyIpAddress(address: string): ClassifiedAddress {
  const zoneless = address.split('%')[0] ?? '';
  if (isIPv4(zoneless)) return classifyIPv4(ipv4ToNumber(zoneless));
  if (isIPv6(zoneless)) return classifyIPv6(ipv6ToBytes(zoneless));
  throw new Error(`not an IP address: ${quote(address)}`);
}

// Host names that only mean something inside a network. Single-label names ("metadata",
// "postgres") are refused too: resolv.conf search domains turn them into internal names.
const BLOCKED_NAMES = new Set(['localhost', 'metadata.google.internal', 'metadata.goog', 'instance-data.ec2.internal']);
const BLOCKED_SUFFIXES = ['.localhost', '.local', '.internal', '.home.arpa', '.localdomain'];

function blockedHostName(hostname: string): string | undefined {
  const name = hostname.toLowerCase().replace(/\.$/, '');
  if (BLOCKED_NAMES.has(name)) return 'is an internal host name';
  const suffix = BLOCKED_SUFFIXES.find((s) => name.endsWith(s));
  if (suffix !== undefined) return `is in ${suffix.slice(1)}, which is not a public domain`;
  if (!name.includes('.')) return 'is not a fully qualified public host name';
  return undefined;
}

function ipLiteral(hostname: string): ResolvedAddress | undefined {
  if (isIPv4(hostname)) return { address: hostname, family: 4 };
  if (isIPv6(hostname)) return { address: hostname, family: 6 };
  return undefined;
}

// IPv4 ranges that are not public (RFC 6890 special-purpose registry), first match wins.
const IPV4_RANGES: ReadonlyArray<readonly [cidr: string, category: AddressCategory, what: string]> = [
  ['0.0.0.0/8', 'unspecified', '"this network"'],
  ['10.0.0.0/8', 'private', 'private'],
  ['100.64.0.0/10', 'shared_cgnat', 'carrier-grade NAT'],
  ['127.0.0.0/8', 'loopback', 'loopback'],
  ['169.254.0.0/16', 'link_local', 'link-local / cloud metadata'],
  ['172.16.0.0/12', 'private', 'private'],
  ['192.0.0.0/24', 'reserved', 'IETF protocol assignments'],
  ['192.0.2.0/24', 'reserved', 'documentation'],
  ['192.88.99.0/24', 'reserved', '6to4 relay anycast'],
  ['192.168.0.0/16', 'private', 'private'],
  ['198.18.0.0/15', 'reserved', 'benchmarking'],
  ['198.51.100.0/24', 'reserved', 'documentation'],
  ['203.0.113.0/24', 'reserved', 'documentation'],
  ['224.0.0.0/4', 'multicast', 'multicast'],
  ['240.0.0.0/4', 'reserved', 'reserved / broadcast'],
];

const IPV4_TABLE = IPV4_RANGES.map(([cidr, category, what]) => {
  const [base = '', bits = ''] = cidr.split('/');
  const prefix = Number(bits);
  const mask = prefix === 0 ? 0 : (~0 << (32 - prefix)) >>> 0;
  return { network: (ipv4ToNumber(base) & mask) >>> 0, mask, category, range: `${what} range ${cidr}` };
});

function classifyIPv4(value: number): ClassifiedAddress {
  const hit = IPV4_TABLE.find((r) => ((value & r.mask) >>> 0) === r.network);
  return hit ? { category: hit.category, range: hit.range } : { category: 'public', range: 'public IPv4' };
}

function classifyIPv6(bytes: Uint8Array): ClassifiedAddress {
  const word = (i: number): number => ((bytes[2 * i] ?? 0) << 8) | (bytes[2 * i + 1] ?? 0);
  const words = Array.from({ length: 8 }, (_, i) => word(i));
  const zeros = (from: number, to: number): boolean => words.slice(from, to).every((w) => w === 0);
  const ipv4At = (offset: number): number =>
    (((bytes[offset] ?? 0) << 24) | ((bytes[offset + 1] ?? 0) << 16) | ((bytes[offset + 2] ?? 0) << 8) | (bytes[offset + 3] ?? 0)) >>> 0;
  const embedded = (offset: number, form: string): ClassifiedAddress => {
    const value = ipv4At(offset);
    const inner = classifyIPv4(value);
    const ipv4 = numberToIPv4(value);
    return { category: inner.category, range: `${inner.range}, as ${form} ${ipv4}`, embeddedIPv4: ipv4 };
  };
  const w0 = words[0] ?? 0;
  const w1 = words[1] ?? 0;
  const w2 = words[2] ?? 0;

  if (zeros(0, 8)) return { category: 'unspecified', range: 'unspecified address ::/128' };
  if (zeros(0, 7) && words[7] === 1) return { category: 'loopback', range: 'loopback address ::1/128' };
  if (zeros(0, 5) && words[5] === 0xffff) return embedded(12, 'IPv4-mapped (::ffff:0:0/96)');
  if (zeros(0, 4) && words[4] === 0xffff && words[5] === 0) return embedded(12, 'IPv4-translated (::ffff:0:0:0/96)');
  if (w0 === 0x64 && w1 === 0xff9b && zeros(2, 6)) return embedded(12, 'NAT64 (64:ff9b::/96)');
  if (w0 === 0x64 && w1 === 0xff9b && w2 === 1) return { category: 'private', range: 'local-use NAT64 range 64:ff9b:1::/48' };
  if (w0 === 0x2002) return embedded(2, '6to4 (2002::/16)');
  if ((w0 & 0xfe00) === 0xfc00) return { category: 'private', range: 'unique local range fc00::/7' };
  if ((w0 & 0xffc0) === 0xfe80) return { category: 'link_local', range: 'link-local range fe80::/10' };
  if ((w0 & 0xffc0) === 0xfec0) return { category: 'private', range: 'site-local range fec0::/10' };
  if ((w0 & 0xff00) === 0xff00) return { category: 'multicast', range: 'multicast range ff00::/8' };
  // Teredo (2001::/32) and other protocol assignments, documentation prefixes.
  if (w0 === 0x2001 && w1 < 0x200) return { category: 'reserved', range: 'IETF protocol assignments range 2001::/23 (incl. Teredo)' };
  if (w0 === 0x2001 && w1 === 0xdb8) return { category: 'reserved', range: 'documentation range 2001:db8::/32' };
  if (w0 === 0x3fff && (w1 & 0xf000) === 0) return { category: 'reserved', range: 'documentation range 3fff::/20' };
  // Global unicast is 2000::/3; everything else (IPv4-compatible ::/96, 100::/64 discard…) is not.
  if ((w0 & 0xe000) === 0x2000) return { category: 'public', range: 'public IPv6' };
  return { category: 'reserved', range: 'reserved space outside global unicast 2000::/3' };
}

function ipv4ToNumber(dotted: string): number {
  return dotted.split('.').reduce((acc, part) => ((acc << 8) | Number(part)) >>> 0, 0);
}

function numberToIPv4(value: number): string {
  return [24, 16, 8, 0].map((shift) => (value >>> shift) & 0xff).join('.');
}

/** 16 bytes of a valid IPv6 literal (already checked by isIPv6), with an optional IPv4 tail. */
function ipv6ToBytes(text: string): Uint8Array {
  const groups = (part: string): number[] => {
    if (part === '') return [];
    return part.split(':').flatMap((group) => {
      if (group.includes('.')) {
        const v4 = ipv4ToNumber(group);
        return [v4 >>> 16, v4 & 0xffff];
      }
      return [parseInt(group, 16)];
    });
  };
  const doubleColon = text.indexOf('::');
  let words: number[];
  if (doubleColon < 0) {
    words = groups(text);
  } else {
    const head = groups(text.slice(0, doubleColon));
    const tail = groups(text.slice(doubleColon + 2));
    words = [...head, ...new Array<number>(8 - head.length - tail.length).fill(0), ...tail];
  }
  const bytes = new Uint8Array(16);
  words.forEach((w, i) => {
    bytes[2 * i] = w >>> 8;
    bytes[2 * i + 1] = w & 0xff;
  });
  return bytes;
}

function refuse(reason: RefusalReason, message: string): { ok: false; reason: RefusalReason; message: string } {
  return { ok: false, reason, message };
}

function quote(text: string): string {
  return JSON.stringify(text.length > 100 ? `${text.slice(0, 100)}…` : text);
}
