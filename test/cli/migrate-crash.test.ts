/*
 * An upgrade killed with SIGKILL in the middle of its migrations: `parley serve` of this version started on a
 * database an older version left (migrations up to 0005), killed while it migrates, then started again. The
 * migrations run in one transaction on both dialects (SQLite: BEGIN IMMEDIATE around them all, src/db/database.ts;
 * PostgreSQL: Kysely's transaction under its advisory lock), so the kill must leave the database exactly as the old
 * version had it, and the second start must finish the upgrade with every row kept and the same answers as a copy
 * migrated without a crash.
 *
 * Where the kill lands is not left to chance. SQLite: the test sees the child hold the database's write lock (a
 * BEGIN IMMEDIATE of its own fails at once), stops it (SIGSTOP), checks again, and kills it once it has held the lock
 * long enough to be inside 0008's rewrite of every message. PostgreSQL: the test holds a share lock on `messages`,
 * so the migration runs 0006 and 0007 and then waits in 0008's ALTER TABLE; it is killed there. Its server process
 * keeps the migration's advisory lock until that wait ends and it finds its client gone: the next start waits for
 * it, and goes on once the test lets go.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { statSync } from 'node:fs';
import { describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { Migrator, sql, type Kysely } from 'kysely';
import pg from 'pg';
import { migrationState, openDatabase, sqliteFileOf, type DialectName } from '../../src/db/database.js';
import { migrationProvider, migrations } from '../../src/db/migrations/index.js';
import { hashKey } from '../../src/modules/accounts/accounts.service.js';
import { SCOPES } from '../../src/modules/accounts/accounts.schemas.js';
import { newId } from '../../src/lib/ids.js';
import { DIALECTS, PG_URL } from '../helpers/db.js';
import { until } from '../helpers/until.js';
import { assertBuildIsFresh, ENTRY, freshDatabase, stopChild } from './cli-suite.js';

const OLD_LEVEL = '0005_rundowns';
const CONVERSATIONS = 30;
/**
 * SQLite: 12,000 messages of ~260 bytes, more than its page cache holds, so 0008's numbering of them all takes a
 * while and spills uncommitted pages into the WAL. PostgreSQL waits on the test's lock instead: fewer do.
 */
const messagesEach = (dialect: DialectName) => (dialect === 'sqlite' ? 400 : 60);
const KEY = `sk_${randomBytes(24).toString('base64url')}`;
const T0 = Date.UTC(2026, 0, 5, 9);

/** The rows an older version wrote, with fixed ids and times, so two databases seeded from it are alike. */
function fixture() {
  const acct = newId('acct', T0);
  const convs = Array.from({ length: CONVERSATIONS }, (_, i) => newId('conv', T0 + i * 60_000));
  return {
    acct,
    convs,
    docs: Array.from({ length: 4 }, (_, i) => newId('doc', T0 + i)),
    faqs: Array.from({ length: 4 }, (_, i) => newId('faq', T0 + i)),
    key: newId('key', T0),
    webhook: newId('wh', T0),
  };
}
type Fixture = ReturnType<typeof fixture>;

