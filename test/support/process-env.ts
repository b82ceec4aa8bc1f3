/**
 * The environment of a process a test starts with nothing of the test's own settings: PATH, and
 * the compile cache the suite's global set-up chose (docs/performance.md#starting), so each such
 * start loads its modules compiled — a settings test starts a process per case.
 */
export function bareProcessEnv(env: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH ?? '',
    ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
    ...env,
  };
}
