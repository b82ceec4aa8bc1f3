/**
 * The SSRF guard, on literal addresses and a fake resolver only: these tests send no traffic and
 * make no real DNS queries.
 */
import { ConfigError, loadConfig } from '@coinvoice/runtime';
import { classifyIpAddress, createSsrfGuard, pinnedLookup, ssrfModeOf, webhookDestinationSettings, webhookUrlPolicyOf, type DestinationVerdict, type HostResolver, type ResolvedAddress } from '../src/ssrf';

/** A resolver from a fixed table; unknown names fail like NXDOMAIN. */
function fakeResolver(table: Record<string, readonly string[]>): HostResolver & { calls: string[] } {
  const calls: string[] = [];
  const resolve = async (hostname: string): Promise<readonly ResolvedAddress[]> => {
    calls.push(hostname);
    const answers = table[hostname];
    if (answers === undefined) throw Object.assign(new Error(`getaddrinfo ENOTFOUND ${hostname}`), { code: 'ENOTFOUND' });
    return answers.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
  };
  return Object.assign(resolve, { calls });
}

const names = fakeResolver({
  'hooks.example.com': ['93.184.216.34'],
  'dual.example.com': ['2606:2800:220:1:248:1893:25c8:1946', '93.184.216.34'],
  'metadata.attacker.example': ['169.254.169.254'],
  'loopback.attacker.example': ['127.0.0.1'],
  'mapped.attacker.example': ['::ffff:127.0.0.1'],
  'mixed.attacker.example': ['93.184.216.34', '10.0.0.5'],
  'ula.attacker.example': ['fd00:ec2::254'],
  'empty.example.com': [],
  localhost: ['127.0.0.1', '::1'],
});
const production = createSsrfGuard({ mode: 'production', resolve: names });
const development = createSsrfGuard({ mode: 'development', resolve: names });

async function refusal(url: string, guard = production): Promise<{ reason: string; message: string }> {
  const verdict = await guard.vetDestination(url);
  if (verdict.ok) throw new Error(`${url} was allowed`);
  return { reason: verdict.reason, message: verdict.message };
}