async function seedOldVersion(url: string, f: Fixture, dialect: DialectName) {
  const MESSAGES_EACH = messagesEach(dialect);
  const database = openDatabase(url);
  try {
    const migrator = new Migrator({ db: database.db, provider: migrationProvider, ...(database.schema ? { migrationTableSchema: database.schema } : {}) });
    const r = await migrator.migrateTo(OLD_LEVEL);
    assert.equal(r.error, undefined);
    const db = database.db as unknown as Kysely<any>;
    await db.transaction().execute(async (trx) => {
      await trx.insertInto('accounts').values({ id: f.acct, name: 'Old Shop', plan: 'pro', knowledge_version: 7, created_at: T0 }).execute();
      await trx.insertInto('api_keys').values({ id: f.key, account_id: f.acct, type: 'server', scopes: JSON.stringify(SCOPES), hash: hashKey(KEY), hint: KEY.slice(0, 7), created_at: T0 }).execute();
      await trx.insertInto('documents').values(f.docs.map((id, i) => ({ id, account_id: f.acct, title: `Returns ${i}`, content: `Items can be returned within ${30 + i} days.`, status: 'active', created_at: T0 + i, updated_at: T0 + i }))).execute();
      await trx.insertInto('faqs').values(f.faqs.map((id, i) => ({ id, account_id: f.acct, question: `How long does shipping ${i} take?`, answer: `${i + 2} days.`, category: 'shipping', status: 'approved', created_at: T0 + i, updated_at: T0 + i }))).execute();
      await trx.insertInto('webhooks').values({ id: f.webhook, account_id: f.acct, url: 'https://hooks.example.com/p', events: JSON.stringify(['conversation.ended']), secret: 'whsec_old_version', enabled: 1, created_at: T0, updated_at: T0 }).execute();
      for (const [c, conv] of f.convs.entries()) {
        const at = T0 + c * 60_000;
        await trx
          .insertInto('conversations')
          .values({
            id: conv, account_id: f.acct, customer_id: `cust_${c % 7}`, customer_label: `Customer ${c}`, status: c % 3 ? 'ended' : 'open',
            outcome: c % 3 ? 'resolved' : null, message_count: MESSAGES_EACH, answered_count: MESSAGES_EACH / 2, created_at: at,
            last_message_at: at + MESSAGES_EACH, ended_at: c % 3 ? at + MESSAGES_EACH + 1 : null, topic: c % 3 ? 'returns' : null,
          })
          .execute();
        // Three messages a millisecond, ids in order within it (as the old ids were): 0008 numbers them by (time, id).
        const rows = Array.from({ length: MESSAGES_EACH }, (_, i) => ({
          id: `msg_${conv.slice(5)}_${String(i).padStart(4, '0')}`,
          account_id: f.acct,
          conversation_id: conv,
          role: i % 2 ? 'assistant' : 'customer',
          // Long enough that the messages outgrow SQLite's page cache: 0008's rewrite then spills into the WAL.
          content: `${i % 2 ? `Answer ${i}` : `Question ${i} about returns`} ${'lorem ipsum '.repeat(20)}`,
          created_at: at + Math.floor(i / 3),
        }));
        for (let i = 0; i < rows.length; i += 200) await trx.insertInto('messages').values(rows.slice(i, i + 200)).execute();
      }
    });
  } finally {
    await database.close();
  }
}

/** Every row of the tables the old version had, in key order: what an upgrade must keep. */
async function rowsOf(url: string) {
  const database = openDatabase(url);
  try {
    const db = database.db as unknown as Kysely<any>;
    const out: Record<string, unknown[]> = {};
    for (const table of ['accounts', 'api_keys', 'documents', 'faqs', 'webhooks', 'conversations']) out[table] = await db.selectFrom(table).selectAll().orderBy('id').execute();
    out.messages = await db.selectFrom('messages').select(['id', 'conversation_id', 'role', 'content', 'created_at']).orderBy('id').execute();
    return out;
  } finally {
    await database.close();
  }
}

/** The columns of `table` in their order ([] when there is no such table). */
async function columnsOf(url: string, table: string) {
  const database = openDatabase(url);
  try {
    const { rows } =
      database.dialect === 'sqlite'
        ? await sql<{ name: string }>`select name from pragma_table_info(${table}) order by cid`.execute(database.db)
        : await sql<{ name: string }>`select column_name as name from information_schema.columns where table_schema = current_schema() and table_name = ${table} order by ordinal_position`.execute(database.db);
    return rows.map((r) => r.name);
  } finally {
    await database.close();
  }
}

async function applied(url: string) {
  const database = openDatabase(url);
  try {
    return (await migrationState(database.db, database.schema)).applied;
  } finally {
    await database.close();
  }
}

function spawnServe(env: Record<string, string>) {
  const child = spawn(process.execPath, [ENTRY, 'serve', '--json', '--no-worker'], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const listening = new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString();
      const line = stdout.split('\n').find((l) => l.includes('listening'));
      if (line) resolve((JSON.parse(line) as { listening: string }).listening);
    });
    child.on('exit', (code, signal) => reject(new Error(`serve exited (${code ?? signal}): ${stderr}`)));
  });
  listening.catch(() => undefined);
  return { child, listening, stderr: () => stderr };
}

/** `until` with this file's patience (child processes on a loaded machine). */
const waitUntil = <T>(fn: () => T | null | undefined | false | Promise<T | null | undefined | false>, what: string, timeoutMs = 30_000, everyMs = 5) => until(fn, what, timeoutMs, everyMs);

const exited = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode ? r() : c.once('exit', () => r())));

/** The answers a client gets from a served database. */
async function answers(base: string, f: Fixture) {
  const paths = [
    '/v1/documents?limit=100',
    '/v1/faqs?limit=100',
    '/v1/webhooks',
    '/v1/conversations?limit=100',
    `/v1/conversations/${f.convs[0]}`,
    `/v1/conversations/${f.convs[CONVERSATIONS - 1]}`,
    `/v1/analytics/overview?from=${new Date(T0 - 3_600_000).toISOString()}&to=${new Date(T0 + 86_400_000).toISOString()}`,
  ];
  const out: Record<string, unknown> = {};
  for (const p of paths) {
    const r = await fetch(`${base}${p}`, { headers: { authorization: `Bearer ${KEY}` } });
    out[p] = { status: r.status, body: await r.json() };
  }
  return out;
}

