import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../../src/config.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { PG_URL } from '../helpers/db.js';
import { createFreezableRelay } from '../helpers/relay.js';

// SQLite only: PostgreSQL's commit durability is the server's own setting (synchronous_commit, on by default).
test('SQLITE_SYNCHRONOUS: full unless the operator chooses normal; anything else is refused naming the variable', () => {
  assert.equal(loadConfig({}).sqliteSynchronous, 'full');
  assert.equal(loadConfig({ SQLITE_SYNCHRONOUS: 'NORMAL' }).sqliteSynchronous, 'normal');
  assert.throws(() => loadConfig({ SQLITE_SYNCHRONOUS: 'off' }), /SQLITE_SYNCHRONOUS="off": must be full or normal/);
});

test('a SQLite file database syncs every commit (FULL) by default, NORMAL only when asked', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-sync-'));
  try {
    for (const [opts, expected] of [[{}, 2], [{ sqliteSynchronous: 'full' as const }, 2], [{ sqliteSynchronous: 'normal' as const }, 1]] as const) {
      const database = openDatabase(`sqlite:${join(dir, `${expected}-${Object.keys(opts).length}.db`)}`, opts);
      try {
        const { rows } = await sql<{ synchronous: number }>`pragma synchronous`.execute(database.db);
        assert.equal(rows[0]!.synchronous, expected, JSON.stringify(opts));
      } finally {
        await database.close();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

// PostgreSQL only: SQLite has no connections to lose.
/** A pool on a fresh schema that records lost connections, and an admin connection that can kill its backends. */
async function withLosablePool(poolSize: number, fn: (t: { database: Database; admin: pg.Client; lost: string[] }) => Promise<void>) {
  const schema = `lost_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  await admin.query(`CREATE SCHEMA ${schema}`);
  const lost: string[] = [];
  const database = openDatabase(PG_URL, { schema, poolSize, onConnectionError: (err) => lost.push(err.message) });
  try {
    await fn({ database, admin, lost });
  } finally {
    await database.close();
    await admin.query(`DROP SCHEMA ${schema} CASCADE`);
    await admin.end();
  }
}
const backendPid = async (database: Database) => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.db)).rows[0]!.pid;

test('a pooled PostgreSQL connection closed by the server is reported, not fatal, and the next query reconnects (postgres)', () =>
  withLosablePool(1, async ({ database, admin, lost }) => {
    const pid = await backendPid(database);
    // The connection is idle in the pool now; a restart or failover looks like this to the pool.
    await admin.query('select pg_terminate_backend($1)', [pid]);
    const deadline = Date.now() + 5_000;
    while (lost.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    assert.equal(lost.length, 1, 'the lost connection was reported');
    assert.notEqual(await backendPid(database), pid, 'a new connection answered');
  }));

test('a PostgreSQL connection killed while a query runs on it fails that query only; the process lives on (postgres)', () =>
  withLosablePool(1, async ({ database, admin, lost }) => {
    const pid = await backendPid(database);
    // Inside a transaction the connection stays checked out of the pool after the query fails, which is when
    // the client's own 'error' (emitted as the socket closes) needs a listener.
    const running = database.db
      .transaction()
      .execute(async (trx) => {
        const err = await sql`select pg_sleep(5)`.execute(trx).then(
          () => null,
          (e: Error) => e,
        );
        await new Promise((r) => setTimeout(r, 300));
        return err;
      })
      .catch((e: Error) => e);
    // Wait until the sleep is running on that backend (the pool's only one), then kill it under the query.
    const deadline = Date.now() + 5_000;
    for (;;) {
      const r = await admin.query(`select 1 from pg_stat_activity where pid = $1 and query like 'select pg_sleep%'`, [pid]);
      if (r.rowCount || Date.now() > deadline) break;
      await new Promise((res) => setTimeout(res, 20));
    }
    await admin.query('select pg_terminate_backend($1)', [pid]);
    assert.match(String((await running)?.message), /terminat|not queryable/);
    const reported = Date.now() + 5_000;
    while (lost.length === 0 && Date.now() < reported) await new Promise((r) => setTimeout(r, 20));
    assert.ok(lost.length >= 1, 'the lost connection was reported');
    assert.notEqual(await backendPid(database), pid, 'a new connection answered');
  }));

test('DATABASE_QUERY_TIMEOUT: 30 s by default, 0 turns it off, nonsense is refused naming the variable', () => {
  assert.equal(loadConfig({}).databaseQueryTimeoutMs, 30_000);
  assert.equal(loadConfig({ DATABASE_QUERY_TIMEOUT: '0' }).databaseQueryTimeoutMs, 0);
  assert.equal(loadConfig({ DATABASE_QUERY_TIMEOUT: '5s' }).databaseQueryTimeoutMs, 5_000);
  assert.throws(() => loadConfig({ DATABASE_QUERY_TIMEOUT: 'soon' }), /DATABASE_QUERY_TIMEOUT="soon"/);
});

test('a query past DATABASE_QUERY_TIMEOUT fails, its connection is dropped and the next query gets a new one (postgres)', () =>
  withLosablePool(1, async ({ database, lost }) => {
    const pid = await backendPid(database);
    await sql`select pg_sleep(0.3)`.execute(database.db); // no deadline yet (as while migrating)
    database.setQueryTimeout(200);
    const started = Date.now();
    const err = await sql`select pg_sleep(3)`.execute(database.db).then(
      () => null,
      (e: Error) => e,
    );
    const took = Date.now() - started;
    assert.ok(err, 'the slow query failed');
    assert.ok(took >= 180 && took < 2_000, `failed after ${took} ms`);
    assert.ok(lost.some((m) => /DATABASE_QUERY_TIMEOUT/.test(m)), `reported: ${JSON.stringify(lost)}`);
    assert.notEqual(await backendPid(database), pid, 'a new connection answered');
  }));

test('a PostgreSQL that stops answering without closing the connection: queries fail at the deadline, then work again (postgres)', async () => {
  const target = new URL(PG_URL);
  const relay = await createFreezableRelay({ host: target.hostname, port: Number(target.port || 5432) });
  const url = new URL(PG_URL);
  url.port = String(relay.port);
  const lost: string[] = [];
  const database = openDatabase(url.toString(), { poolSize: 1, onConnectionError: (e) => lost.push(e.message) });
  database.setQueryTimeout(300);
  try {
    await sql`select 1`.execute(database.db);
    relay.freeze(true);
    const started = Date.now();
    // On the pool's open connection (a new one would wait for the 10 s connection timeout instead).
    const result = await sql`select 1`.execute(database.db).then(() => 'answered', (e: Error) => e.message);
    const took = Date.now() - started;
    assert.notEqual(result, 'answered');
    assert.ok(took < 2_000, `failed after ${took} ms`);
    relay.freeze(false);
    const again = await sql<{ one: number }>`select 1 as one`.execute(database.db);
    assert.equal(again.rows[0]!.one, 1);
    assert.ok(lost.length >= 1);
  } finally {
    relay.freeze(false);
    await database.close();
    await relay.close();
  }
});
