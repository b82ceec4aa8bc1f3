import path from 'node:path';

/**
 * V8's compiled code kept between starts (Node's NODE_COMPILE_CACHE) for a checkout's processes:
 * `npm start`'s and the test suite's, which start a system's processes dozens of times. A service
 * spends most of its start loading its 500–850 modules; with their compiled code cached the gateway
 * loads them in 390–540 ms instead of 720 (docs/performance.md#starting). Inside node_modules: a
 * fresh clone starts with none, `npm ci` clears it, and Node checks each entry against its file.
 * Not in the image: a container starts its process once, on a read-only file system.
 */
export const COMPILE_CACHE_DIR = path.resolve(__dirname, '..', '..', '..', 'node_modules', '.cache', 'coinvoice-compile');

/** Sets NODE_COMPILE_CACHE for the processes this one starts, unless the environment chose already. */
export function useCompileCache(): void {
  process.env.NODE_COMPILE_CACHE ??= COMPILE_CACHE_DIR;
}
