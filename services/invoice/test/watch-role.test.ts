/** `main.js watch <chain>` refuses to start, with one line naming what is missing, when it cannot watch. */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { bareProcessEnv } from '../../../test/support/process-env';

const MAIN = path.resolve(__dirname, '..', 'dist', 'main.js');

function run(args: string[], env: Record<string, string> = {}) {
  const result = spawnSync(process.execPath, [MAIN, ...args], {
    env: bareProcessEnv({ APP_ENV: 'development', ...env }),
    encoding: 'utf8',
    timeout: 20_000,
  });
  return { status: result.status, stderr: result.stderr.trim() };
}

test('an unknown chain is refused with one line naming the chains that can be watched', () => {
  const { status, stderr } = run(['watch', 'dogecoin']);
  expect(status).toBe(1);
  expect(stderr.split('\n')).toHaveLength(1);
  expect(stderr).toMatch(/^config: watch <chain>="dogecoin" is invalid: expected a chain with a watcher: ethereum/);
});

test('watch ethereum without CHAIN_ETHEREUM_RPC_URL is refused with one line naming the variable', () => {
  // Nothing listens on these: the check happens before any connection.
  const { status, stderr } = run(['watch', 'ethereum'], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', NATS_URL: 'nats://127.0.0.1:1' });
  expect(status).toBe(1);
  expect(stderr.split('\n')).toHaveLength(1);
  expect(stderr).toMatch(/^config: CHAIN_ETHEREUM_RPC_URL is required/);
});

test.each(['base', 'arbitrum', 'optimism', 'polygon', 'bsc'])('watch %s is a role of its own: without its node URL it is refused naming CHAIN_<NETWORK>_RPC_URL', (network) => {
  const { status, stderr } = run(['watch', network], { DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none', NATS_URL: 'nats://127.0.0.1:1' });
  expect(status).toBe(1);
  expect(stderr.split('\n')).toHaveLength(1);
  expect(stderr).toMatch(new RegExp(`^config: CHAIN_${network.toUpperCase()}_RPC_URL is required`));
});