/** SQLite: whether another connection holds the database's write lock (a BEGIN IMMEDIATE fails at once). */
function writeLockProbe(file: string) {
  const probe = new SQLite(file, { timeout: 0 });
  return {
    held(): boolean {
      try {
        probe.exec('begin immediate');
      } catch (err) {
        if ((err as { code?: string }).code === 'SQLITE_BUSY') return true;
        throw err;
      }
      probe.exec('rollback');
      return false;
    },
    close: () => probe.close(),
  };
}

for (const dialect of DIALECTS) {
  describe(`an upgrade killed mid-migration (${dialect})`, () => {
    test('leaves the old version\'s database untouched; the next start completes it, rows kept, answers as after a clean upgrade', async (t) => {
      assertBuildIsFresh();
      const f = fixture();
      const started = Date.now();
      const mark = (what: string) => t.diagnostic(`${Date.now() - started} ms: ${what}`);
      const crashed = await freshDatabase(dialect);
      const clean = await freshDatabase(dialect);
      const children: ChildProcess[] = [];
      let blocker: pg.Client | undefined;
      try {
        await Promise.all([seedOldVersion(crashed.url, f, dialect), seedOldVersion(clean.url, f, dialect)]);
        mark('seeded');
        const before = await rowsOf(crashed.url);
        const oldNames = Object.keys(migrations).slice(0, Object.keys(migrations).indexOf(OLD_LEVEL) + 1);
        const tag = randomBytes(4).toString('hex');
        const withName = (url: string, name: string) => (dialect === 'postgres' ? `${url}&application_name=${name}_${tag}` : url);

        let killedIn: string;
        // The copy upgraded without a crash, to compare answers with.
        const control = spawnServe({ DATABASE_URL: clean.url });
        children.push(control.child);
        let zombie: number | undefined;
        if (dialect === 'sqlite') {
          const file = sqliteFileOf(crashed.url)!;
          const wal = () => { try { return statSync(`${file}-wal`).size; } catch { return 0; } }; // prettier-ignore
          const probe = writeLockProbe(file);
          try {
            const first = spawnServe({ DATABASE_URL: crashed.url });
            children.push(first.child);
            const walBefore = wal();
            let heldSince = 0;
            await waitUntil(() => {
              if (first.child.exitCode !== null) assert.fail(`serve finished its migrations before it could be killed: ${first.stderr()}`);
              if (!probe.held()) return (heldSince = 0), false;
              heldSince ||= Date.now();
              // Long enough to be past 0006 and 0007, and with uncommitted pages in the WAL.
              if (Date.now() - heldSince < 300 || wal() <= walBefore + 4096) return false;
              // Frozen, it cannot commit between the check and the kill.
              first.child.kill('SIGSTOP');
              if (probe.held()) return true;
              first.child.kill('SIGCONT');
              return false;
            }, 'serve holding the write lock of its migrations', 60_000, 2);
            killedIn = `the migrations' write transaction, after holding it ${Date.now() - heldSince} ms (WAL ${walBefore} → ${wal()} bytes)`;
            first.child.kill('SIGKILL');
            await exited(first.child);
            assert.equal(first.child.signalCode, 'SIGKILL');
            assert.equal(probe.held(), false, 'the write lock died with the process');
          } finally {
            probe.close();
          }
        } else {
          const schema = /search_path=(\w+)/.exec(decodeURIComponent(crashed.url))![1]!;
          blocker = new pg.Client({ connectionString: PG_URL });
          await blocker.connect();
          await blocker.query('begin');
          await blocker.query(`lock table ${schema}.messages in access share mode`);
          const admin = new pg.Client({ connectionString: PG_URL });
          await admin.connect();
          try {
            const backend = async (name: string, waitEvent: string) =>
              (await admin.query<{ pid: number }>(`select pid from pg_stat_activity where application_name = $1 and wait_event_type = 'Lock' and wait_event = $2`, [`${name}_${tag}`, waitEvent])).rows[0]?.pid;
            const first = spawnServe({ DATABASE_URL: withName(crashed.url, 'parley_upgrade') });
            children.push(first.child);
            zombie = await waitUntil(() => {
              if (first.child.exitCode !== null) assert.fail(`serve exited: ${first.stderr()}`);
              return backend('parley_upgrade', 'relation');
            }, "serve's migration waiting in 0008's ALTER TABLE messages", 120_000); // after any other schema's migration: one lock id for the server
            killedIn = '0008 (0006 and 0007 done, uncommitted), waiting for its table lock';
            first.child.kill('SIGKILL');
            await exited(first.child);
            // Its server process lives on, waiting for the table, holding the migration's advisory lock (one id for
            // every schema of the cluster: other deployments' and tests' migrations wait too, so this is kept short).
            assert.equal((await admin.query('select 1 from pg_stat_activity where pid = $1', [zombie])).rowCount, 1);
            assert.deepEqual(await applied(crashed.url), oldNames, 'nothing of 0006–0008 is visible');
            // Once it gets its table it finds its client gone and rolls back, letting go of every lock.
            await blocker.query('rollback');
            await blocker.end();
            blocker = undefined;
            await waitUntil(async () => (await admin.query('select 1 from pg_stat_activity where pid = $1', [zombie])).rowCount === 0, "the killed process's session to end");
            assert.equal((await admin.query("select 1 from pg_locks where locktype = 'advisory' and pid = $1", [zombie])).rowCount, 0);
          } finally {
            await admin.end();
          }
        }
        // Nothing of the interrupted upgrade is there: the old version's migrations, tables and rows, as they were.
        assert.deepEqual(await applied(crashed.url), oldNames, 'no migration past the old level is recorded');
        assert.deepEqual(await columnsOf(crashed.url, 'messages'), ['id', 'account_id', 'conversation_id', 'role', 'content', 'sources', 'created_at', 'workflow_id'], '0008 added no column');
        assert.ok((await columnsOf(crashed.url, 'accounts')).includes('knowledge_version'), '0006 dropped no column');
        assert.deepEqual(await columnsOf(crashed.url, 'knowledge_versions'), [], '0006 left no table behind');
        assert.deepEqual(await rowsOf(crashed.url), before, 'every row as the old version left it');
        if (dialect === 'sqlite') {
          const check = new SQLite(sqliteFileOf(crashed.url)!, { readonly: true });
          assert.equal(check.pragma('integrity_check', { simple: true }), 'ok');
          check.close();
        }
        // Started again, it completes the upgrade.
        const restarted = spawnServe({ DATABASE_URL: crashed.url });
        children.push(restarted.child);
        await restarted.listening;
        assert.match(restarted.stderr(), new RegExp(`applied database migrations ${Object.keys(migrations).slice(oldNames.length).join(', ')}`));
        mark('restarted');
        assert.deepEqual(await applied(crashed.url), Object.keys(migrations), 'the upgrade completed');
        const after = await rowsOf(crashed.url);
        const { knowledge_version: _dropped, ...accountAfterUpgrade } = before.accounts![0] as Record<string, unknown>;
        assert.deepEqual(
          after,
          {
            ...before,
            accounts: [{ ...accountAfterUpgrade, deletion_started_at: null }],
            webhooks: before.webhooks!.map((w) => ({ ...(w as Record<string, unknown>), previous_secret: null, secret_changed_at: null })),
          },
          'every row kept (0006 moved the knowledge version to its own table; 0015 added the webhooks\' previous_secret and secret_changed_at, null: never rotated; 0016 deletion_started_at, null: no deletion under way)',
        );

        // The same answers as the database upgraded without a crash.
        const [aUrl, bUrl] = await Promise.all([restarted.listening, control.listening]);
        const [got, want] = await Promise.all([answers(aUrl, f), answers(bUrl, f)]);
        for (const [path, r] of Object.entries(want)) assert.equal((r as { status: number }).status, 200, `${path}: ${JSON.stringify(r)}`);
        assert.deepEqual(got, want);
        const transcript = (got[`/v1/conversations/${f.convs[0]}`] as { body: { data: { messages: Array<{ id: string }> } } }).body.data.messages;
        assert.deepEqual(transcript.map((m) => m.id), [...transcript.map((m) => m.id)].sort(), 'the transcript in its old order (0008 numbered it)');
        assert.deepEqual(await Promise.all([stopChild(restarted.child), stopChild(control.child)]), [0, 0]);
        t.diagnostic(`${dialect}: killed in ${killedIn}`);
      } finally {
        await blocker?.query('rollback').catch(() => undefined);
        await blocker?.end().catch(() => undefined);
        for (const c of children) {
          if (c.exitCode === null && !c.signalCode) {
            c.kill('SIGKILL');
            await exited(c);
          }
        }
        await crashed.cleanup();
        await clean.cleanup();
      }
    });
  });
}
