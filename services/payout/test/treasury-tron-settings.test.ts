/**
 * `process tron` and the signer's Tron settings fail fast (docs/treasury.md#tron,
 * services/payout/README.md "Processor"): one line naming the variable, before any connection.
 * The signer's Tron key is m/44'/195'/0' of its seed: `sign xpub tron` prints it, and a configured
 * INVOICE_XPUB_TRX that is another key stops the signer.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { TEST_ACCOUNT_XPUB, writeSeedFile } from './support/signer';
import { TEST_TRON_XPUB } from './support/tron';
import { bareProcessEnv } from '../../../test/support/process-env';

const MAIN = path.resolve(__dirname, '../dist/main.js');

function run(args: string[], env: NodeJS.ProcessEnv): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [MAIN, ...args], {
    env: bareProcessEnv({ APP_ENV: 'development', LOG_LEVEL: 'info', CHAIN_TRON_API_URL: 'http://127.0.0.1:8090', ...env }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

test.each([
  ['no Tron node', { CHAIN_TRON_API_URL: '' }, 'CHAIN_TRON_API_URL'],
  ['an auto-payout amount that is not a decimal', { PAYOUT_AUTO_MAX_TRX: '1e3' }, 'PAYOUT_AUTO_MAX_TRX'],
  ['a fee_limit that is not a whole number of sun', { SIGNER_MAX_FEE_LIMIT_SUN: '1.5' }, 'SIGNER_MAX_FEE_LIMIT_SUN'],
  ['a lifetime without a unit', { PAYOUT_TRON_LIFETIME: '300' }, 'PAYOUT_TRON_LIFETIME'],
  ['a USDT contract that is not a Tron address', { CHAIN_TRON_USDT_CONTRACT: '0x1234' }, 'CHAIN_TRON_USDT_CONTRACT'],
])('%s: process tron stops at once, naming the setting', (_name, env, variable) => {
  const { status, output } = run(['process', 'tron'], env);
  expect(status).not.toBe(0);
  expect(output).toContain(variable);
  expect(output).not.toContain('serving');
});

test("sign xpub tron prints the seed's m/44'/195'/0' key; the signer refuses another INVOICE_XPUB_TRX", () => {
  const seed = writeSeedFile();
  try {
    const xpub = run(['sign', 'xpub', 'tron'], { SIGNER_SEED_FILE: seed.file });
    expect(xpub).toMatchObject({ status: 0, output: `${TEST_TRON_XPUB}\n` });
    // The Ethereum account's xpub is a valid key, but not the Tron account's.
    const wrong = run(['sign'], { SIGNER_SEED_FILE: seed.file, SIGNER_ALLOW_PLAINTEXT: 'true', INVOICE_XPUB_ETH: TEST_ACCOUNT_XPUB, INVOICE_XPUB_TRX: TEST_ACCOUNT_XPUB, DATABASE_URL: 'postgres://127.0.0.1:1/none' });
    expect(wrong.status).not.toBe(0);
    expect(wrong.output).toContain("INVOICE_XPUB_TRX is not the m/44'/195'/0' key");
  } finally {
    seed.remove();
  }
});
