import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { ensureDir } from '../lib/fs.js';
import {
  Kysely,
  Migrator,
  PostgresAdapter,
  PostgresDialect,
  CompiledQuery,
  SqliteAdapter,
  SqliteDialect,
  SqliteDriver,
  sql,
  type DatabaseConnection,
  type Driver,
  type TransactionSettings,
  type DatabaseIntrospector,
  type DatabaseMetadata,
  type SchemaMetadata,
  type SqliteDatabase,
  type SqliteStatement,
  type TableMetadata,
} from 'kysely';
import pg from 'pg';
import { startCheckpointer, type CheckpointReports } from './checkpointer.js';
import { createGroupCommit } from './group-commit.js';
import { migrationProvider, migrations } from './migrations/index.js';
import { registerDirectReads, ROWS_AS_ARRAYS } from './precompiled.js';
import type { DB } from './schema.js';
import { useWriter } from './unit-of-work.js';

export type DialectName = 'sqlite' | 'postgres';

export interface Database {
  db: Kysely<DB>;
  dialect: DialectName;
  /** The URL it was opened with (a PostgreSQL worker opens its notification connection with it). */
  url: string;
  /** PostgreSQL schema the connections are pinned to, when not the default. */
  schema?: string;
  /**
   * PostgreSQL: a query that gets no answer within `ms` (0: no limit) fails and its connection is closed. Set
   * after migrating, which may legitimately take longer. SQLite runs in process and cannot stop answering.
   */
  setQueryTimeout(ms: number): void;
  close(): Promise<void>;
}

/** SQL text → statement number, shared by every connection of the process. */
const statementNumbers = new Map<string, number>();
/** Distinct statements kept prepared: bounds the memory each PostgreSQL backend spends on them. */
const MAX_NAMED_STATEMENTS = 256;

/**
 * Queries with parameters run as named prepared statements: PostgreSQL parses each once per connection instead
 * of on every run, and after five runs plans it once (a generic plan) when that plan is estimated no dearer than
 * the ones made for each run's values (the server's `plan_cache_mode`, `auto` by default). Parsing was a large
 * share of its CPU per chat message, whose statements are small and indexed, and planning the message's read of
 * its conversation cost more than running it (~0.6 ms against ~0.2). Planned once, a statement cannot adapt to an
 * account far bigger than the rest; measured with one account holding 99% of the conversations, no analytics or
 * list read was slower for it than with a plan per run (bench/postgres/plan-cache.ts, BENCHMARKS.md). Kysely binds
 * every value, so a query shape has one text; past MAX_NAMED_STATEMENTS shapes (long IN lists, many-row inserts)
 * queries run unnamed as before.
 *
 * A prepared statement can go wrong under the connection: its table changed shape (another node's migration:
 * "cached plan must not change result type"), or a pooler in front of PostgreSQL dropped or shares statements
 * (26000 does not exist, 42P05 already exists). The statement then gets a new name on this connection and the
 * query runs once more; inside a transaction that retry fails as the transaction has, and the first error is
 * the one reported (the next use is fine).
 */
function namePreparedStatements(client: pg.PoolClient) {
  const query = client.query.bind(client) as (...args: unknown[]) => Promise<unknown>;
  const parsed = (client as unknown as { connection: { parsedStatements: Record<string, string> } }).connection.parsedStatements;
  const renamed = new Map<number, number>(); // statement number → times renamed on this connection
  const nameOf = (n: number) => `parley_${n}_${renamed.get(n) ?? 0}`;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const [text, values] = args;
    if (typeof text !== 'string' || !Array.isArray(values) || values.length === 0 || args.length > 2) return query(...args);
    let n = statementNumbers.get(text);
    if (n === undefined) {
      if (statementNumbers.size >= MAX_NAMED_STATEMENTS) return query(text, values);
      n = statementNumbers.size;
      statementNumbers.set(text, n);
    }
    const number = n;
    return query({ name: nameOf(number), text, values }).catch((err: { code?: string }) => {
      if (err.code === '26000') delete parsed[nameOf(number)];
      else if (err.code === '0A000' || err.code === '42P05') renamed.set(number, (renamed.get(number) ?? 0) + 1);
      else throw err;
      return query({ name: nameOf(number), text, values }).catch(() => Promise.reject(err));
    });
  };
}

