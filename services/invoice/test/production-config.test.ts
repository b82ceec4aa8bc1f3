/**
 * APP_ENV=production refuses unsafe settings (docs/architecture.md#production-refuses-what-is-unsafe): an enabled coin (INVOICE_COINS)
 * without its INVOICE_XPUB_<COIN> stops the real invoice process with one line naming the variable,
 * before anything is written: no row in address_keys or development_keys. Development keys are
 * never generated or read in production.
 */
import { testEventKeys } from '../../../test/support/event-keys';
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import pino from 'pino';
import { ConfigError, createDb, loadServiceConfig, migrateService } from '@coinvoice/runtime';
import { loadKeyRing } from '../src/key-ring';
import { invoiceService } from '../src/server';
import { CRYPTO_CODES } from '@coinvoice/chains/coin';
import type { XpubVariable } from '../src/settings';
import { createTestDatabase, testNatsUrl, type TestDatabase } from '../../../test/support/infra';
import { throwawayXpubs } from '../../../test/support/xpubs';
import { TestCertificateAuthority } from '../../../test/support/certificates';

const MAIN = path.join(__dirname, '..', 'dist', 'main.js');

/** A configured key for every coin and network (public keys of throwaway pairs). */
const ALL_KEYS = throwawayXpubs();

let db: TestDatabase;
let ca: TestCertificateAuthority;
/** Everything else production requires of the invoice process (mutual TLS, its event signing key), so the xpub rule is what is tested. */
let productionTls: Record<string, string>;

beforeAll(async () => {
  ca = new TestCertificateAuthority();
  const invoiceCert = ca.issue('invoice');
  productionTls = {
    TLS_CA_FILE: ca.caFile,
    TLS_CERT_FILE: invoiceCert.certFile,
    TLS_KEY_FILE: invoiceCert.keyFile,
    EVENT_SIGNING_KEY_FILE: testEventKeys().file('invoice'),
  };
  db = await createTestDatabase('cvprod');
  await migrateService(invoiceService, { DATABASE_URL: db.url, LOG_LEVEL: 'silent' });
});

afterAll(async () => {
  await db?.drop();
  ca?.remove();
});

async function keyRows(): Promise<{ address: number; development: number }> {
  const sql = createDb({ url: db.url, schema: 'invoice', max: 1 });
  try {
    const [row] = await sql<{ address: number; development: number }[]>`
      select (select count(*)::int from address_keys) as address, (select count(*)::int from development_keys) as development`;
    return row!;
  } finally {
    await sql.end({ timeout: 5 });
  }
}

