/**
 * The processor's settings fail fast (docs/treasury.md#processor, services/payout/README.md
 * "Processor"): a missing node, an unknown network or a bad amount stops `process <network>` before
 * any connection, with one line naming the variable.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { bareProcessEnv } from '../../../test/support/process-env';

const MAIN = path.resolve(__dirname, '../dist/main.js');

function run(args: string[], env: NodeJS.ProcessEnv): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [MAIN, ...args], {
    env: bareProcessEnv({ APP_ENV: 'development', LOG_LEVEL: 'info', CHAIN_ETHEREUM_RPC_URL: 'http://127.0.0.1:8545', ...env }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

test.each([
  ['no Ethereum node', ['process', 'ethereum'], { CHAIN_ETHEREUM_RPC_URL: '' }, 'CHAIN_ETHEREUM_RPC_URL'],
  ['a network without a processor', ['process', 'polygon'], {}, 'process <network>'],
  ['an amount that is not a decimal', ['process', 'ethereum'], { PAYOUT_AUTO_MAX_USDT: '1e3' }, 'PAYOUT_AUTO_MAX_USDT'],
  ['a dust threshold with more decimals than USDC has', ['process', 'ethereum'], { SWEEP_DUST_USDC: '0.1234567' }, 'SWEEP_DUST_USDC'],
  ['a negative dust threshold', ['process', 'ethereum'], { SWEEP_DUST_ETH: '-1' }, 'SWEEP_DUST_ETH'],
  ['a replacement delay without a unit', ['process', 'ethereum'], { PAYOUT_REPLACE_AFTER: '180' }, 'PAYOUT_REPLACE_AFTER'],
])('%s: the process stops at once, naming the setting', (_name, args, env, variable) => {
  const { status, output } = run(args, env);
  expect(status).not.toBe(0);
  expect(output).toContain(variable);
  expect(output).not.toContain('serving');
});
