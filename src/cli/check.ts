import { existsSync, statfsSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { performance } from 'node:perf_hooks';
import SQLite from 'better-sqlite3';
import { Redis } from 'ioredis';
import { Kysely, SqliteDialect, sql } from 'kysely';
import { request } from 'undici';
import { withoutPassword, type Config } from '../config.js';
import { migrationState, openDatabase, sqliteFileOf, type DialectName } from '../db/database.js';
import { migrations } from '../db/migrations/index.js';
import type { DB } from '../db/schema.js';
import { startProcessClock } from '../db/server-clock.js';
import { accountsRepository } from '../modules/accounts/accounts.repository.js';
import { deliveriesRepository } from '../modules/webhooks/webhooks.repository.js';

export type CheckStatus = 'ok' | 'warn' | 'fail';
export interface Check {
  name: string;
  status: CheckStatus;
  /** What was found and, unless ok, what to do about it. */
  detail: string;
}

/** A PostgreSQL query of the check that gets no answer within this fails (the server or the network stopped answering). */
const PG_QUERY_DEADLINE_MS = 10_000;
/** REDIS_URL must answer PING within this, connecting included. */
const REDIS_DEADLINE_MS = 2_000;
/** The oldest due delivery waiting longer than this means no worker is taking deliveries (the poll is 50 ms). */
const QUEUE_STALL_MS = 5 * 60_000;
const GiB = 1024 ** 3;
const MiB = 1024 ** 2;
/** Free space on the SQLite file's filesystem: under these, writes are close to failing (and a backup beside it would). */
const DISK_WARN_BYTES = GiB;
const DISK_FAIL_BYTES = 100 * MiB;

const ms = (v: number) => `${v < 10 ? v.toFixed(1) : Math.round(v)} ms`;
function age(v: number): string {
  const s = Math.round(v / 1000);
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  return `${(s / 3600).toFixed(1)} h`;
}
const bytes = (v: number) => (v >= GiB ? `${(v / GiB).toFixed(1)} GiB` : `${Math.round(v / MiB)} MiB`);
const plural = (n: number, one: string, many = `${one}s`) => `${n} ${n === 1 ? one : many}`;
type Describe = (err: unknown) => string;
const seconds = (v: number) => (v % 1000 ? `${v} ms` : `${v / 1000} s`);
/** An error as one phrase; a refused connection to a name with several addresses is an AggregateError with no message. */
const errorText = (err: unknown) => {
  const e = err as { code?: string; message?: string };
  if (!e?.message) return e?.code ?? String(err);
  const message = e.message.replace(/\.$/, '');
  return e.code && !message.includes(e.code) ? `${e.code} ${message}` : message;
};

/**
 * An error as one phrase, without the secrets this run knows (URL passwords, LLM_API_KEY): other libraries' messages
 * are passed on, and none may carry one into a terminal or a log. Only their words are searched (the URLs around them
 * are printed withoutPassword): a short password would otherwise be starred out of the check's own sentences.
 */
function errorDescriber(config: Config): Describe {
  const secrets = new Set<string>();
  for (const url of [config.databaseUrl, config.redisUrl, config.llm?.baseUrl]) {
    if (!url) continue;
    try {
      const { password } = new URL(url);
      if (password) {
        secrets.add(password);
        secrets.add(decodeURIComponent(password));
      }
    } catch {
      // sqlite: URLs and the like carry no password.
    }
  }
  if (config.llm?.apiKey) secrets.add(config.llm.apiKey);
  const list = [...secrets].filter(Boolean).sort((a, b) => b.length - a.length);
  return (err) => list.reduce((t, s) => t.split(s).join('***'), errorText(err));
}

/** A connection for reading only: the check must change nothing, and must not create a missing SQLite file. */
interface Opened {
  db: Kysely<DB>;
  dialect: DialectName;
  schema?: string;
  /** SQLite: the handle the pragmas are read on. */
  sqlite?: SQLite.Database;
  file?: string;
  close(): Promise<void>;
}

function openForReading(config: Config): Opened {
  const file = sqliteFileOf(config.databaseUrl);
  if (file === null) {
    // The pool opens no connection until the first query, which is timed as the database check.
    const database = openDatabase(config.databaseUrl, { poolSize: 1, onConnectionError: () => undefined });
    database.setQueryTimeout(PG_QUERY_DEADLINE_MS);
    return { db: database.db, dialect: 'postgres', ...(database.schema ? { schema: database.schema } : {}), close: () => database.close() };
  }
  // Read only: SQLite itself refuses every write. openDatabase would also switch the file to WAL, start a checkpoint
  // thread and create a missing file. A read-only connection cannot remove the -wal and -shm files at its close: with
  // no other process on the file they stay, empty, as while the service runs.
  const sqlite = new SQLite(file, { readonly: true, fileMustExist: true, timeout: 2_000 });
  const db = new Kysely<DB>({ dialect: new SqliteDialect({ database: sqlite }) });
  return { db, dialect: 'sqlite', sqlite, file, close: () => db.destroy() };
}

async function checkDatabase(config: Config, describe: Describe): Promise<{ check: Check; opened: Opened | null }> {
  const where = withoutPassword(config.databaseUrl);
  const file = sqliteFileOf(config.databaseUrl);
  if (file === ':memory:') {
    return {
      check: { name: 'database', status: 'warn', detail: `DATABASE_URL is ${where}: a database that lives inside each process and is gone at its exit, so there is nothing here to check; name a file (sqlite:./data/parley.db) or postgres://… to keep the data` },
      opened: null,
    };
  }
  if (file !== null && !existsSync(file)) {
    return {
      check: { name: 'database', status: 'fail', detail: `no database at ${resolve(file)} (DATABASE_URL): nothing has set it up yet; \`parley migrate\`, \`parley serve\` or \`parley init\` creates it` },
      opened: null,
    };
  }
  let opened: Opened | undefined;
  try {
    opened = openForReading(config);
    const versionQuery = opened.dialect === 'sqlite' ? sql<{ v: string }>`select sqlite_version() as v` : sql<{ v: string }>`select current_setting('server_version') as v`;
    // The first query opens the PostgreSQL connection; the second is the round trip a request pays.
    const version = (await versionQuery.execute(opened.db)).rows[0]!.v;
    const started = performance.now();
    await sql`select 1`.execute(opened.db);
    const roundTrip = performance.now() - started;
    const what = opened.dialect === 'sqlite' ? `SQLite ${version}, file ${resolve(opened.file!)}` : `PostgreSQL ${version} at ${where}${opened.schema ? `, schema ${opened.schema}` : ''}`;
    return { check: { name: 'database', status: 'ok', detail: `${what}; round trip ${ms(roundTrip)}` }, opened };
  } catch (err) {
    await opened?.close().catch(() => undefined);
    return {
      check: { name: 'database', status: 'fail', detail: `cannot open the database ${where} (DATABASE_URL): ${describe(err)}; nothing else that needs it was checked` },
      opened: null,
    };
  }
}

/**
 * `readable`: none of this version's migrations is pending, so the tables have every column this version reads (a
 * newer version's migrations may have added more).
 */
async function checkMigrations(opened: Opened): Promise<{ check: Check; readable: boolean }> {
  const known = Object.keys(migrations);
  const { applied, pending, unknown } = await migrationState(opened.db, opened.schema);
  const count = `${applied.length} of this version's ${known.length} migrations applied`;
  const none = applied.length === 0 && pending.length === known.length;
  if (unknown.length) {
    return {
      check: {
        name: 'migrations',
        status: 'fail',
        detail: `${count}, and ${unknown.join(', ')} unknown to this version: a newer version of Parley migrated this database, and this one refuses to start on it; run that version, or restore the backup taken before the upgrade (README.md, Upgrading)`,
      },
      readable: pending.length === 0,
    };
  }
  if (pending.length) {
    return {
      check: {
        name: 'migrations',
        status: 'warn',
        detail:
          (none ? `none of this version's ${known.length} migrations has run: an empty database (or not Parley's)` : `${count}; pending: ${pending.join(', ')}`) +
          '. `parley serve` and `parley worker` apply them at start; or run `parley migrate`' +
          (none ? '' : " (an upgrade: stop the older version's nodes and back up first, README.md Upgrading)") +
          '. The webhook queue and the accounts are checked once they are applied',
      },
      readable: false,
    };
  }
  return { check: { name: 'migrations', status: 'ok', detail: `${count} (latest ${known[known.length - 1]})` }, readable: true };
}

function checkSqlite(config: Config, opened: Opened): Check[] {
  const sqlite = opened.sqlite!;
  const journal = String(sqlite.pragma('journal_mode', { simple: true })).toLowerCase();
  const checks: Check[] = [
    journal === 'wal'
      ? { name: 'journal_mode', status: 'ok', detail: 'wal: requests read beside the one writer' }
      : {
          name: 'journal_mode',
          status: 'warn',
          detail: `${journal}, not wal: readers wait for the writer and the other way round; \`parley serve\`, \`parley worker\` and \`parley migrate\` set wal when they open the file (something else changed it since)`,
        },
    // A setting of each connection, not of the file: what this configuration makes the service's connections use.
    config.sqliteSynchronous === 'full'
      ? { name: 'synchronous', status: 'ok', detail: 'full (SQLITE_SYNCHRONOUS): an acknowledged write survives an OS crash or a power cut' }
      : { name: 'synchronous', status: 'ok', detail: 'normal (SQLITE_SYNCHRONOUS=normal): an acknowledged write survives a crash of the process, not of the OS or a power cut; full is the default' },
  ];
  const dir = dirname(resolve(opened.file!));
  const fs = statfsSync(dir);
  const free = fs.bavail * fs.bsize;
  const room = `${bytes(free)} free on the filesystem of ${dir}`;
  checks.push(
    free < DISK_FAIL_BYTES
      ? { name: 'disk_space', status: 'fail', detail: `${room}: writes will soon fail (500s); free space there or move the database to a larger disk` }
      : free < DISK_WARN_BYTES
        ? { name: 'disk_space', status: 'warn', detail: `${room}, under 1 GiB: free space there or move the database to a larger disk before writes fail` }
        : { name: 'disk_space', status: 'ok', detail: room },
  );
  return checks;
}

async function checkQueue(opened: Opened): Promise<Check> {
  // The times in the queue are the database server's (PostgreSQL) or this machine's (SQLite): the one every node tells.
  const time = await startProcessClock(opened);
  try {
    const now = time.clock.now();
    const q = await deliveriesRepository.queueFigures(opened.db, now);
    const oldest = q.oldestNextAttemptAt !== null && q.oldestNextAttemptAt <= now ? now - q.oldestNextAttemptAt : 0;
    const rest = `${q.waiting - q.due} scheduled for later, ${q.leased} being attempted, ${plural(q.disabledWebhooks, 'webhook')} disabled`;
    if (q.due > 0 && oldest > QUEUE_STALL_MS) {
      return {
        name: 'webhook_queue',
        status: 'warn',
        detail: `${plural(q.due, 'delivery', 'deliveries')} due, the oldest for ${age(oldest)} (${rest}): no worker is taking deliveries: is \`parley worker\` or \`parley serve\` without --no-worker running?`,
      };
    }
    return { name: 'webhook_queue', status: 'ok', detail: q.due ? `${plural(q.due, 'delivery', 'deliveries')} due, the oldest for ${age(oldest)}; ${rest}` : `no delivery due; ${rest}` };
  } finally {
    time.stop();
  }
}

async function checkAccounts(opened: Opened): Promise<Check> {
  const accounts = await accountsRepository.list(opened.db);
  if (accounts.length === 0) return { name: 'accounts', status: 'warn', detail: 'no account yet: `parley init` creates the first one and a server key' };
  const deleting = accounts.filter((a) => a.deletion_started_at !== null);
  if (deleting.length === 0) return { name: 'accounts', status: 'ok', detail: `${plural(accounts.length, 'account')}, no deletion unfinished` };
  return {
    name: 'accounts',
    status: 'warn',
    detail: deleting
      .map(
        (a) =>
          `the deletion of account ${a.id} started at ${new Date(a.deletion_started_at!).toISOString()} and has not finished (cut short, or still running); ` +
          `it is unusable until it does: \`parley accounts delete ${a.id} --yes\` finishes it`,
      )
      .join('; '),
  };
}

async function checkRedis(url: string, describe: Describe): Promise<Check> {
  const where = withoutPassword(url);
  // No retries, no queue: one attempt, within the deadline.
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: REDIS_DEADLINE_MS, commandTimeout: REDIS_DEADLINE_MS, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
  // The connection's error says why (ECONNREFUSED, a TLS or AUTH failure); connect() then rejects with "Connection is closed".
  let cause: unknown;
  redis.on('error', (err) => void (cause ??= err));
  let timer: NodeJS.Timeout | undefined;
  const started = performance.now();
  try {
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${REDIS_DEADLINE_MS / 1000} s`)), REDIS_DEADLINE_MS);
    });
    await Promise.race([redis.connect().then(() => redis.ping()), late]);
    return { name: 'redis', status: 'ok', detail: `${where} answered PING in ${ms(performance.now() - started)}: the nodes share their rate-limit counters` };
  } catch (err) {
    return {
      name: 'redis',
      status: 'fail',
      detail: `${where} (REDIS_URL) did not answer PING: ${describe(cause ?? err)}; each node will count rate limits on its own until it does`,
    };
  } finally {
    clearTimeout(timer);
    redis.disconnect();
  }
}

async function checkLlm(llm: NonNullable<Config['llm']>, describe: Describe): Promise<Check> {
  const url = `${llm.baseUrl}/models`;
  const where = `GET ${withoutPassword(url)}`;
  const timeout = AbortSignal.timeout(llm.timeoutMs);
  const started = performance.now();
  try {
    const res = await request(url, { method: 'GET', headers: llm.apiKey ? { authorization: `Bearer ${llm.apiKey}` } : {}, signal: timeout });
    await res.body.dump().catch(() => undefined);
    const took = ms(performance.now() - started);
    if (res.statusCode >= 200 && res.statusCode < 300) return { name: 'llm', status: 'ok', detail: `${where} answered ${res.statusCode} in ${took}` };
    const key = res.statusCode === 401 || res.statusCode === 403 ? '; check LLM_API_KEY' : '';
    return {
      name: 'llm',
      status: 'warn',
      detail: `${where} answered ${res.statusCode} in ${took}${key}. Some servers have no /models; the chat calls /chat/completions, which this check does not try`,
    };
  } catch (err) {
    const why = timeout.aborted ? `no answer within ${seconds(llm.timeoutMs)} (LLM_TIMEOUT)` : describe(err);
    return { name: 'llm', status: 'fail', detail: `${where} (LLM_BASE_URL) failed: ${why}; customers get the built-in answerer until it answers` };
  }
}

/**
 * `parley check`: is this installation healthy, and if not, what to do. Reads only: it migrates nothing, writes
 * nothing, and opens a SQLite file read-only. Every network check has a deadline.
 */
async function runChecks(config: Config): Promise<Check[]> {
  const describe = errorDescriber(config);
  // Side by side with the database's checks; whatever goes wrong in one is its failure, never the command's.
  const failed = (name: string) => (err: unknown): Check => ({ name, status: 'fail', detail: describe(err) });
  const network = Promise.all([
    config.redisUrl ? checkRedis(config.redisUrl, describe).catch(failed('redis')) : null,
    config.llm ? checkLlm(config.llm, describe).catch(failed('llm')) : null,
  ]);
  const checks: Check[] = [];
  const { check, opened } = await checkDatabase(config, describe);
  checks.push(check);
  if (opened) {
    /** A check whose reading failed is failed, saying why: the others still run. */
    const guarded = async (name: string, fn: () => Promise<Check | Check[]>) => {
      try {
        checks.push(...[await fn()].flat());
      } catch (err) {
        checks.push({ name, status: 'fail', detail: `cannot read it: ${describe(err)}` });
      }
    };
    try {
      let readable = false;
      await guarded('migrations', async () => {
        const m = await checkMigrations(opened);
        readable = m.readable;
        return m.check;
      });
      if (opened.dialect === 'sqlite') await guarded('sqlite', async () => checkSqlite(config, opened));
      if (readable) {
        await guarded('webhook_queue', () => checkQueue(opened));
        await guarded('accounts', () => checkAccounts(opened));
      }
    } finally {
      await opened.close().catch(() => undefined);
    }
  }
  for (const c of await network) if (c) checks.push(c);
  return checks;
}

export async function checkCommand(config: Config, out: (obj: Record<string, unknown>, text: string) => void): Promise<number> {
  const checks = await runChecks(config);
  const ok = !checks.some((c) => c.status === 'fail');
  const width = Math.max(...checks.map((c) => c.name.length));
  out({ ok, checks }, checks.map((c) => `${c.status.padEnd(4)}  ${c.name.padEnd(width)}  ${c.detail}`).join('\n'));
  return ok ? 0 : 1;
}