function runInvoice(env: Record<string, string>) {
  const result = spawnSync(process.execPath, [MAIN], {
    env: {
      PATH: process.env.PATH,
      APP_ENV: 'production',
      DATABASE_URL: db.url,
      NATS_URL: testNatsUrl(),
      GRPC_PORT: '0',
      ADMIN_PORT: '0',
      RATES_COINBASE_URL: 'http://127.0.0.1:9',
      RATES_KRAKEN_URL: 'http://127.0.0.1:9',
      ...productionTls,
      ...env,
    },
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, stderrLines: result.stderr.trim().split('\n').filter(Boolean) };
}

test('the invoice process in production with an enabled coin lacking its xpub exits 1 with one line naming it; no key row is written', async () => {
  const { INVOICE_XPUB_LTC: _omitted, ...keys } = ALL_KEYS;
  const { status, stderrLines } = runInvoice(keys);
  expect(status).toBe(1);
  expect(stderrLines).toHaveLength(1);
  expect(stderrLines[0]).toMatch(/^config: INVOICE_XPUB_LTC is required: expected the LTC account's extended public key/);
  expect(await keyRows()).toEqual({ address: 0, development: 0 });
});

test('with no key at all, the first enabled coin is named; the sandbox testnet keys are required too', async () => {
  expect(runInvoice({}).stderrLines).toEqual([expect.stringMatching(/^config: INVOICE_XPUB_BTC is required: /)]);
  const { INVOICE_XPUB_TRX_TESTNET: _omitted, ...keys } = ALL_KEYS;
  expect(runInvoice(keys).stderrLines).toEqual([expect.stringMatching(/^config: INVOICE_XPUB_TRX_TESTNET is required: /)]);
  expect(await keyRows()).toEqual({ address: 0, development: 0 });
});

test('a coin removed from INVOICE_COINS needs no key in production; development needs no key at all', () => {
  const { INVOICE_XPUB_LTC: _a, INVOICE_XPUB_LTC_TESTNET: _b, ...keys } = ALL_KEYS;
  const production = { APP_ENV: 'production', DATABASE_URL: db.url, NATS_URL: testNatsUrl(), ...productionTls };
  expect(() => loadServiceConfig(invoiceService, { ...production, ...keys })).toThrow(ConfigError);
  const config = loadServiceConfig(invoiceService, { ...production, ...keys, INVOICE_COINS: 'BTC,ETH,USDT,USDC,TRX' });
  expect(config.INVOICE_COINS).toEqual(['BTC', 'ETH', 'USDT', 'USDC', 'TRX']);
  expect(config.RATES_SOURCE).toBe('');
  expect(() => loadServiceConfig(invoiceService, { APP_ENV: 'development' })).not.toThrow();
  expect(() => loadServiceConfig(invoiceService, { INVOICE_COINS: 'BTC,DOGE' })).toThrow(/INVOICE_COINS/);
  // Quotes must be renewed before they age out.
  expect(() => loadServiceConfig(invoiceService, { RATES_REFRESH_MS: '60000' })).toThrow(/^config: RATES_REFRESH_MS="60000" is invalid: expected less than RATES_MAX_AGE_MS/);
});

test('a coin whose key another enabled pair borrows is required too: USDT on tron needs the TRX key (docs/networks.md)', async () => {
  const { INVOICE_XPUB_TRX: _a, INVOICE_XPUB_TRX_TESTNET: _b, ...keys } = ALL_KEYS;
  const { status, stderrLines } = runInvoice({ ...keys, INVOICE_COINS: 'BTC,USDT' });
  expect(status).toBe(1);
  expect(stderrLines).toEqual([expect.stringMatching(/^config: INVOICE_XPUB_TRX is required: .*\(USDT on tron take their addresses from it: docs\/networks\.md\)/)]);
  expect(await keyRows()).toEqual({ address: 0, development: 0 });
  // Without tron among the networks, USDT borrows no key.
  const production = { APP_ENV: 'production', DATABASE_URL: db.url, NATS_URL: testNatsUrl(), ...productionTls };
  expect(() => loadServiceConfig(invoiceService, { ...production, ...keys, INVOICE_COINS: 'BTC,USDT', INVOICE_NETWORKS: 'bitcoin,ethereum,bsc' })).not.toThrow();
  expect(invoiceService.requiredInProduction?.({ INVOICE_COINS: 'BTC,USDT' })).toEqual([
    'INVOICE_XPUB_BTC', 'INVOICE_XPUB_USDT', 'INVOICE_XPUB_TRX', 'INVOICE_XPUB_BTC_TESTNET', 'INVOICE_XPUB_USDT_TESTNET', 'INVOICE_XPUB_TRX_TESTNET',
  ]);
});

test('the key ring itself never generates nor reads development keys in production', async () => {
  const sql = createDb({ url: db.url, schema: 'invoice', max: 1 });
  try {
    const { INVOICE_XPUB_BTC: _omitted, ...rest } = ALL_KEYS;
    const configured = { ...rest, INVOICE_XPUB_BTC: '' } as Record<XpubVariable, string>;
    await expect(
      loadKeyRing({ sql, configured, logger: pino({ level: 'silent' }), production: true, enabledCoins: CRYPTO_CODES }),
    ).rejects.toThrow(/APP_ENV=production without INVOICE_XPUB_BTC$/);
  } finally {
    await sql.end({ timeout: 5 });
  }
  expect(await keyRows()).toEqual({ address: 0, development: 0 });
});