describe('production mode refuses', () => {
  // [url, what the message must say]. WHATWG URL normalises the decimal, octal, hex and short
  // IPv4 forms to 127.0.0.1 and the mapped IPv6 form to ::ffff:7f00:1 before the guard sees them.
  test.each([
    ['http://127.0.0.1/hook', '127.0.0.1 is in the loopback range 127.0.0.0/8'],
    ['http://127.255.255.254:8080/', 'loopback'],
    ['http://2130706433/', '127.0.0.1 is in the loopback'],
    ['http://0177.0.0.1/', '127.0.0.1 is in the loopback'],
    ['http://0x7f.1/', '127.0.0.1 is in the loopback'],
    ['http://0x7f000001/', '127.0.0.1 is in the loopback'],
    ['http://127.1/', '127.0.0.1 is in the loopback'],
    ['http://%31%32%37.0.0.1/', '127.0.0.1 is in the loopback'],
    ['http://１２７.0.0.1/', '127.0.0.1 is in the loopback'],
    ['http://0/', '0.0.0.0 is in the "this network" range 0.0.0.0/8'],
    ['http://10.1.2.3/', 'private range 10.0.0.0/8'],
    ['http://172.16.0.1/', 'private range 172.16.0.0/12'],
    ['http://172.31.255.255/', 'private range 172.16.0.0/12'],
    ['http://192.168.1.1/', 'private range 192.168.0.0/16'],
    ['http://169.254.169.254/latest/meta-data/', 'link-local / cloud metadata range 169.254.0.0/16'],
    ['http://100.64.0.1/', 'carrier-grade NAT range 100.64.0.0/10'],
    ['http://100.127.255.255/', 'carrier-grade NAT'],
    ['http://224.0.0.1/', 'multicast range 224.0.0.0/4'],
    ['http://255.255.255.255/', 'reserved / broadcast range 240.0.0.0/4'],
    ['http://192.0.0.192/', 'IETF protocol assignments'],
    ['http://198.18.0.1/', 'benchmarking'],
    ['http://[::1]/', 'loopback address ::1/128'],
    ['http://[0:0:0:0:0:0:0:1]/', 'loopback address ::1/128'],
    ['http://[::]/', 'unspecified address ::/128'],
    ['http://[fc00::1]/', 'unique local range fc00::/7'],
    ['http://[fd00:ec2::254]/', 'unique local range fc00::/7'],
    ['http://[fe80::1]/', 'link-local range fe80::/10'],
    ['http://[fec0::1]/', 'site-local'],
    ['http://[ff02::1]/', 'multicast range ff00::/8'],
    ['http://[::ffff:127.0.0.1]/', 'loopback range 127.0.0.0/8, as IPv4-mapped (::ffff:0:0/96) 127.0.0.1'],
    ['http://[::ffff:7f00:1]/', 'as IPv4-mapped (::ffff:0:0/96) 127.0.0.1'],
    ['http://[::ffff:169.254.169.254]/', 'cloud metadata range 169.254.0.0/16, as IPv4-mapped (::ffff:0:0/96) 169.254.169.254'],
    ['http://[::ffff:10.0.0.1]/', 'private range 10.0.0.0/8, as IPv4-mapped'],
    ['http://[::ffff:0:127.0.0.1]/', 'as IPv4-translated'],
    ['http://[64:ff9b::127.0.0.1]/', 'loopback range 127.0.0.0/8, as NAT64 (64:ff9b::/96) 127.0.0.1'],
    ['http://[64:ff9b:1::1]/', 'local-use NAT64'],
    ['http://[2002:a9fe:a9fe::1]/', 'cloud metadata range 169.254.0.0/16, as 6to4 (2002::/16) 169.254.169.254'],
    ['http://[::127.0.0.1]/', 'reserved space outside global unicast'],
    ['http://[100::1]/', 'reserved space outside global unicast'],
    ['http://[2001::1]/', 'incl. Teredo'],
    ['http://[2001:db8::1]/', 'documentation range 2001:db8::/32'],
  ])('%s', async (url, message) => {
    const { reason, message: said } = await refusal(url);
    expect(reason).toBe('blocked_address');
    expect(said).toContain(message);
    expect(said).toContain('webhook URLs must point to a public address');
  });

  test.each([
    ['http://localhost/', 'localhost is an internal host name'],
    ['http://LOCALHOST./', 'localhost. is an internal host name'],
    ['http://api.localhost/', 'is in localhost'],
    ['http://metadata.google.internal/computeMetadata/v1/', 'metadata.google.internal is an internal host name'],
    ['http://metadata.google.internal./', 'internal host name'],
    ['http://db.internal/', 'is in internal, which is not a public domain'],
    ['http://printer.local/', 'is in local'],
    ['http://router.home.arpa/', 'is in home.arpa'],
    ['http://metadata/', 'metadata is not a fully qualified public host name'],
    ['http://postgres:5432/', 'is not a fully qualified public host name'],
  ])('the internal name %s', async (url, message) => {
    expect(await refusal(url)).toEqual({ reason: 'blocked_host_name', message: expect.stringContaining(message) });
  });

  test.each([
    ['http://metadata.attacker.example/', 'metadata.attacker.example resolves to an address that is in the link-local / cloud metadata range'],
    ['http://loopback.attacker.example/', 'loopback.attacker.example resolves to an address that is in the loopback range'],
    ['https://mapped.attacker.example/', 'mapped.attacker.example resolves to an address that is in the loopback range 127.0.0.0/8, as IPv4-mapped'],
    ['http://ula.attacker.example/', 'ula.attacker.example resolves to an address that is in the unique local range'],
    ['http://mixed.attacker.example/', 'mixed.attacker.example resolves to an address that is in the private range'],
  ])('a public-looking name that resolves inside: %s', async (url, message) => {
    const refused = await refusal(url);
    expect(refused).toEqual({ reason: 'blocked_address', message: expect.stringContaining(message) });
    // The resolved internal address is never echoed (the message reaches the merchant).
    for (const ip of ['169.254.169.254', '127.0.0.1', 'fd00:ec2::254', '10.0.0.5']) expect(JSON.stringify(refused)).not.toContain(ip);
  });

  test.each([
    ['http://nxdomain.example.com/', 'nxdomain.example.com does not resolve (ENOTFOUND)'],
    ['http://empty.example.com/', 'empty.example.com does not resolve'],
  ])('a name that does not resolve: %s', async (url, message) => {
    expect(await refusal(url)).toEqual({ reason: 'unresolvable', message });
  });
});