/**
 * A server or network that stops answering without closing the connection (a partition, a frozen VM, a
 * failover behind a proxy) would hold a query, and the request or worker task waiting on it, until TCP gives
 * up: many minutes. Each query on a pooled client gets a deadline instead; at the deadline the connection is
 * destroyed, which fails the query (a 500 for a request, a retry for the worker) and makes the pool drop the
 * client, so the next query opens a fresh connection. Cancelling only the query would leave the connection's
 * protocol state unknown, so the whole connection goes.
 */
function armQueryDeadline(client: pg.PoolClient, timeoutMs: () => number) {
  const query = client.query.bind(client) as (...args: unknown[]) => unknown;
  (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const result = query(...args);
    const ms = timeoutMs();
    if (ms > 0 && result instanceof Promise) {
      const timer = setTimeout(() => {
        const stream = (client as unknown as { connection?: { stream?: { destroy(err?: Error): void } } }).connection?.stream;
        stream?.destroy(new Error(`PostgreSQL gave no answer within ${ms} ms (DATABASE_QUERY_TIMEOUT); the connection is closed`));
      }, ms);
      const clear = () => clearTimeout(timer);
      result.then(clear, clear);
    }
    return result;
  };
}

// bigint (int8) and numeric come back from pg as strings by default; our bigints are millisecond times
// and counters far below 2^53, so numbers are exact and keep both dialects returning the same types.
pg.types.setTypeParser(20, (v) => Number(v));
pg.types.setTypeParser(1700, (v) => Number(v));

/**
 * Kysely's SQLite driver prepares every query afresh, and preparing was the largest single cost of a request
 * in the benchmark profile (bench/http/RESULTS.md). Query shapes are few (parameters are bound, never inlined),
 * so prepared statements are kept by SQL text; the bound keeps a pathological caller from growing it forever.
 * A select whose text starts with ROWS_AS_ARRAYS answers its rows as arrays (precompileRows).
 */
function withStatementCache(sqlite: SQLite.Database, max = 500) {
  const cache = new Map<string, SQLite.Statement>();
  const prepare = (text: string) => {
    let stmt = cache.get(text);
    if (!stmt) {
      stmt = sqlite.prepare(text);
      if (stmt.reader && text.startsWith(ROWS_AS_ARRAYS)) stmt.raw(true);
      if (cache.size >= max) cache.delete(cache.keys().next().value!);
      cache.set(text, stmt);
    }
    return stmt;
  };
  const database: SqliteDatabase = { close: () => sqlite.close(), prepare: (text) => prepare(text) as unknown as SqliteStatement };
  return { database, prepare };
}

export interface DatabaseOptions {
  /** PostgreSQL only: the schema to use (tests give each run its own). */
  schema?: string;
  poolSize?: number;
  /** SQLite only (default `full`, see openDatabase). */
  sqliteSynchronous?: 'full' | 'normal';
  /** PostgreSQL only: a connection was closed by the server or the network, idle or in use (default: a line on stderr). */
  onConnectionError?: (err: Error) => void;
  /**
   * SQLite file only: what to do when WAL checkpoints fail (a full disk) and when they work again (default: a
   * process warning on stderr for each report, none for the recovery).
   */
  checkpoints?: CheckpointReports;
}

/** The SQLite file a `sqlite:` URL names (`:memory:` when it names none); null for any other URL. */
export function sqliteFileOf(url: string): string | null {
  return url.startsWith('sqlite:') ? url.slice('sqlite:'.length) || ':memory:' : null;
}

const BEGIN_IMMEDIATE = CompiledQuery.raw('begin immediate');
const BEGIN_DEFERRED = CompiledQuery.raw('begin');
const ROLLBACK = CompiledQuery.raw('rollback');

