/**
 * A documented command that nobody runs breaks silently (`npm run bench:watcher` failed with 403
 * email_not_verified for weeks): every npm script the README names exists, and every benchmark it
 * names runs here to its end with tiny parameters, as a smoke test (the numbers mean nothing; the
 * results go to a temporary file, never to bench/results.md).
 */
import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { testDatabaseServerUrl, testNatsUrl } from '../support/infra';

const run = promisify(execFile);
const REPO_ROOT = path.resolve(__dirname, '..', '..');
const README = readFileSync(path.join(REPO_ROOT, 'README.md'), 'utf8');
const SCRIPTS = (JSON.parse(readFileSync(path.join(REPO_ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;

/** Every `npm run <script>` (and `npm start` / `npm test`) the README names. */
const NAMED_SCRIPTS = [...new Set([...README.matchAll(/`npm (?:run ([\w:-]+)|(start|test))\b/g)].map((m) => (m[1] ?? m[2])!))];
const BENCHMARKS = NAMED_SCRIPTS.filter((s) => s === 'bench' || s.startsWith('bench:'));

/** Tiny parameters for each benchmark: seconds, not minutes. */
const TINY: Record<string, NodeJS.ProcessEnv> = {
  bench: { BENCH_SECONDS: '1', BENCH_CONNECTIONS: '4', BENCH_WEBHOOK_SAMPLES: '3' },
  'bench:diagnose': { BENCH_SECONDS: '1' },
  'bench:derivation': { BENCH_ADDRESSES: '50' },
  'bench:events': { BENCH_EVENTS: '100', BENCH_KEYS: '10' },
  'bench:scale': { BENCH_STORED_INVOICES: '2000', BENCH_SECONDS: '1', BENCH_CONNECTIONS: '4' },
  'bench:profile': { BENCH_SECONDS: '1', BENCH_CONNECTIONS: '4' },
  'bench:rpc': { BENCH_SECONDS: '1' },
  'bench:watcher': {
    BENCH_WATCHER_INVOICES: '4',
    BENCH_WATCHER_BLOCKS: '20',
    BENCH_WATCHER_PAID: '2',
    BENCH_WATCHER_SAMPLES: '2',
    BENCH_WATCHER_POLL_MS: '200',
    BENCH_WATCHER_FULL_RELOAD_MS: '2000',
    // The 2-second-block network (bench/src/fast-chain.ts): a few invoices and blocks.
    BENCH_FAST_INVOICES: '4',
    BENCH_FAST_BLOCKS: '10',
    BENCH_FAST_LIVE_BLOCKS: '10',
  },
};
/** The benchmarks that write a results file. */
const WRITES_RESULTS = new Set(['bench', 'bench:watcher', 'bench:scale']);

let scratch: string;
beforeAll(() => {
  scratch = mkdtempSync(path.join(tmpdir(), 'coinvoice-bench-smoke-'));
});
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

test('every npm script the README names exists in package.json', () => {
  expect(NAMED_SCRIPTS.length).toBeGreaterThan(5);
  expect(NAMED_SCRIPTS.filter((s) => !(s in SCRIPTS))).toEqual([]);
});

test('the README names the eight benchmarks, and each has tiny parameters here', () => {
  expect(BENCHMARKS.sort()).toEqual(Object.keys(TINY).sort());
});

test.each(Object.keys(TINY))('npm run %s runs to its end with tiny parameters', async (script) => {
  const resultsFile = path.join(scratch, `${script.replace(':', '-')}.md`);
  const { stdout } = await run('npm', ['run', '--silent', script], {
    cwd: REPO_ROOT,
    env: {
      ...process.env,
      DATABASE_URL: testDatabaseServerUrl(),
      NATS_URL: testNatsUrl(),
      BENCH_RESULTS_FILE: resultsFile,
      BENCH_PROFILE_DIR: path.join(scratch, 'profiles'),
      LOG_LEVEL: 'warn',
      ...TINY[script],
    },
    maxBuffer: 16 * 1024 * 1024,
    timeout: 170_000,
  });
  expect(stdout).not.toBe('');
  if (WRITES_RESULTS.has(script)) expect(existsSync(resultsFile)).toBe(true);
  // Each scenario's CPU line ends with how busy the whole host was (bench/src/cpu-accounting.ts):
  // the baseline, create, get, sandbox pay, and sandbox pay with its webhooks.
  if (script === 'bench') expect(readFileSync(resultsFile, 'utf8').match(/ms CPU per request; host \d+% busy$/gm)?.length).toBe(5);
}, 200_000);
