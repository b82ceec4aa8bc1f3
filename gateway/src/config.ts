import { bindHostSetting, commonSettings, ConfigError, eventKeySettings, rpcTlsSettings, setting, SERVICE_PORTS, type ConfigOf, type Setting } from '@coinvoice/runtime';
import { BlockList, isIP } from 'node:net';
import { gatewayRateLimitSettings } from './rate-limits';

/**
 * GATEWAY_TRUST_PROXY: whose X-Forwarded-For to believe for the client IP (rate limits per IP).
 * "false" (direct clients), "true" (any proxy), or comma-separated addresses/CIDRs
 * of the ingress. Behind an ingress without it, every client shares the ingress's IP.
 */
const trustProxySetting: Setting<boolean | string[]> = {
  expected: 'false, true, or comma-separated proxy addresses/CIDRs',
  default: 'false',
  parse(raw) {
    const value = raw.trim();
    if (value === 'false') return false;
    if (value === 'true') return true;
    const entries = value.split(',').map((e) => e.trim()).filter((e) => e !== '');
    return entries.length > 0 && entries.every((e) => proxyRange(e) !== undefined) ? entries : undefined;
  },
};

interface ProxyRange {
  address: string;
  family: 'ipv4' | 'ipv6';
  prefix: number;
}

/** An address or CIDR of GATEWAY_TRUST_PROXY, or undefined when it is neither. */
function proxyRange(entry: string): ProxyRange | undefined {
  const [address = '', prefixText, ...rest] = entry.split('/');
  const version = isIP(address);
  if (version === 0 || rest.length > 0) return undefined;
  const bits = version === 4 ? 32 : 128;
  if (prefixText !== undefined && !/^\d{1,3}$/.test(prefixText)) return undefined;
  const prefix = prefixText === undefined ? bits : Number(prefixText);
  return prefix <= bits ? { address, family: version === 4 ? 'ipv4' : 'ipv6', prefix } : undefined;
}

/** `::ffff:a.b.c.d/n` (n ≥ 96) as `a.b.c.d/(n − 96)`; undefined for any other range. */
function ipv4MappedRange(range: ProxyRange): ProxyRange | undefined {
  if (range.family !== 'ipv6' || range.prefix < 96) return undefined;
  const mapped = new BlockList();
  mapped.addSubnet('::ffff:0:0', 96, 'ipv6');
  if (!mapped.check(range.address, 'ipv6')) return undefined;
  // The URL parser writes the address canonically: "::ffff:" and two hex groups.
  const groups = new URL(`http://[${range.address}]/`).hostname.slice(1, -1).split(':');
  const low = groups.slice(-2).map((g) => parseInt(g, 16));
  const bytes = [low[0]! >> 8, low[0]! & 0xff, low[1]! >> 8, low[1]! & 0xff];
  return { address: bytes.join('.'), family: 'ipv4', prefix: range.prefix - 96 };
}

/** Networks no client on the internet sends from: an ingress inside them may be trusted whole. */
const PRIVATE_NETWORKS: ReadonlyArray<Omit<ProxyRange, 'address'> & { network: string }> = [
  { network: '10.0.0.0', prefix: 8, family: 'ipv4' },
  { network: '172.16.0.0', prefix: 12, family: 'ipv4' },
  { network: '192.168.0.0', prefix: 16, family: 'ipv4' },
  { network: '100.64.0.0', prefix: 10, family: 'ipv4' },
  { network: '127.0.0.0', prefix: 8, family: 'ipv4' },
  { network: '169.254.0.0', prefix: 16, family: 'ipv4' },
  { network: 'fc00::', prefix: 7, family: 'ipv6' },
  { network: 'fe80::', prefix: 10, family: 'ipv6' },
  { network: '::1', prefix: 128, family: 'ipv6' },
];

/** The widest public range production trusts: a load balancer's block, not the internet. */
const MAX_PUBLIC_PREFIX_BITS = { ipv4: 16, ipv6: 48 } as const;

/**
 * Whether trusting `range` would let clients on the internet name their own IP: a public range
 * wider than a /16 (IPv6 /48), unless it lies inside one private network.
 */
