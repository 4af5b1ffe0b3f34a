import { sql, type SelectQueryBuilder } from 'kysely';
import type { DB } from './schema.js';

/**
 * A page size as a query's LIMIT. SQLite's planner reads a LIMIT that is a bare bound parameter
 * (sqlite3ExprIsInteger, SQLite 3.53) and so marks the statement to be prepared again whenever that parameter
 * is bound, which better-sqlite3 does on every run: ~5 µs more per list page (bench/http/RESULTS.md). An
 * expression is not read that way; the cast keeps it an integer on both dialects (pg sends parameters as text).
 */
export const pageLimit = (limit: number) => sql<number>`cast(${limit} as integer)`;

/** Tables whose API list is a plain page of whole rows. */
type Listed = 'faqs' | 'webhooks' | 'workflows' | 'rundowns';

/**
 * One page of a filtered table, newest first (created_at desc, id as the tie-break: CONTRACT §4), and the
 * total the filter matches. The two statements share the filter, so total and page always describe the same set.
 */
export async function newestFirstPage<T extends Listed>(q: SelectQueryBuilder<DB, T, object>, page: { limit: number; offset: number }) {
  const [count, rows] = await Promise.all([
    // A raw count(*) skips building an expression builder per request (visible in the benchmark profile).
    q.select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow(),
    q.selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').limit(pageLimit(page.limit)).offset(page.offset).execute(),
  ]);
  return { rows, total: Number(count.n) };
}
