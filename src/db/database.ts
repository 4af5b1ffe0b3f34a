import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, Migrator, PostgresAdapter, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import { migrationProvider } from './migrations/index.js';
import type { DB } from './schema.js';

export type DialectName = 'sqlite' | 'postgres';

export interface Database {
  db: Kysely<DB>;
  dialect: DialectName;
  close(): Promise<void>;
}

// bigint (int8) and numeric come back from pg as strings by default; our bigints are millisecond times
// and counters far below 2^53, so numbers are exact and keep both dialects returning the same types.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

export interface DatabaseOptions {
  /** PostgreSQL only: the schema to use (tests give each run its own). */
  schema?: string;
  poolSize?: number;
}

export function openDatabase(url: string, opts: DatabaseOptions = {}): Database {
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length) || ':memory:';
    if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true });
    const sqlite = new SQLite(file);
    // WAL lets readers run beside the single writer; NORMAL sync is durable across process crashes
    // (only an OS crash can lose the last transactions), which is the trade SQLite's docs recommend for WAL.
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma('synchronous = NORMAL');
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 5000');
    const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: sqlite }) });
    return { db, dialect: 'sqlite', close: () => db.destroy() };
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.poolSize ?? 10,
    ...(opts.schema ? { options: `-c search_path=${opts.schema}` } : {}),
  });
  const db = new Kysely<DB>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', close: () => db.destroy() };
}

export async function migrateToLatest(db: Kysely<DB>): Promise<string[]> {
  // Kysely looks for its migration tables in every schema it can see; on PostgreSQL, pin them to the schema
  // this connection works in, or a second schema in the same database (tests, tenants) is mistaken for ours.
  let migrationTableSchema: string | undefined;
  if (db.getExecutor().adapter instanceof PostgresAdapter) {
    const r = await sql<{ s: string }>`select current_schema() as s`.execute(db);
    migrationTableSchema = r.rows[0]?.s;
  }
  const migrator = new Migrator({ db, provider: migrationProvider, ...(migrationTableSchema ? { migrationTableSchema } : {}) });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
