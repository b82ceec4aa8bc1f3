/**
 * Keeps a Postgres restart from crashing the process or failing requests after it: a guard for
 * postgres.js defects that are open upstream as of 3.4.9 (the latest release).
 *
 * 1. porsager/postgres#1208 (also #1154, #1066; fix proposed in PR #1209). postgres.js defers
 *    small writes to a `setImmediate`. When the connection of a transaction dies (Postgres
 *    restarted or crashed, the backend terminated, a failover), the transaction fails and
 *    postgres.js sends `rollback` on that connection, whose socket is already gone: the deferred
 *    write calls `socket.write` on null and throws from the immediate callback, where nothing can
 *    catch it, and the process dies. (Every service did, on a Postgres restart under load.)
 *    Guarded: a write with no socket settles the connection's waiting queries with
 *    CONNECTION_CLOSED, a rejection the caller catches.
 * 2. Teardown (terminate, closed) clears the deferred-write timer but leaves it set, so a
 *    connection that lost a pending write never schedules a write again after reconnecting.
 *    Guarded: teardown also forgets the timer and the pending bytes.
 * 3. porsager/postgres#1223. A FATAL error the server sent just before closing (57P01
 *    "terminating connection due to administrator command" on a restart) is kept for the query
 *    that was running and delivered at the next ReadyForQuery, which is the new connection's,
 *    after reconnecting: the first query on every such connection fails with the old error, long
 *    after Postgres is back. Guarded: a newly connected socket starts with none of the previous
 *    socket's query state (anything still waiting on it is settled with CONNECTION_CLOSED).
 *
 * The guard loads postgres.js's CommonJS connection module with these changes. It must run before
 * `postgres` is first required (db.ts imports it first). Each change applies only where the
 * installed postgres.js still has the defective code, so a release with the fixes is loaded as is
 * (`postgresWriteGuard` says what happened; test/resilience/postgres-connection-killed.test.ts
 * shows the defects and the guard against a real Postgres).
 */
import { readFileSync } from 'node:fs';
import Module from 'node:module';
import path from 'node:path';

interface Fix {
  defect: string;
  guarded: string;
  /** Every occurrence (teardown appears twice) or the first only. */
  all?: boolean;
}

const FIXES: Fix[] = [
  {
    defect: `  function nextWrite(fn) {
    const x = socket.write(chunk, fn)`,
    guarded: `  function nextWrite(fn) {
    if (!socket) {
      // coinvoice guard (porsager/postgres#1208): the connection closed before this deferred
      // write ran; settle what was waiting on it instead of throwing where nothing can catch.
      nextWriteTimer !== null && clearImmediate(nextWriteTimer)
      chunk = nextWriteTimer = null
      error(Errors.connection('CONNECTION_CLOSED', options))
      return false
    }
    const x = socket.write(chunk, fn)`,
  },
  {
    defect: `
    clearImmediate(nextWriteTimer)
`,
    guarded: `
    clearImmediate(nextWriteTimer)
    chunk = nextWriteTimer = null // coinvoice guard: a cleared timer left set blocks every later write
`,
    all: true,
  },
  {
    defect: `  function connected() {
    try {
      statements = {}`,
    guarded: `  function connected() {
    try {
      // coinvoice guard (porsager/postgres#1223): nothing of the previous socket's queries may
      // reach this one (its stored FATAL error would reject the first query on the new socket).
      if (query || sent.length) {
        const closedError = Errors.connection('CONNECTION_CLOSED', options)
        query && queryError(query, closedError)
        while (sent.length) queryError(sent.shift(), closedError)
      }
      query = results = errorResponse = null
      statements = {}`,
  },
];

export type PostgresWriteGuardState =
  /** At least one defect was found; the guarded module is what `postgres` loads. */
  | 'installed'
  /** The installed postgres.js has none of the defective code (fixed upstream, or changed). */
  | 'not-needed'
  /** postgres.js was loaded before the guard could run: the defects stay (a programming error). */
  | 'too-late'
  /** Not running under Node's own module loader (e.g. a test runner with its own registry). */
  | 'unsupported';

interface InternalModule {
  filename: string;
  paths: string[];
  loaded: boolean;
  _compile(source: string, filename: string): void;
}

interface InternalModuleStatic {
  new (id: string, parent?: unknown): InternalModule;
  _nodeModulePaths(dir: string): string[];
}

function install(): PostgresWriteGuardState {
  if (typeof require === 'undefined' || !require.cache || typeof require.resolve !== 'function') return 'unsupported';
  let file: string;
  try {
    // The CommonJS build: cjs/src/index.js requires ./connection.js next to it.
    file = path.join(path.dirname(require.resolve('postgres')), 'connection.js');
  } catch {
    return 'unsupported';
  }
  const cached = require.cache[file] as (NodeJS.Module & { coinvoiceWriteGuard?: true }) | undefined;
  if (cached) return cached.coinvoiceWriteGuard ? 'installed' : 'too-late';
  let source: string;
  try {
    source = readFileSync(file, 'utf8');
  } catch {
    return 'unsupported';
  }
  let patched = source;
  for (const fix of FIXES) {
    if (!patched.includes(fix.defect)) continue;
    patched = fix.all ? patched.split(fix.defect).join(fix.guarded) : patched.replace(fix.defect, fix.guarded);
  }
  if (patched === source) return 'not-needed';
  const NodeModule = Module as unknown as InternalModuleStatic;
  const loaded = new NodeModule(file, module);
  loaded.filename = file;
  loaded.paths = NodeModule._nodeModulePaths(path.dirname(file));
  loaded._compile(patched, file);
  loaded.loaded = true;
  (loaded as unknown as { coinvoiceWriteGuard: true }).coinvoiceWriteGuard = true;
  require.cache[file] = loaded as unknown as NodeJS.Module;
  // A test runner's module registry may ignore writes to require.cache.
  return require.cache[file] === (loaded as unknown) ? 'installed' : 'unsupported';
}

/** What the guard did in this process (see PostgresWriteGuardState). */
export const postgresWriteGuard: PostgresWriteGuardState = install();