/**
 * SQLite write transactions begin by taking the write lock (BEGIN IMMEDIATE, which waits busy_timeout for it).
 * Kysely's plain BEGIN takes it at the first write instead: a transaction that read first, while another process
 * (a CLI command beside the server) wrote and committed, could then not write at all (SQLITE_BUSY at once, its
 * snapshot being stale, whatever busy_timeout says), and a valid PUT was a 500. A transaction opened read only
 * (`readSnapshot`) still begins deferred: it never writes, and must not hold other processes' writes back.
 *
 * A full database (SQLITE_FULL), no memory (SQLITE_NOMEM) and some I/O errors make SQLite roll the whole transaction
 * back itself, not only the failing statement. Kysely's ROLLBACK then failed ("cannot rollback - no transaction is
 * active") and that error replaced the one that caused it: a full disk was logged as an unexplained SQLITE_ERROR and
 * answered as a plain 500. The rollback is skipped when SQLite has already done it.
 */
class ImmediateSqliteDialect extends SqliteDialect {
  readonly #handle: { readonly inTransaction: boolean };
  constructor(config: ConstructorParameters<typeof SqliteDialect>[0], handle: { readonly inTransaction: boolean }) {
    super(config);
    this.#handle = handle;
  }
  override createDriver(): Driver {
    const driver = super.createDriver() as SqliteDriver & Driver;
    const handle = this.#handle;
    driver.beginTransaction = async (connection: DatabaseConnection, settings?: TransactionSettings) => {
      await connection.executeQuery(settings?.accessMode === 'read only' ? BEGIN_DEFERRED : BEGIN_IMMEDIATE);
    };
    driver.rollbackTransaction = async (connection: DatabaseConnection) => {
      if (handle.inTransaction) await connection.executeQuery(ROLLBACK);
    };
    return driver;
  }
}

export function openDatabase(url: string, opts: DatabaseOptions = {}): Database {
  const file = sqliteFileOf(url);
  if (file !== null) {
    if (file !== ':memory:') ensureDir(dirname(file));
    const sqlite = new SQLite(file);
    // WAL lets readers run beside the single writer. FULL syncs the WAL at every commit, so a write we
    // acknowledged survives an OS crash or power loss too; NORMAL (SQLite's suggestion for WAL, opt-in through
    // SQLITE_SYNCHRONOUS) survives only a process crash. Group commit (group-commit.ts) shares one sync among
    // the writes that arrive together, which is what makes FULL affordable (BENCHMARKS.md).
    sqlite.pragma('journal_mode = WAL');
    sqlite.pragma(`synchronous = ${opts.sqliteSynchronous === 'normal' ? 'NORMAL' : 'FULL'}`);
    sqlite.pragma('foreign_keys = ON');
    sqlite.pragma('busy_timeout = 5000');
    const statements = withStatementCache(sqlite);
    const db = new Kysely<DB>({ dialect: new ImmediateSqliteDialect({ database: statements.database }, sqlite) });
    // SQLite has one writer: concurrent requests' write transactions share commits (group-commit.ts).
    useWriter(db, createGroupCommit(db, 'sqlite'));
    // The hot reads (precompileRows) run straight on the handle when no transaction is open on it (none of the
    // group commit's batches): a read then sees only committed rows, exactly as it would after waiting for
    // Kysely's connection mutex.
    registerDirectReads(db, (text, parameters) => (sqlite.inTransaction ? null : statements.prepare(text).all(parameters)));
    const setQueryTimeout = () => undefined;
    if (file === ':memory:') return { db, dialect: 'sqlite', url, setQueryTimeout, close: () => db.destroy() };
    // Checkpoints happen on a second connection off the event loop (checkpointer.ts); the automatic one is
    // only the safety net, at ~40 MB of WAL instead of ~4 MB.
    sqlite.pragma('wal_autocheckpoint = 10000');
    const checkpointer = startCheckpointer(file, opts.checkpoints ?? { onError: (m) => process.emitWarning(`SQLite checkpoint failed: ${m}`) });
    return {
      db,
      dialect: 'sqlite',
      url,
      setQueryTimeout,
      async close() {
        await db.destroy();
        await checkpointer.stop();
      },
    };
  }
  // A search_path given in the URL (`?options=-c search_path=x`) pins the schema just like opts.schema.
  const fromUrl = /search_path=([A-Za-z_][\w]*)/.exec(decodeURIComponent(url))?.[1];
  if (!opts.schema && fromUrl) opts = { ...opts, schema: fromUrl };
  const pool = new pg.Pool({
    connectionString: url,
    max: opts.poolSize ?? 10,
    // A database that stops answering must not leave requests waiting for a connection forever, and TCP
    // keepalive notices a dead peer that never closed the connection.
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
    ...(opts.schema ? { options: `-c search_path=${opts.schema}` } : {}),
  });
  // A connection the server or the network closes (a restart, a failover, idle_session_timeout, a proxy's
  // timeout) emits 'error' on its client; with no listener Node treats it as unhandled and the process dies.
  // The pool listens only while a client is idle in it, so every client gets its own listener for when it is
  // checked out: the query running on it fails by itself (answered as a 500) and the pool drops the client.
  const lost = opts.onConnectionError ?? ((err: Error) => process.stderr.write(`parley: a PostgreSQL connection was lost (${err.message}); it will be reopened\n`));
  let queryTimeoutMs = 0; // until setQueryTimeout: migrations run unbounded
  pool.on('connect', (client) => {
    client.on('error', lost);
    namePreparedStatements(client);
    armQueryDeadline(client, () => queryTimeoutMs);
  });
  pool.on('error', () => undefined); // an idle client's error, already reported by the client's own listener
  const db = new Kysely<DB>({ dialect: new CurrentSchemaPostgresDialect({ pool }) });
  return {
    db,
    dialect: 'postgres',
    url,
    ...(opts.schema ? { schema: opts.schema } : {}),
    setQueryTimeout: (ms: number) => void (queryTimeoutMs = ms),
    close: () => db.destroy(),
  };
}

