/**
 * Issue 23, the signer as the built process runs it (`node services/payout/dist/main.js sign`):
 * it refuses to start, with one line and exit code 1, when its seed is not the invoice service's
 * key or its transport is unsafe; and while it serves (logging at trace), neither its output nor
 * its schema ever holds the mnemonic, a word of it, the seed or a private key.
 */
import { spawn, spawnSync } from 'node:child_process';
import path from 'node:path';
import { HDKey } from '@scure/bip32';
import { entropyToMnemonic, mnemonicToSeedSync } from '@scure/bip39';
import { wordlist } from '@scure/bip39/wordlists/english';
import { createRpcClient } from '@coinvoice/runtime';
import { SignerService } from '@coinvoice/runtime/gen/coinvoice/signer/v1/signer_pb';
import { parseEther } from 'viem';
import { rejection, waitFor } from '../../../test/support/async';
import { freePortForTest } from '../../../test/support/ports';
import {
  insertPayout,
  payoutRequest,
  prepareSignerDatabase,
  secretsOfTestSeed,
  sweepRequest,
  TEST_ACCOUNT_XPUB,
  TEST_MNEMONIC,
  TEST_TREASURY,
  writeSeedFile,
  type SignerDatabase,
} from './support/signer';

const MAIN = path.resolve(__dirname, '../dist/main.js');
/** Another seed's account key: what an operator would configure by mistake. */
const OTHER_XPUB = HDKey.fromMasterSeed(mnemonicToSeedSync(entropyToMnemonic(Buffer.alloc(16, 7), wordlist))).derive("m/44'/60'/0'").publicExtendedKey;

let db: SignerDatabase;
let seed: ReturnType<typeof writeSeedFile>;

beforeAll(async () => {
  db = await prepareSignerDatabase();
  seed = writeSeedFile();
}, 60_000);

afterAll(async () => {
  await db?.dispose();
  seed?.remove();
});

function baseEnv(): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    APP_ENV: 'development',
    DATABASE_URL: db.signerUrl,
    SIGNER_SEED_FILE: seed.file,
    SIGNER_ALLOW_PLAINTEXT: 'true',
    INVOICE_XPUB_ETH: TEST_ACCOUNT_XPUB,
    CHAIN_ETHEREUM_CHAIN_ID: '31337',
    GRPC_PORT: '0',
    ADMIN_PORT: '0',
  };
}

function startRefused(env: NodeJS.ProcessEnv) {
  const result = spawnSync(process.execPath, [MAIN, 'sign'], { env, encoding: 'utf8', timeout: 20_000 });
  return { status: result.status, stderrLines: result.stderr.trim().split('\n').filter(Boolean), stdout: result.stdout };
}

test('start is refused, with one line and exit code 1, when a configured xpub is not the seed account key', () => {
  const { status, stderrLines, stdout } = startRefused({ ...baseEnv(), INVOICE_XPUB_USDT: OTHER_XPUB });
  expect(status).toBe(1);
  expect(stderrLines).toEqual([
    "payout sign: failed to start: INVOICE_XPUB_USDT is not the m/44'/60'/0' key of the mnemonic in SIGNER_SEED_FILE: " +
      'the signer would hold other keys than the invoice service gives out addresses for',
  ]);
  expect(stdout).toBe('');
});

