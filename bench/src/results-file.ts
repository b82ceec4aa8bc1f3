import path from 'node:path';
import { REPO_ROOT } from '@coinvoice/local';

/**
 * Where `npm run bench` and `bench:watcher` write their results: bench/results.md, or
 * BENCH_RESULTS_FILE (the CI smoke run, test/tooling/bench-smoke.test.ts, keeps its tiny numbers
 * out of the committed file).
 */
export const RESULTS_FILE = process.env.BENCH_RESULTS_FILE || path.join(REPO_ROOT, 'bench', 'results.md');