describe('in every mode', () => {
  test.each([
    ['ftp://hooks.example.com/', 'unsupported_scheme', 'webhook URLs must use http or https, not ftp'],
    ['file:///etc/passwd', 'unsupported_scheme', 'not file'],
    ['javascript:alert(1)', 'unsupported_scheme', 'not javascript'],
    ['gopher://127.0.0.1:6379/_INFO', 'unsupported_scheme', 'not gopher'],
    ['hooks.example.com/webhook', 'invalid_url', '"hooks.example.com/webhook" is not a valid URL'],
    ['http://[fe80::1%25eth0]/', 'invalid_url', 'is not a valid URL'],
    ['http://example.com:99999/', 'invalid_url', 'is not a valid URL'],
    ['', 'invalid_url', '"" is not a valid URL'],
  ])('%j is refused', async (url, reason, message) => {
    for (const guard of [production, development]) {
      expect(await refusal(url, guard)).toEqual({ reason, message: expect.stringContaining(message) });
    }
  });
});

describe('allowed destinations', () => {
  test.each([
    ['https://8.8.8.8/hook', '8.8.8.8', 443],
    ['http://1.1.1.1:8080/hook', '1.1.1.1', 8080],
    ['https://172.32.0.1/', '172.32.0.1', 443],
    ['https://100.128.0.1/', '100.128.0.1', 443],
    ['https://169.255.0.1/', '169.255.0.1', 443],
    ['https://[2606:4700:4700::1111]/', '2606:4700:4700::1111', 443],
    ['https://[::ffff:8.8.8.8]/', '::ffff:808:808', 443],
    ['https://[2002:808:808::1]/', '2002:808:808::1', 443],
  ])('the public literal %s, without DNS', async (url, address, port) => {
    const noDns: HostResolver = () => Promise.reject(new Error('DNS must not be used for a literal'));
    const verdict = await createSsrfGuard({ mode: 'production', resolve: noDns }).vetDestination(url);
    expect(verdict).toMatchObject({ ok: true, hostname: address, port, addresses: [{ address }] });
  });

  test('a public name, with every resolved address to connect to', async () => {
    const verdict = await production.vetDestination('https://dual.example.com/webhooks?project=1');
    expect(verdict).toMatchObject({
      ok: true,
      hostname: 'dual.example.com',
      port: 443,
      addresses: [
        { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
        { address: '93.184.216.34', family: 4 },
      ],
    });
    if (verdict.ok) expect(verdict.url.href).toBe('https://dual.example.com/webhooks?project=1');
  });

  test('development mode allows loopback, private and metadata addresses and internal names', async () => {
    for (const url of ['http://127.0.0.1:3000/hook', 'http://[::1]/', 'http://10.0.0.1/', 'http://169.254.169.254/', 'http://metadata.attacker.example/']) {
      expect((await development.vetDestination(url)).ok).toBe(true);
    }
    expect(await development.vetDestination('http://localhost:4000/hook')).toMatchObject({
      ok: true,
      hostname: 'localhost',
      port: 4000,
      addresses: [{ address: '127.0.0.1' }, { address: '::1' }],
    });
  });
});

describe('DNS rebinding', () => {
  test('each delivery resolves again: a name that turned private after configuration is refused', async () => {
    let answer = '93.184.216.34';
    const rebinding: HostResolver = async () => [{ address: answer, family: 4 }];
    const guard = createSsrfGuard({ mode: 'production', resolve: rebinding });
    expect(await guard.checkAtConfigTime('https://rebind.example.com/h')).toEqual({ ok: true, url: 'https://rebind.example.com/h' });
    answer = '169.254.169.254';
    expect(await guard.vetDestination('https://rebind.example.com/h')).toMatchObject({ ok: false, reason: 'blocked_address' });
  });

  const vetted: Extract<DestinationVerdict, { ok: true }> = {
    ok: true,
    url: new URL('https://dual.example.com/'),
    hostname: 'dual.example.com',
    port: 443,
    addresses: [
      { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
      { address: '93.184.216.34', family: 4 },
    ],
  };

  function lookupOnce(hostname: string, options: { family?: number | 'IPv4' | 'IPv6'; all?: boolean }) {
    return new Promise<{ error: NodeJS.ErrnoException | null; address: unknown; family?: number }>((resolve) => {
      pinnedLookup(vetted)(hostname, options, (error, address, family) => resolve({ error, address, family }));
    });
  }

  test('pinnedLookup answers only with the vetted addresses', async () => {
    expect(await lookupOnce('dual.example.com', { all: true })).toEqual({
      error: null,
      address: [
        { address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 },
        { address: '93.184.216.34', family: 4 },
      ],
      family: undefined,
    });
    expect(await lookupOnce('dual.example.com', { family: 4 })).toEqual({ error: null, address: '93.184.216.34', family: 4 });
    expect(await lookupOnce('dual.example.com', { family: 'IPv6', all: true })).toMatchObject({
      address: [{ address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 }],
    });
    expect(await lookupOnce('dual.example.com', {})).toEqual({ error: null, address: '2606:2800:220:1:248:1893:25c8:1946', family: 6 });
  });

  test('pinnedLookup refuses any other host name', async () => {
    const { error } = await lookupOnce('internal.example.com', { all: true });
    expect(error).toMatchObject({ code: 'ENOTFOUND', message: expect.stringContaining('only the vetted dual.example.com') });
  });
});

describe('checkAtConfigTime', () => {
  test('answers with the normalised URL or a clear error', async () => {
    expect(await production.checkAtConfigTime('HTTPS://Hooks.Example.com:443/a/../hook')).toEqual({
      ok: true,
      url: 'https://hooks.example.com/hook',
    });
    expect(await production.checkAtConfigTime('http://127.0.0.1:8080/hook')).toEqual({
      ok: false,
      reason: 'blocked_address',
      message: '127.0.0.1 is in the loopback range 127.0.0.0/8: webhook URLs must point to a public address',
    });
    expect(await production.checkAtConfigTime('http://169.254.169.254/')).toEqual({
      ok: false,
      reason: 'blocked_address',
      message: '169.254.169.254 is in the link-local / cloud metadata range 169.254.0.0/16: webhook URLs must point to a public address',
    });
  });

  test('development mode accepts a local receiver', async () => {
    expect(await development.checkAtConfigTime('http://127.0.0.1:8080/hook')).toEqual({ ok: true, url: 'http://127.0.0.1:8080/hook' });
  });
});

describe('classifyIpAddress', () => {
  test.each([
    ['8.8.8.8', 'public'],
    ['0.0.0.0', 'unspecified'],
    ['0.255.255.255', 'unspecified'],
    ['9.255.255.255', 'public'],
    ['10.0.0.0', 'private'],
    ['11.0.0.0', 'public'],
    ['100.63.255.255', 'public'],
    ['100.64.0.0', 'shared_cgnat'],
    ['127.0.0.1', 'loopback'],
    ['169.254.169.254', 'link_local'],
    ['172.15.255.255', 'public'],
    ['172.16.0.0', 'private'],
    ['172.32.0.0', 'public'],
    ['192.168.255.255', 'private'],
    ['223.255.255.255', 'public'],
    ['224.0.0.0', 'multicast'],
    ['239.255.255.255', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['::1', 'loopback'],
    ['::', 'unspecified'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:192.168.0.1', 'private'],
    ['::ffff:8.8.8.8', 'public'],
    ['fe80::1%eth0', 'link_local'],
    ['febf:ffff::1', 'link_local'],
    ['fc00::', 'private'],
    ['fdff:ffff::1', 'private'],
    ['ff00::', 'multicast'],
    ['2001:4860:4860::8888', 'public'],
    ['2a00:1450:4001::1', 'public'],
    ['3fff::1', 'reserved'],
    ['4000::1', 'reserved'],
  ])('%s is %s', (address, category) => {
    expect(classifyIpAddress(address).category).toBe(category);
  });

  test('refuses a host name', () => {
    expect(() => classifyIpAddress('example.com')).toThrow(/not an IP address/);
  });
});

describe('configuration (WEBHOOK_ALLOW_PRIVATE_DESTINATIONS) and the config-time policy auth uses', () => {
  const settings = { APP_ENV: { expected: 'x', default: 'development', parse: (raw: string) => raw }, ...webhookDestinationSettings };
  const modeFor = (env: Record<string, string>) => ssrfModeOf(loadConfig(settings, env));

  test.each([
    [{}, 'development'],
    [{ APP_ENV: 'production' }, 'production'],
    [{ APP_ENV: 'production', WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'true' }, 'development'],
    [{ WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'false' }, 'production'],
    [{ WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: '' }, 'development'],
  ])('%j → %s mode', (env, mode) => {
    expect(modeFor(env)).toBe(mode);
  });

  test('a bad value stops the process naming the variable', () => {
    expect(() => modeFor({ WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'yes' })).toThrow(ConfigError);
    expect(() => modeFor({ WEBHOOK_ALLOW_PRIVATE_DESTINATIONS: 'yes' })).toThrow(/WEBHOOK_ALLOW_PRIVATE_DESTINATIONS/);
  });

  test('production: private, loopback and metadata refused with the reason; a name that does not resolve yet is accepted', async () => {
    const policy = webhookUrlPolicyOf(production);
    expect(await policy.refusal('http://169.254.169.254/')).toMatch(/169\.254\.169\.254 is in the link-local \/ cloud metadata range 169\.254\.0\.0\/16/);
    expect(await policy.refusal('http://127.0.0.1:8080/hooks')).toMatch(/loopback/);
    expect(await policy.refusal('https://loopback.attacker.example/h')).toMatch(/resolves to an address that is in the loopback range/);
    // The resolved internal address is never echoed to the merchant.
    expect(await policy.refusal('https://loopback.attacker.example/h')).not.toContain('127.0.0.1');
    expect(await policy.refusal('https://not-yet.example.com/hooks')).toBeUndefined();
    expect(await policy.refusal('https://hooks.example.com/hooks')).toBeUndefined();
    expect(await policy.refusal('ftp://hooks.example.com/')).toMatch(/http or https/);
  });

  test('development: every http(s) destination, nothing resolved', async () => {
    const calls = names.calls.length;
    const policy = webhookUrlPolicyOf(development);
    expect(await policy.refusal('http://127.0.0.1:8080/hooks')).toBeUndefined();
    expect(await policy.refusal('https://never-resolved.example.com/')).toBeUndefined();
    expect(await policy.refusal('ftp://x.example/')).toMatch(/http or https/);
    expect(names.calls.length).toBe(calls);
  });
});
