import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { CompiledQuery, sql, type Kysely, type KyselyPlugin } from 'kysely';
import pg from 'pg';
import { migrateToLatest, openDatabase, type Database, type DialectName } from '../../src/db/database.js';
import type { DB } from '../../src/db/schema.js';

/** Every data test runs once per dialect (Kysely's DIALECTS pattern). */
export const DIALECTS: DialectName[] = ['sqlite', 'postgres'];

export const PG_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';

export interface TestDatabase extends Database {
  url: string;
  /** Closes the connections and drops what the test created. */
  cleanup(): Promise<void>;
}

/**
 * A fresh, migrated database: a new in-memory SQLite (or a file, when `file` is given), or a new PostgreSQL
 * schema, so test files can run in parallel against one server; with `sameAs`, new connections to that one. PostgreSQL being unreachable is an error,
 * never a skip: CI must fail when it did not test PostgreSQL.
 */
export async function createTestDatabase(dialect: DialectName, opts: { file?: string; sameAs?: TestDatabase } = {}): Promise<TestDatabase> {
  if (opts.sameAs) {
    // Another process's or node's connections to a database a test already made: closed, never dropped, here.
    const database = openDatabase(opts.sameAs.url, { poolSize: 5 });
    return { ...database, url: opts.sameAs.url, cleanup: () => database.close() };
  }
  if (dialect === 'sqlite') {
    const url = `sqlite:${opts.file ?? ':memory:'}`;
    const database = openDatabase(url);
    await migrateToLatest(database.db);
    return { ...database, url, cleanup: () => database.close() };
  }
  const schema = `t_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.end();
  const database = openDatabase(PG_URL, { schema, poolSize: 5 });
  await migrateToLatest(database.db, schema);
  return {
    ...database,
    url: `${PG_URL}${PG_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${schema}`)}`,
    async cleanup() {
      await database.close();
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      await c.query(`DROP SCHEMA ${schema} CASCADE`);
      await c.end();
    },
  };
}

/**
 * Orders rows of an insert-only table (events) as they were written: ids order only by millisecond (their
 * random part is fresh for each id), and tests with a fake clock write many rows in one millisecond.
 * SQLite's rowid grows with each insert. On PostgreSQL the inserting transaction's id (xmin) orders transactions
 * (one after another, as a test's are), and ctid the rows of one transaction; ctid alone is not enough: each
 * pooled connection fills its own page, so a later transaction's row can sit before an earlier one's.
 */
export const insertionOrder = (dialect: DialectName) => (dialect === 'sqlite' ? sql`rowid` : sql`xmin::text::bigint, ctid`);

/** PostgreSQL: waits (up to 8 s, else fails) until `n` connections wait on a lock the connection `locker` holds. */
export async function waitingOn(locker: number, n: number) {
  const watcher = new pg.Client({ connectionString: PG_URL });
  await watcher.connect();
  try {
    const deadline = Date.now() + 8_000;
    const count = async () => (await watcher.query('select count(*)::int as n from pg_stat_activity where $1 = any(pg_blocking_pids(pid))', [locker])).rows[0].n as number;
    while ((await count()) < n) {
      assert.ok(Date.now() < deadline, `${n} connections waiting on the lock`);
      await new Promise((r) => setTimeout(r, 10));
    }
  } finally {
    await watcher.end();
  }
}

/**
 * The plan the dialect's planner makes for a compiled query, as text: SQLite's EXPLAIN QUERY PLAN details one per line,
 * PostgreSQL's EXPLAIN lines. For tests that check a query reads through the index it was given.
 */
export async function planOf(db: Kysely<DB>, dialect: DialectName, q: { sql: string; parameters: readonly unknown[] }): Promise<string> {
  if (dialect === 'sqlite') {
    const { rows } = await db.executeQuery<{ detail: string }>(CompiledQuery.raw(`explain query plan ${q.sql}`, [...q.parameters]));
    return rows.map((r) => r.detail).join('\n');
  }
  const { rows } = await db.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain ${q.sql}`, [...q.parameters]));
  return rows.map((r) => r['QUERY PLAN']).join('\n');
}

/**
 * PostgreSQL: the plan made once for any values of a compiled query's parameters (a generic plan, EXPLAIN lines), which a
 * prepared statement may keep using after its fifth run (database.ts), where planOf shows the plan for the values given.
 * The values are written into the EXECUTE as literals (strings, numbers, arrays of strings).
 */
export async function genericPlanOf(db: Kysely<DB>, q: { sql: string; parameters: readonly unknown[] }): Promise<string> {
  const literal = (v: unknown): string => {
    if (typeof v === 'number' || typeof v === 'bigint') return String(v);
    if (v === null) return 'null';
    const text = Array.isArray(v) ? `{${v.map((x) => `"${String(x).replace(/(["\\])/g, '\\$1')}"`).join(',')}}` : String(v);
    return `'${text.replace(/'/g, "''")}'`;
  };
  return db.connection().execute(async (c) => {
    await c.executeQuery(CompiledQuery.raw('set plan_cache_mode = force_generic_plan'));
    try {
      await c.executeQuery(CompiledQuery.raw(`prepare generic_plan_of as ${q.sql}`));
      const args = q.parameters.length ? `(${q.parameters.map(literal).join(', ')})` : '';
      const { rows } = await c.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain execute generic_plan_of${args}`));
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await c.executeQuery(CompiledQuery.raw('deallocate generic_plan_of')).catch(() => {});
      await c.executeQuery(CompiledQuery.raw('reset plan_cache_mode'));
    }
  });
}

/** A Kysely on `db` that records every statement it runs (raw `sql` ones too), compiled, with its parameters. */
export function capturing(db: Kysely<DB>) {
  const seen: CompiledQuery[] = [];
  const plugin: KyselyPlugin = {
    transformQuery: ({ node, queryId }) => {
      seen.push(db.getExecutor().compileQuery(node, queryId));
      return node;
    },
    transformResult: async ({ result }) => result,
  };
  return { db: db.withPlugin(plugin), seen };
}
