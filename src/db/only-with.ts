import { sql, type Expression, type Insertable, type QueryCreator, type SqlBool } from 'kysely';
import type { DB } from './schema.js';

/**
 * A lone UTF-16 surrogate (with the `u` flag a well-formed pair is one code point). A text parameter stores one as
 * U+FFFD (pg encodes parameters as UTF-8, which writes U+FFFD for it); jsonb refuses its escape. A reply cut at a
 * length can end in one.
 */
const LONE_SURROGATE = /\p{Cs}/gu;
const asTextParameter = (_key: string, v: unknown) => (typeof v === 'string' ? v.replace(LONE_SURROGATE, '\uFFFD') : v);

/** `rows` as insertOnlyWith writes them: the columns some row names, and the rows as its JSON parameter. */
export function onlyWithRows<T extends keyof DB & string>(rows: ReadonlyArray<Insertable<DB[T]>>) {
  // A row without one of the columns gets null there (not the column's default).
  return { columns: [...new Set(rows.flatMap((r) => Object.keys(r)))], json: JSON.stringify(rows, asTextParameter) };
}

/**
 * PostgreSQL: an insert into `table` of the rows `json` holds (onlyWithRows), naming `columns`, that writes them only
 * where `condition` holds (all of them or none: it names no column of theirs). The rows travel as one JSON parameter
 * read with the table's own row type: in an INSERT ... SELECT of several rows of bound parameters PostgreSQL types
 * them text, which a bigint column refuses. `json` is only a bound value, so a precompiled statement can take it as
 * an argument.
 */
export function insertRowsWhere<T extends keyof DB & string>(db: QueryCreator<DB>, table: T, columns: readonly string[], json: string, condition: Expression<SqlBool>) {
  const list = sql.join(columns.map((c) => sql.ref(c)));
  return db
    .insertInto(table)
    .columns(columns as never)
    .expression(sql`select ${list} from jsonb_populate_recordset(null::${sql.table(table)}, ${json}::jsonb) where ${condition}`);
}

/**
 * insertRowsWhere, writing the rows only if `cte`, a WITH query of the same statement (an UPDATE or INSERT ... RETURNING),
 * answers a row, so the insert happens with that change or not at all.
 */
export function insertOnlyWith<T extends keyof DB & string>(db: QueryCreator<DB>, table: T, columns: readonly string[], json: string, cte: string) {
  return insertRowsWhere(db, table, columns, json, sql<SqlBool>`exists (select 1 from ${sql.table(cte)})`);
}