test('start is refused without any INVOICE_XPUB, with a mnemonic whose checksum fails, and without mutual TLS unless plaintext on loopback is allowed', () => {
  const noXpub = startRefused({ ...baseEnv(), INVOICE_XPUB_ETH: '' });
  expect(noXpub.status).toBe(1);
  expect(noXpub.stderrLines).toEqual([expect.stringMatching(/^payout sign: failed to start: set INVOICE_XPUB_ETH, INVOICE_XPUB_USDT, INVOICE_XPUB_USDC, INVOICE_XPUB_POL, INVOICE_XPUB_BNB \(at least one\)/)]);

  const words = TEST_MNEMONIC.split(' ');
  const broken = writeSeedFile([...words.slice(0, -1), words.at(-1) === 'zoo' ? 'zone' : 'zoo'].join(' '));
  try {
    const badSeed = startRefused({ ...baseEnv(), SIGNER_SEED_FILE: broken.file });
    expect(badSeed.status).toBe(1);
    expect(badSeed.stderrLines).toEqual([`payout sign: failed to start: SIGNER_SEED_FILE ${broken.file} does not hold a valid BIP39 mnemonic (English words, 12–24 of them, with a correct checksum)`]);
  } finally {
    broken.remove();
  }

  const plaintext = startRefused({ ...baseEnv(), SIGNER_ALLOW_PLAINTEXT: '' });
  expect(plaintext.status).toBe(1);
  expect(plaintext.stderrLines).toEqual([expect.stringMatching(/^payout sign: failed to start: the signer serves only over mutual TLS .* set SIGNER_ALLOW_PLAINTEXT=true$/)]);
  const exposed = startRefused({ ...baseEnv(), BIND_HOST: '0.0.0.0' });
  expect(exposed.stderrLines).toEqual(['payout sign: failed to start: SIGNER_ALLOW_PLAINTEXT serves on a loopback address only, not BIND_HOST=0.0.0.0']);
  // Production: every limit stated (no defaults), and mutual TLS always.
  const tlsFiles = { TLS_CA_FILE: seed.file, TLS_CERT_FILE: seed.file, TLS_KEY_FILE: seed.file };
  const production = { ...baseEnv(), APP_ENV: 'production', SIGNER_ALLOW_PLAINTEXT: '', SIGNER_MAX_PAYOUT_ETH: '1' };
  const noLimit = startRefused({ ...production, ...tlsFiles });
  expect(noLimit.status).toBe(1);
  expect(noLimit.stderrLines).toEqual(['config: SIGNER_MAX_PAYOUT_USDT is required: expected a positive amount of USDT such as 5000 (at most 6 decimals)']);
  const limits = {
    SIGNER_MAX_PAYOUT_USDT: '100',
    SIGNER_MAX_PAYOUT_USDC: '100',
    SIGNER_DAILY_LIMIT_ETH: '2',
    SIGNER_DAILY_LIMIT_USDT: '1000',
    SIGNER_DAILY_LIMIT_USDC: '1000',
    SIGNER_MAX_PAYOUT_BTC: '0.1',
    SIGNER_MAX_PAYOUT_LTC: '10',
    SIGNER_DAILY_LIMIT_BTC: '1',
    SIGNER_DAILY_LIMIT_LTC: '100',
    SIGNER_DAILY_FEE_LIMIT_BTC: '1000000',
    SIGNER_DAILY_FEE_LIMIT_LTC: '10000000',
    SIGNER_MAX_PAYOUT_TRX: '100',
    SIGNER_DAILY_LIMIT_TRX: '1000',
  };
  const noTls = startRefused({ ...production, ...limits, SIGNER_ALLOW_PLAINTEXT: 'true' });
  expect(noTls.status).toBe(1);
  expect(noTls.stderrLines).toEqual(['config: TLS_CA_FILE is required: expected the path of a readable CA certificate file (PEM)']);
  // Production signs for Ethereum mainnet only: anvil's chain id (baseEnv) is refused, naming the main one.
  const testChain = startRefused({ ...production, ...limits, ...tlsFiles, SIGNER_DAILY_FEE_LIMIT_WEI: '1000000000000000', SIGNER_DAILY_GAS_TOP_UP_LIMIT_WEI: '1000000000000000' });
  expect(testChain.status).toBe(1);
  expect(testChain.stderrLines).toEqual([expect.stringMatching(/CHAIN_ETHEREUM_CHAIN_ID="31337" is invalid: expected ethereum's main chain id 1: APP_ENV=production uses the main chain only/)]);
});

test('serving at LOG_LEVEL=trace, signing and refusing: no mnemonic word, seed or private key in any log line or any signer table', async () => {
  const grpcPort = await freePortForTest();
  const adminPort = await freePortForTest();
  const child = spawn(process.execPath, [MAIN, 'sign'], {
    env: { ...baseEnv(), LOG_LEVEL: 'trace', GRPC_PORT: String(grpcPort), ADMIN_PORT: String(adminPort) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  child.stderr.on('data', (chunk: Buffer) => (output += chunk.toString('utf8')));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    await waitFor('the signer to serve', async () => output.includes('payout signer serving') || child.exitCode !== null, 30_000);
    expect(child.exitCode).toBeNull();
    const client = createRpcClient(SignerService, `http://127.0.0.1:${grpcPort}`, { timeoutMs: 15_000 });
    expect((await client.getTreasury({ network: 'ethereum' })).address).toBe(TEST_TREASURY);

    const payout = await insertPayout(db.owner, { asset: 'ETH', amount: '0.3' });
    const signed = await client.signEvmTransaction(payoutRequest(payout.id, { to: payout.address, value: parseEther('0.3') }));
    expect(signed.from).toBe(TEST_TREASURY);
    await client.signEvmTransaction(sweepRequest(7, 'ETH', { to: TEST_TREASURY, value: 1n, gasLimit: 21_000n }));
    expect(await rejection(client.signEvmTransaction(payoutRequest(payout.id, { nonce: 5n, to: payout.address, value: parseEther('0.3') })))).toMatchObject({ code: 'nonce_mismatch' });
    expect(await rejection(client.signEvmTransaction(payoutRequest(payout.id, { to: payout.address, value: 1n, maxFeePerGas: 10n ** 15n })))).toMatchObject({ code: 'fee_above_cap' });
    expect(await rejection(client.signEvmTransaction(payoutRequest('not-a-uuid', { to: payout.address, value: 1n })))).toMatchObject({ code: 'invalid_request' });
  } finally {
    child.kill('SIGTERM');
  }
  expect(await exited).toBe(0);

  const logLines = output.split('\n').filter(Boolean);
  expect(logLines.some((line) => line.includes('signer refused a request'))).toBe(true);
  const tables = await db.owner<{ table_name: string }[]>`select table_name from information_schema.tables where table_schema = 'signer' order by table_name`;
  expect(tables.map((t) => t.table_name)).toEqual(['audit_log', 'daily_fees', 'daily_totals', 'payout_signatures', 'schema_migrations', 'tron_payout_signatures', 'utxo_daily_fees', 'utxo_payout_signatures']);
  const rows: string[] = [];
  for (const { table_name } of tables) {
    for (const row of await db.owner.unsafe<{ row: string }[]>(`select row_to_json(t)::text as row from signer."${table_name}" t`)) rows.push(row.row);
  }
  expect(rows.filter((row) => row.includes('"outcome":"signed"'))).toHaveLength(2);

  for (const secret of secretsOfTestSeed([0, 7])) {
    // Words are looked for as words (a short one may sit inside an unrelated hex string or word).
    const pattern = /^[a-z]+$/.test(secret) ? new RegExp(`\\b${secret}\\b`, 'i') : new RegExp(secret, 'i');
    expect({ secret, log: logLines.find((line) => pattern.test(line)) }).toEqual({ secret, log: undefined });
    expect({ secret, row: rows.find((row) => pattern.test(row)) }).toEqual({ secret, row: undefined });
  }
});