/**
 * The migrator asks the introspector whether its own tables exist, and Kysely's PostgreSQL introspector reads
 * every table of every schema, calling has_schema_privilege() and pg_get_serial_sequence() on each. A schema
 * or table dropped elsewhere in the same database while that query runs (another deployment, a parallel test
 * run) makes those calls fail with 3F000, 42P01 or 42703 naming an object that is not ours, and the migration
 * fails. Only the schema we migrate matters, so the introspector looks at nothing else; no caller needs the
 * column list, so it is not read.
 */
class CurrentSchemaIntrospector implements DatabaseIntrospector {
  readonly #db: Kysely<any>;
  constructor(db: Kysely<any>) {
    this.#db = db;
  }
  async getSchemas(): Promise<SchemaMetadata[]> {
    const { rows } = await sql<{ name: string }>`select nspname as name from pg_catalog.pg_namespace`.execute(this.#db);
    return rows;
  }
  async getTables(): Promise<TableMetadata[]> {
    const { rows } = await sql<{ name: string; schema: string; kind: string }>`
      select c.relname as name, n.nspname as schema, c.relkind as kind
      from pg_catalog.pg_class c join pg_catalog.pg_namespace n on n.oid = c.relnamespace
      where n.nspname = current_schema() and c.relkind in ('r', 'v', 'p')`.execute(this.#db);
    return rows.map((r) => ({ name: r.name, schema: r.schema, isView: r.kind === 'v', columns: [] }));
  }
  async getMetadata(): Promise<DatabaseMetadata> {
    return { tables: await this.getTables() };
  }
}

class CurrentSchemaPostgresDialect extends PostgresDialect {
  override createIntrospector(db: Kysely<any>): DatabaseIntrospector {
    return new CurrentSchemaIntrospector(db);
  }
}

/** How long a process waits for another's migrations on SQLite before giving up (a data migration can be slow). */
const MIGRATION_WAIT_MS = 120_000;

/** Takes SQLite's write lock, waiting (past busy_timeout) while another process migrates. */
async function beginImmediate(db: Kysely<DB>) {
  const deadline = Date.now() + MIGRATION_WAIT_MS;
  for (;;) {
    try {
      await db.executeQuery(BEGIN_IMMEDIATE);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== 'SQLITE_BUSY' || Date.now() > deadline) throw err;
      await new Promise((r) => setTimeout(r, 50));
    }
  }
}

async function migratorFor(db: Kysely<DB>, schema?: string): Promise<Migrator> {
  // Kysely looks for its migration tables in every schema unless told which one: with another schema in the
  // same database already migrated (parallel test files, two deployments side by side) it would skip
  // creating them here and fail with 'relation "kysely_migration_lock" does not exist'.
  let migrationTableSchema = schema;
  if (!migrationTableSchema && db.getExecutor().adapter instanceof PostgresAdapter) {
    const { rows } = await sql<{ s: string }>`select current_schema() as s`.execute(db);
    migrationTableSchema = rows[0]?.s;
  }
  return new Migrator({ db, provider: migrationProvider, ...(migrationTableSchema ? { migrationTableSchema } : {}) });
}

async function stateOf(migrator: Migrator): Promise<{ applied: string[]; pending: string[] }> {
  const all = await migrator.getMigrations();
  return { applied: all.filter((m) => m.executedAt).map((m) => m.name), pending: all.filter((m) => !m.executedAt).map((m) => m.name) };
}

/**
 * Which of this version's migrations the database has run (`applied`) and has not (`pending`), and the ones it records
 * that this version does not know (`unknown`: a newer version migrated it); nothing is changed.
 */
export async function migrationState(db: Kysely<DB>, schema?: string): Promise<{ applied: string[]; pending: string[]; unknown: string[] }> {
  const state = await stateOf(await migratorFor(db, schema));
  // Kysely's state lists only this version's migrations; the record also holds those a newer version ran. With none
  // applied there may be no record to read.
  const recorded = state.applied.length ? (await sql<{ name: string }>`select name from kysely_migration`.execute(db)).rows.map((r) => r.name) : [];
  return { ...state, unknown: recorded.filter((name) => !(name in migrations)).sort() };
}

/**
 * Runs this version's pending migrations; answers those it applied. With `refuseOlder`, a database an older version
 * set up (some migrations run, some pending) is not touched: the error it makes for the pending ones is thrown.
 */
export async function migrateToLatest(db: Kysely<DB>, schema?: string, opts: { refuseOlder?: (pending: string[]) => Error } = {}): Promise<string[]> {
  const migrator = await migratorFor(db, schema);
  if (opts.refuseOlder) {
    const { applied, pending } = await stateOf(migrator);
    if (applied.length > 0 && pending.length > 0) throw opts.refuseOlder(pending);
  }
  // Kysely takes no lock on SQLite (it assumes one process), so processes started together on a new file (serve
  // and init, serve and worker) each ran the migrations and all but one failed: "table accounts already exists".
  // They now run inside one write transaction taken at once (BEGIN IMMEDIATE): the others wait for it, then find
  // the migrations applied. A failing migration is rolled back whole. PostgreSQL has Kysely's advisory lock.
  const sqlite = db.getExecutor().adapter instanceof SqliteAdapter;
  if (sqlite) await beginImmediate(db);
  let outcome: Awaited<ReturnType<Migrator['migrateToLatest']>>;
  try {
    outcome = await migrator.migrateToLatest();
  } catch (err) {
    if (sqlite) await sql`rollback`.execute(db);
    throw err;
  }
  if (sqlite) await (outcome.error ? sql`rollback` : sql`commit`).execute(db);
  const { error, results } = outcome;
  if (error) {
    const e = error instanceof Error ? error : new Error(String(error));
    // Which migration failed, not only the database's words for it.
    const failed = results?.find((r) => r.status === 'Error')?.migrationName;
    if (failed) e.message = `migration ${failed} failed: ${e.message}`;
    // Kysely's words for a database that a newer version migrated ("corrupted migrations: previously executed
    // migration 0010_x is missing") read like damage; it is a downgrade.
    const newer = /previously executed migration (\S+) is missing/.exec(e.message)?.[1];
    if (newer) {
      e.message =
        `a newer version of Parley migrated this database (its migration ${newer} is unknown to this version); ` +
        'run that version, or restore the backup taken before the upgrade (README.md, Upgrading)';
    }
    throw e;
  }
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
