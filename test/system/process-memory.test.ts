/**
 * Password hashes leave nothing resident in a process started with the launcher's environment
 * (SERVICE_PROCESS_ENV, the image's ENV: docs/performance.md#memory). Each argon2id hash takes
 * 19 MiB on a libuv thread; with glibc's default dynamic mmap threshold every hash after the first
 * is carved from that thread's arena and stays resident once freed. Measured in a child process
 * running auth's own PasswordHasher with its default parameters, four hashes at a time (every
 * thread of the pool hashes), twice.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { SERVICE_PROCESS_ENV } from '../../deploy/local/src/system';

const REPO_ROOT = path.resolve(__dirname, '../..');

const SCRIPT = `
const { readFileSync } = require('node:fs');
const { PasswordHasher } = require(${JSON.stringify(path.join(REPO_ROOT, 'services/auth/dist/domain/passwords.js'))});
const rssMb = () => Number(/VmRSS:\\s+(\\d+) kB/.exec(readFileSync('/proc/self/status', 'utf8'))[1]) / 1024;
(async () => {
  const hasher = new PasswordHasher();
  await hasher.hash('warm-up-password');
  const before = rssMb();
  for (let round = 0; round < 2; round++) await Promise.all([1, 2, 3, 4].map((i) => hasher.hash('password-' + round + '-' + i)));
  process.stdout.write(JSON.stringify({ grewMb: rssMb() - before }));
})();
`;

function rssGrowthMb(env: NodeJS.ProcessEnv): number {
  const child = spawnSync(process.execPath, ['-e', SCRIPT], { env: { PATH: process.env.PATH, UV_THREADPOOL_SIZE: '4', ...env }, encoding: 'utf8', timeout: 60_000 });
  if (child.status !== 0) throw new Error(`the hashing child failed: ${child.stderr}`);
  return (JSON.parse(child.stdout) as { grewMb: number }).grewMb;
}

test("eight password hashes leave less than 20 MB resident with the launcher's process environment", () => {
  expect(SERVICE_PROCESS_ENV.MALLOC_MMAP_THRESHOLD_).toBeDefined();
  expect(rssGrowthMb({ ...SERVICE_PROCESS_ENV })).toBeLessThan(20);
});

test('without it the same hashes stay resident (what the setting is for)', () => {
  expect(rssGrowthMb({})).toBeGreaterThan(35);
});
