import { sql, type Kysely, type Transaction } from 'kysely';
import { migrationState, type Database } from './database.js';
import type { DB } from './schema.js';
import { readSnapshot } from './snapshot.js';

/** A copy refused or failed for a reason the operator can fix; nothing was written. */
export class CopyError extends Error {}

/**
 * Every table, parents before children (a row's foreign keys point at rows copied before it), with the columns of
 * its primary key, which page the source in a stable order. A table added to DB does not compile until listed here.
 */
const TABLES = {
  accounts: ['id'],
  api_keys: ['id'],
  documents: ['id'],
  faqs: ['id'],
  conversations: ['id'],
  messages: ['id'],
  events: ['id'],
  webhooks: ['id'],
  deliveries: ['id'],
  delivery_attempts: ['delivery_id', 'attempt'],
  workflows: ['id'],
  workflow_runs: ['workflow_id', 'conversation_id'],
  rundowns: ['id'],
  rundown_quotes: ['rundown_id', 'position', 'message_id'],
  rundown_claims: ['account_id', 'from_ts', 'to_ts'],
  knowledge_versions: ['account_id', 'shard'],
  idempotency_keys: ['account_id', 'key'],
} as const satisfies Record<keyof DB, readonly string[]>;

type Table = keyof typeof TABLES;
/** Every table a copy writes, in its order. */
export const TABLE_NAMES = Object.keys(TABLES) as Table[];

/** Rows read from the source per statement. */
const PAGE = 1000;
/**
 * Bound values per insert statement, under both dialects' limits (SQLite 32,766, PostgreSQL 65,535). Since every
 * statement text is prepared once per connection on PostgreSQL (database.ts), an insert of a table always has the
 * same number of rows but the last.
 */
const MAX_VALUES = 30_000;

// Kysely's builders are typed per table; a copy treats every table alike.
type AnyConn = Kysely<any> | Transaction<any>;

export interface CopyResult {
  /** Rows copied per table. */
  tables: Record<Table, number>;
  rows: number;
  durationMs: number;
  /**
   * Tables whose row count in the source differs, once the copy committed, from what was copied: something wrote to
   * the source during the copy (a node still running), and the copy lacks it. Empty when nothing was seen; a write
   * that only changed rows is not seen.
   */
  sourceChangedDuringCopy: Table[];
}

/**
 * Refuses a source this version cannot read as it is: not a Parley database, one an older version left (its
 * pending migrations would have to run on it first) or one a newer version wrote (tables this version does not know).
 */
export async function checkSource(source: Database) {
  let state: Awaited<ReturnType<typeof migrationState>>;
  try {
    state = await migrationState(source.db, source.schema);
  } catch (err) {
    throw new CopyError(`cannot read the source database: ${(err as Error).message}`);
  }
  const { applied, pending, unknown } = state;
  if (applied.length === 0) throw new CopyError('the source is not a Parley database (no migrations have run on it)');
  if (unknown.length) {
    throw new CopyError(`a newer version of Parley wrote the source (migrations ${unknown.join(', ')} are unknown to this one): copy with that version`);
  }
  if (pending.length) {
    throw new CopyError(
      `an older version of Parley wrote the source, which needs this version's migrations (${pending.join(', ')}) first: ` +
        'stop its nodes, back it up, then run `parley migrate` with DATABASE_URL set to it (README.md, Upgrading)',
    );
  }
}

/** Which tables of the target hold rows: a copy goes only into an empty database, so that nothing is merged or lost. */
async function tablesWithRows(db: AnyConn): Promise<Table[]> {
  const found: Table[] = [];
  for (const table of TABLE_NAMES) {
    if (await db.selectFrom(table).select(sql`1`.as('x')).limit(1).executeTakeFirst()) found.push(table);
  }
  return found;
}

