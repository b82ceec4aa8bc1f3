/**
 * A pool that records the statements it sends (postgres.js's debug hook), for the tests that prove
 * how many round trips a write takes (docs/performance.md). The start-up queries of its connections
 * (postgres.js's type lookups) are sent before it is handed out and are not recorded.
 */
import postgres from 'postgres';

export interface StatementRecorder {
  /** A pool on `schema` (search_path), recording every statement it sends. */
  sql: postgres.Sql;
  /** The statements sent since the last reset, in order. */
  readonly statements: string[];
  reset(): void;
  end(): Promise<void>;
}

export async function recordingPool(url: string, schema: string, connections = 1): Promise<StatementRecorder> {
  const statements: string[] = [];
  const sql = postgres(url, {
    max: connections,
    onnotice: () => undefined,
    connection: { search_path: schema },
    debug: (_connection, query) => statements.push(query),
  });
  await Promise.all(Array.from({ length: connections }, () => sql`select 1`));
  statements.length = 0;
  return {
    sql,
    statements,
    reset: () => void (statements.length = 0),
    end: () => sql.end(),
  };
}
