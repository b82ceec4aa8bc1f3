/**
 * The UTXO processor's settings fail fast (docs/treasury.md#utxo, services/payout/README.md
 * "Bitcoin and Litecoin"): a missing Esplora node or a bad fee, batch or target setting stops
 * `process bitcoin|litecoin` before any connection, with one line naming the variable.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { bareProcessEnv } from '../../../test/support/process-env';

const MAIN = path.resolve(__dirname, '../dist/main.js');

function run(args: string[], env: NodeJS.ProcessEnv): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [MAIN, ...args], {
    env: bareProcessEnv({ APP_ENV: 'development', LOG_LEVEL: 'info', CHAIN_BITCOIN_ESPLORA_URL: 'http://127.0.0.1:3000', CHAIN_LITECOIN_ESPLORA_URL: 'http://127.0.0.1:3001', ...env }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

test.each([
  ['no Bitcoin Esplora node', ['process', 'bitcoin'], { CHAIN_BITCOIN_ESPLORA_URL: '' }, 'CHAIN_BITCOIN_ESPLORA_URL'],
  ['no Litecoin Esplora node (the Bitcoin one does not stand in)', ['process', 'litecoin'], { CHAIN_LITECOIN_ESPLORA_URL: '' }, 'CHAIN_LITECOIN_ESPLORA_URL'],
  ['a fee cap with more than 3 decimals', ['process', 'bitcoin'], { PAYOUT_MAX_FEE_RATE_BTC: '1.0001' }, 'PAYOUT_MAX_FEE_RATE_BTC'],
  ['a fee cap of 0', ['process', 'litecoin'], { PAYOUT_MAX_FEE_RATE_LTC: '0' }, 'PAYOUT_MAX_FEE_RATE_LTC'],
  ['an empty batch', ['process', 'bitcoin'], { PAYOUT_BATCH_MAX: '0' }, 'PAYOUT_BATCH_MAX'],
  ['a batch wait without a unit', ['process', 'bitcoin'], { PAYOUT_BATCH_WAIT: '60' }, 'PAYOUT_BATCH_WAIT'],
  ['a confirmation target of 0 blocks', ['process', 'bitcoin'], { PAYOUT_CONFIRM_TARGET: '0' }, 'PAYOUT_CONFIRM_TARGET'],
  ['an automatic maximum that is not a decimal', ['process', 'litecoin'], { PAYOUT_AUTO_MAX_LTC: '1e3' }, 'PAYOUT_AUTO_MAX_LTC'],
])('%s: the process stops at once, naming the setting', (_name, args, env, variable) => {
  const { status, output } = run(args, env);
  expect(status).not.toBe(0);
  expect(output).toContain(variable);
  expect(output).not.toContain('serving');
});