/** A table's rows in primary-key order, PAGE at a time: each page starts after the previous page's last key. */
async function* pagesOf(db: AnyConn, table: Table) {
  const key = TABLES[table];
  const keyRefs = sql.join(key.map((c) => sql.ref(c)));
  let after: unknown[] | null = null;
  for (;;) {
    let q = db.selectFrom(table).selectAll();
    if (after) q = q.where(sql<boolean>`(${keyRefs}) > (${sql.join(after)})`);
    for (const c of key) q = q.orderBy(c);
    const rows: Record<string, unknown>[] = await q.limit(PAGE).execute();
    if (rows.length) yield rows;
    if (rows.length < PAGE) return;
    const last = rows[rows.length - 1]!;
    after = key.map((c) => last[c]);
  }
}

export interface CopyProgress {
  /** A table is done: the rows it copied. */
  onTable?: (table: Table, rows: number) => void;
  /** Within a large table, every `every` rows (default 100,000): how many of the table's `of` are copied so far. */
  onRows?: (table: Table, copied: number, of: number) => void;
  every?: number;
}

/**
 * Copies every row of `source`, which checkSource has accepted, into `target`, which must be migrated to this version
 * and empty. The source is read in one snapshot (a read-only transaction: on SQLite, a running service's writes go on
 * meanwhile but are not copied); the target is written in one transaction, counted against the source table by table
 * before it commits, so a copy that fails or is killed leaves the target as empty as it found it. PostgreSQL's planner
 * statistics of the new rows are gathered (ANALYZE) once committed.
 */
export async function copyDatabase(source: Database, target: Database, progress: CopyProgress = {}): Promise<CopyResult> {
  const every = progress.every ?? 100_000;
  const started = performance.now();
  const tables = {} as Record<Table, number>;
  await readSnapshot(source.db, async (from) => {
    await target.db.transaction().execute(async (to) => {
      const filled = await tablesWithRows(to);
      if (filled.length) throw new CopyError(`the target already holds data (${filled.join(', ')}): copy into a new, empty database`);
      for (const table of TABLE_NAMES) {
        let copied = 0;
        // Read in the copy's snapshot: what the table must have copied at the end, and, through a million-row table,
        // how far it is.
        const there = await countOf(from, table);
        let told = 0;
        for await (const rows of pagesOf(from, table)) {
          const perInsert = Math.max(1, Math.floor(MAX_VALUES / Object.keys(rows[0]!).length));
          for (let i = 0; i < rows.length; i += perInsert) {
            const chunk = rows.slice(i, i + perInsert);
            try {
              await to.insertInto(table).values(chunk).execute();
            } catch (err) {
              const keyOf = (r: Record<string, unknown>) => TABLES[table].map((c) => String(r[c])).join('/');
              throw new CopyError(`the target refused a row of ${table} (one of ${keyOf(chunk[0]!)} … ${keyOf(chunk[chunk.length - 1]!)}): ${(err as Error).message}`);
            }
          }
          copied += rows.length;
          if (progress.onRows && copied - told >= every && copied < there) {
            told = copied;
            progress.onRows(table, copied, there);
          }
        }
        const here = await countOf(to, table);
        if (there !== copied || here !== copied) {
          throw new CopyError(`${table}: ${copied} rows read, but the source counts ${there} and the target ${here}; nothing was copied`);
        }
        tables[table] = copied;
        progress.onTable?.(table, copied);
      }
    });
  });
  // The copied tables only (a bare ANALYZE would walk every schema of the database).
  if (target.dialect === 'postgres') await sql`analyze ${sql.join(TABLE_NAMES.map((t) => sql.table(t)))}`.execute(target.db);
  const rows = Object.values(tables).reduce((a, b) => a + b, 0);
  const sourceChangedDuringCopy: Table[] = [];
  for (const table of TABLE_NAMES) if ((await countOf(source.db, table)) !== tables[table]) sourceChangedDuringCopy.push(table);
  return { tables, rows, durationMs: Math.round(performance.now() - started), sourceChangedDuringCopy };
}

async function countOf(db: AnyConn, table: Table): Promise<number> {
  const r = await db.selectFrom(table).select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow();
  return Number(r.n);
}