function trustsTheInternet(given: ProxyRange): boolean {
  // An IPv4-mapped IPv6 range (::ffff:0:0/96 is all of IPv4) is judged as the IPv4 range it is.
  const range = ipv4MappedRange(given) ?? given;
  if (range.prefix >= MAX_PUBLIC_PREFIX_BITS[range.family]) return false;
  return !PRIVATE_NETWORKS.some((net) => {
    if (net.family !== range.family || range.prefix < net.prefix) return false;
    const block = new BlockList();
    block.addSubnet(net.network, net.prefix, net.family);
    return block.check(range.address, range.family);
  });
}

const backend = (port: number) => setting.url(['http:', 'https:'], { devDefault: `http://127.0.0.1:${port}` });

export const gatewaySettings = {
  APP_ENV: commonSettings.APP_ENV,
  GATEWAY_PORT: setting.port(8080),
  /** Loopback unless told otherwise: the image and the manifests set 0.0.0.0. */
  BIND_HOST: bindHostSetting,
  AUTH_URL: backend(SERVICE_PORTS.auth.grpc),
  INVOICE_URL: backend(SERVICE_PORTS.invoice.grpc),
  PAYOUT_URL: backend(SERVICE_PORTS.payout.grpc),
  NOTIFIER_URL: backend(SERVICE_PORTS.notifier.grpc),
  NATS_URL: commonSettings.NATS_URL,
  EVENT_NAMESPACE: commonSettings.EVENT_NAMESPACE,
  /** The auth service's public event key(s): revocations are applied only when auth signed them. */
  EVENT_VERIFY_KEYS: eventKeySettings.EVENT_VERIFY_KEYS,
  /** The HTTP edge (docs/http-edge.md): a larger body is 413 before it is read. */
  HTTP_BODY_LIMIT: setting.int({ default: 64 * 1024, min: 1024, max: 10 * 1024 * 1024 }),
  /** A request whose headers and body have not all arrived within this is answered 408 and closed. */
  HTTP_REQUEST_TIMEOUT: setting.duration({ default: '30s', minMs: 100, maxMs: 10 * 60_000 }),
  /** An idle keep-alive connection is closed after this. */
  HTTP_KEEP_ALIVE_TIMEOUT: setting.duration({ default: '72s', minMs: 1_000, maxMs: 10 * 60_000 }),
  API_KEY_CACHE_TTL_MS: setting.int({ default: 30_000, min: 0, max: 3_600_000 }),
  /** Open GET /api/events/stream per API key (per merchant's sessions) in one replica; one more is 429. */
  EVENT_STREAMS_PER_KEY: setting.int({ default: 5, min: 1, max: 1_000 }),
  /** Open GET /api/events/stream per merchant in one replica, over all its keys and sessions (a merchant holds up to 100 projects of 20 keys). */
  EVENT_STREAMS_PER_MERCHANT: setting.int({ default: 20, min: 1, max: 10_000 }),
  LOG_LEVEL: commonSettings.LOG_LEVEL,
  GATEWAY_TRUST_PROXY: trustProxySetting,
  /** Mutual TLS to the services (required in production): the CA, the gateway's certificate and key. */
  ...rpcTlsSettings,
  ...gatewayRateLimitSettings,
};

/**
 * What production refuses beyond each setting's own form (docs/architecture.md#production-refuses-what-is-unsafe). GATEWAY_TRUST_PROXY=true
 * believes any client's X-Forwarded-For: a client could then pick a new IP per request and walk
 * past every per-IP limit (login per account and IP, registration, checkout). Production names its
 * ingress instead.
 */
export function refuseUnsafeGatewayConfig(config: ConfigOf<typeof gatewaySettings>): void {
  if (config.APP_ENV === 'production' && config.GATEWAY_TRUST_PROXY === true) {
    throw new ConfigError(
      'GATEWAY_TRUST_PROXY',
      'false or the ingress addresses/CIDRs in production (true lets any client choose its IP with X-Forwarded-For)',
      'true',
    );
  }
  const wide = Array.isArray(config.GATEWAY_TRUST_PROXY) ? config.GATEWAY_TRUST_PROXY.find((entry) => trustsTheInternet(proxyRange(entry)!)) : undefined;
  if (config.APP_ENV === 'production' && wide !== undefined) {
    throw new ConfigError(
      'GATEWAY_TRUST_PROXY',
      `the ingress addresses/CIDRs in production: ${wide} is public and wider than a /${MAX_PUBLIC_PREFIX_BITS.ipv4} (IPv6 /${MAX_PUBLIC_PREFIX_BITS.ipv6}), so clients inside it could choose their IP with X-Forwarded-For`,
      wide,
    );
  }
}
