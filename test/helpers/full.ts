import { sql, type Kysely } from 'kysely';
import type { Database } from '../../src/db/database.js';
import type { DB } from '../../src/db/schema.js';

/** SQLite's own default for max_page_count (what `lift` restores). */
const SQLITE_DEFAULT_MAX_PAGES = 4294967294;

/**
 * Makes the database refuse to grow until the returned `lift` is called, as a full disk does, without filling one.
 *
 * SQLite: `PRAGMA max_page_count` at the current size on the service's own connection (Kysely has one), so any
 * statement that needs a new page fails with SQLITE_FULL, SQLite's answer to a full disk too; pages that deletes free
 * are reused, as they are on a full disk. PostgreSQL: every insert into a table of the test's schema raises
 * disk_full (53100) with the server's own wording, from a trigger, as a table that cannot extend its file does;
 * with `pgRowsOver`, only a row whose text is longer than that (small rows still fit in the pages the table has); with
 * `pgTables`, only those tables (quicker to set up: a test that must fill the database within a deadline).
 */
export async function fillDatabase(
  database: Pick<Database, 'db' | 'dialect'>,
  opts: { pgRowsOver?: number; pgTables?: string[] } = {},
): Promise<() => Promise<void>> {
  const { db } = database;
  if (database.dialect === 'sqlite') {
    const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(db);
    await sql.raw(`pragma max_page_count = ${rows[0]!.page_count}`).execute(db);
    return async () => {
      await sql.raw(`pragma max_page_count = ${SQLITE_DEFAULT_MAX_PAGES}`).execute(db);
    };
  }
  return raiseOnInsert(db, 'disk_full', 'could not extend file "base/16384/16385": No space left on device', opts.pgRowsOver, opts.pgTables);
}

/**
 * PostgreSQL: every insert into a table of the current schema (of those in `only`, if given; of a row whose text is
 * longer than `rowsOver`) fails
 * with `errcode` (a condition name such as disk_full, or a SQLSTATE) until the returned function is called, which
 * removes the triggers.
 */
export async function raiseOnInsert(db: Kysely<DB>, errcode: string, message: string, rowsOver = 0, only?: string[]): Promise<() => Promise<void>> {
  const fn = `parley_test_raise_${Math.random().toString(36).slice(2, 10)}`;
  const quoted = (s: string) => `'${s.replaceAll("'", "''")}'`;
  const body = `if octet_length(new::text) > ${Math.floor(rowsOver)} then raise exception using message = ${quoted(message)}, errcode = ${quoted(errcode)}; end if; return new;`;
  await sql.raw(`create function ${fn}() returns trigger language plpgsql as $$ begin ${body} end $$`).execute(db);
  const { rows } = await sql<{ name: string }>`select tablename as name from pg_tables where schemaname = current_schema()`.execute(db);
  for (const { name } of rows.filter((r) => !only || only.includes(r.name))) await sql.raw(`create trigger ${fn} before insert on "${name}" for each row execute function ${fn}()`).execute(db);
  return async () => {
    await sql.raw(`drop function ${fn}() cascade`).execute(db);
  };
}
