import { sql, type SelectQueryBuilder } from 'kysely';
import type { DB } from './schema.js';

/**
 * A page size as a query's LIMIT. SQLite's planner reads a LIMIT that is a bare bound parameter
 * (sqlite3ExprIsInteger, SQLite 3.53) and so marks the statement to be prepared again whenever that parameter
 * is bound, which better-sqlite3 does on every run: ~5 µs more per list page (bench/http/RESULTS.md). An
 * expression is not read that way; the cast keeps it an integer on both dialects (pg sends parameters as text).
 */
export const pageLimit = (limit: number) => sql<number>`cast(${limit} as integer)`;

/**
 * How many rows `counted` (a list's filter) matches, as a column of its page's statement. Read by a statement of
 * its own, the total could disagree with the page: on PostgreSQL each statement of READ COMMITTED takes its own
 * snapshot (and the two ran at once on two connections), so a write committing between them gave a total one off
 * the rows a client could page through. In the page's statement it shares the page's snapshot, and the list is one
 * statement. An uncorrelated scalar subquery: run once per statement (an InitPlan on PostgreSQL, a once-only
 * subroutine on SQLite), not per row.
 */
export const totalColumn = (counted: SelectQueryBuilder<DB, any, object>) => sql<Count>`(${counted.select(sql`count(*)`.as('n'))})`.as('total');

/** A count as the drivers answer it: PostgreSQL's bigint comes as a string. */
type Count = number | string | bigint;

/**
 * The total of a page whose rows carry totalColumn. An empty page has no row to carry it: at offset 0 the filter
 * matched nothing in the page's snapshot; past the end `count` reads it alone (there is no page to disagree with).
 */
export async function totalOf(first: Count | undefined, offset: number, count: () => Promise<Count>): Promise<number> {
  if (first !== undefined) return Number(first);
  return offset === 0 ? 0 : Number(await count());
}

/** The filter's count by a statement of its own, for totalOf's empty page past the end. */
export const countAlone = (counted: SelectQueryBuilder<DB, any, object>) => async () =>
  (await counted.select(sql<Count>`count(*)`.as('n')).executeTakeFirstOrThrow()).n;

/** Tables whose API list is a plain page of whole rows. */
type Listed = 'faqs' | 'webhooks' | 'workflows' | 'rundowns';

/**
 * One page of a filtered table, newest first (created_at desc, id as the tie-break: CONTRACT §4), and the
 * total the filter matches, from one statement (totalColumn).
 */
export async function newestFirstPage<T extends Listed>(q: SelectQueryBuilder<DB, T, object>, page: { limit: number; offset: number }) {
  const rows = await q
    .selectAll()
    .select(totalColumn(q))
    .orderBy('created_at', 'desc')
    .orderBy('id', 'desc')
    .limit(pageLimit(page.limit))
    .offset(page.offset)
    .execute();
  return { rows, total: await totalOf(rows[0]?.total, page.offset, countAlone(q)) };
}
