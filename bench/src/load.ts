/** The benchmarks' load generator: autocannon, with only 2xx answers counted as served. */
import autocannon from 'autocannon';

export const SECONDS = Number(process.env.BENCH_SECONDS ?? 10);
export const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 32);

/** Runs one load (a fixed `amount` of requests replaces the duration). */
export function load(options: autocannon.Options): Promise<autocannon.Result> {
  const base = options.amount === undefined ? { connections: CONNECTIONS, duration: SECONDS } : { connections: CONNECTIONS };
  return new Promise((resolve, reject) => {
    const instance = autocannon({ ...base, ...options }, (err, result) => (err ? reject(err) : resolve(result)));
    autocannon.track(instance, { renderProgressBar: false, renderResultsTable: false, renderLatencyTable: false });
  });
}

/** Served requests per second: 2xx answers only (a 429 or a 500 is not capacity). */
export function servedPerSecond(result: autocannon.Result): number {
  return result['2xx'] / Math.max(result.duration, 1e-9);
}
