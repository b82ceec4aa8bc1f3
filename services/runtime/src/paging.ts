/**
 * Keyset paging for list RPCs: newest first over (createdAt, id), a page size with a default and a
 * cap, and an opaque cursor naming the last row shown. The cursor's version tag is the caller's
 * ("v1" for invoices, "p1" for payouts), so cursors already handed out stay decodable.
 */
import type postgres from 'postgres';
import type { Queryable } from './db';
import { checkOptionalOneOf, checkUuid, fail, isUuid, pass, RequestFields, type Check, type Validated } from './validation';

export const PAGE_SIZE = { default: 20, max: 100 } as const;

/** 0 (or absent) means the default, 20; more than 100 is capped at 100. */
export function checkPageSize(raw: unknown): Check<number> {
  if (raw === undefined || raw === null || raw === 0) return pass(PAGE_SIZE.default);
  if (typeof raw !== 'number' || !Number.isInteger(raw) || raw < 0) return fail('must be a positive whole number');
  return pass(Math.min(raw, PAGE_SIZE.max));
}

/** A page boundary: the (createdAt, id) of the last row shown, newest first. */
export interface KeysetCursor {
  createdAt: Date;
  id: string;
}

/** Opaque to clients: base64url of "<tag>:<createdAt epoch ms>:<id>". */
export class KeysetCursorFormat {
  private readonly pattern: RegExp;

  constructor(private readonly tag: string) {
    if (!/^[a-z][a-z0-9]*$/.test(tag)) throw new Error(`invalid cursor tag ${JSON.stringify(tag)}`);
    this.pattern = new RegExp(`^${tag}:(\\d{1,15}):([0-9a-f-]{36})$`);
  }

  encode(cursor: KeysetCursor): string {
    return Buffer.from(`${this.tag}:${cursor.createdAt.getTime()}:${cursor.id}`, 'utf8').toString('base64url');
  }

  decode(raw: unknown): Check<KeysetCursor> {
    if (typeof raw !== 'string' || raw.length > 200 || !/^[A-Za-z0-9_-]+$/.test(raw)) return fail('is not a valid cursor');
    const match = this.pattern.exec(Buffer.from(raw, 'base64url').toString('utf8'));
    if (!match || !isUuid(match[2])) return fail('is not a valid cursor');
    const createdAt = new Date(Number(match[1]));
    if (Number.isNaN(createdAt.getTime())) return fail('is not a valid cursor');
    return pass({ createdAt, id: match[2] });
  }

  /**
   * A page of `rows`, fetched with one more than `pageSize` to tell whether another page follows,
   * and the cursor of that next page ('' on the last one).
   */
  page<Row extends { created_at: Date; id: string }>(rows: readonly Row[], pageSize: number): { rows: Row[]; nextCursor: string } {
    const page = rows.slice(0, pageSize);
    const last = page[page.length - 1];
    return {
      rows: page,
      nextCursor: rows.length > pageSize && last ? this.encode({ createdAt: last.created_at, id: last.id }) : '',
    };
  }
}

/** Which way a list runs over (created_at, id); the cursor format of a list belongs to one order. */
export type KeysetOrder = 'newest_first' | 'oldest_first';

export interface KeysetPageQuery {
  /** The table listed; it has `created_at` and a uuid `id`. */
  table: string;
  /** The list's filters, a fragment of `and …` conditions (sql`` for none). */
  filters: postgres.PendingQuery<postgres.Row[]>;
  order: KeysetOrder;
  /** The last row of the previous page; undefined for the first page. */
  after: KeysetCursor | undefined;
  pageSize: number;
}

/**
 * One page of a keyset list: the rows after the cursor in the list's order, fetched with one more
 * than the page size to tell whether another page follows, and that page's cursor ('' on the
 * last). Keyset, not OFFSET: a page stays right while rows are being created, and costs the same
 * at the millionth row as at the first (an index on the filters + (created_at, id) serves it).
 */
export async function selectKeysetPage<Row extends { created_at: Date; id: string }>(
  sql: Queryable,
  query: KeysetPageQuery,
  cursors: KeysetCursorFormat,
): Promise<{ rows: Row[]; nextCursor: string }> {
  const newestFirst = query.order === 'newest_first';
  const after =
    query.after === undefined
      ? sql``
      : newestFirst
        ? sql`and (created_at, id) < (${query.after.createdAt}, ${query.after.id})`
        : sql`and (created_at, id) > (${query.after.createdAt}, ${query.after.id})`;
  const order = newestFirst ? sql`order by created_at desc, id desc` : sql`order by created_at asc, id asc`;
  const rows = await sql<Row[]>`
    select * from ${sql(query.table)}
    where true ${query.filters} ${after}
    ${order}
    limit ${query.pageSize + 1}`;
  return cursors.page(rows, query.pageSize);
}

/** A project's list request: an optional status filter, a page size, and where the page starts. */
export interface KeysetListRequest<Status extends string> {
  projectId: string;
  status: Status | undefined;
  pageSize: number;
  after: KeysetCursor | undefined;
}

/** A list RPC's fields as received. */
export interface KeysetListInput {
  projectId?: unknown;
  /** The public status name, or undefined for all; anything else is refused. */
  status?: unknown;
  pageSize?: unknown;
  cursor?: unknown;
}

export function validateKeysetListRequest<Status extends string>(
  input: KeysetListInput,
  statuses: readonly Status[],
  cursors: KeysetCursorFormat,
): Validated<KeysetListRequest<Status>> {
  const fields = new RequestFields();
  const projectId = fields.take('projectId', checkUuid(input.projectId));
  const status = fields.take('status', checkOptionalOneOf(input.status, statuses));
  const pageSize = fields.take('pageSize', checkPageSize(input.pageSize));
  const after = fields.take<KeysetCursor | undefined>(
    'cursor',
    input.cursor === undefined || input.cursor === '' ? pass(undefined) : cursors.decode(input.cursor),
  );
  return fields.result(() => ({ projectId: projectId!, status, pageSize: pageSize!, after }));
}
