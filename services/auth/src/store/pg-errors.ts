/** Recognising the Postgres errors the store turns into domain answers. */

/** SQLSTATE 23505 on the named unique index/constraint. */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  return pgErrorCode(err) === '23505' && constraintOf(err) === constraint;
}

/** SQLSTATE 23503 on the named foreign key. */
export function isForeignKeyViolation(err: unknown, constraint: string): boolean {
  return pgErrorCode(err) === '23503' && constraintOf(err) === constraint;
}

function pgErrorCode(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err && typeof err.code === 'string' ? err.code : undefined;
}

function constraintOf(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'constraint_name' in err && typeof err.constraint_name === 'string'
    ? err.constraint_name
    : undefined;
}
