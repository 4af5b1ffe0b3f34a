import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Migrator, sql, type Kysely } from 'kysely';
import { rundownsRepository } from '../../src/modules/rundowns/rundowns.repository.js';
import { migrationProvider, migrations } from '../../src/db/migrations/index.js';
import { TABLE_NAMES } from '../../src/db/copy.js';
import { openDatabase, type Database, type DialectName } from '../../src/db/database.js';
import type { DB } from '../../src/db/schema.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { startServer, type TestServer } from '../modules/webhooks/helpers.js';
import { assertBuildIsFresh, cli, ENTRY, freshDatabase, oneJson, startServe } from './cli-suite.js';

/** Every table's rows in a stable order (each table's columns sorted, rows by their JSON), for comparing two databases. */
async function dump(db: Kysely<DB>): Promise<Record<string, unknown[]>> {
  const out: Record<string, unknown[]> = {};
  for (const table of TABLE_NAMES) {
    const rows = (await db.selectFrom(table).selectAll().execute()) as Record<string, unknown>[];
    out[table] = rows
      .map((r) => JSON.stringify(Object.fromEntries(Object.entries(r).sort(([a], [b]) => a.localeCompare(b)))))
      .sort()
      .map((j) => JSON.parse(j));
  }
  return out;
}

/** Fills an account through the API so that every table holds rows, as a running service writes them. */
async function fill(t: TestApp, receiver: TestServer): Promise<string> {
  const a = await t.account();
  const key = a.key;
  const ok = async (method: string, path: string, body?: unknown, headers?: Record<string, string>) => {
    const r = await t.request(method, path, { key, body, ...(headers ? { headers } : {}) });
    assert.ok(r.status < 300, `${method} ${path}: ${r.status} ${r.text}`);
    return r.body.data;
  };
  await ok('POST', '/v1/documents', { title: 'Returns', content: 'Unused items can be returned within 30 days for a full refund.', status: 'active' }, { 'idempotency-key': 'doc-1' });
  await ok('POST', '/v1/faqs', { question: 'How long do refunds take?', answer: '5 to 10 business days.', category: 'returns', status: 'approved' });
  const wh = await ok('POST', '/v1/webhooks', { url: `${receiver.url}/hooks`, events: ['conversation.started', 'conversation.message', 'escalation'], secret: 'a-long-random-secret' });
  await ok('POST', `/v1/webhooks/${wh.id}/test`);
  const wf = await ok('POST', '/v1/workflows', { slug: 'book-demo', name: 'Book a demo', triggers: ['book a demo'], fields: [{ key: 'email', type: 'email' }], reply: 'Happy to!' });
  assert.ok(wf.id);
  const conv = (await ok('POST', '/v1/chat/conversations', { customerId: 'cus_42' })).conversation;
  await ok('POST', `/v1/chat/conversations/${conv.id}/messages`, { content: 'how long until I get my money back?' });
  await ok('POST', `/v1/chat/conversations/${conv.id}/messages`, { content: 'I want to book a demo, I am jo@acme.test' });
  await ok('POST', `/v1/chat/conversations/${conv.id}/messages`, { content: 'do you sell purple unicorn saddles for giraffes' });
  await ok('POST', `/v1/chat/conversations/${conv.id}/escalate`, { reason: 'customer_request' });
  const from = new Date(Date.now() - 3_600_000).toISOString();
  const to = new Date(Date.now() + 1000).toISOString();
  await new Promise((r) => setTimeout(r, 1100)); // the rundown's period must be over
  await ok('POST', '/v1/rundowns', { from, to });
  // A worker's claim on a scheduled window (held while it builds the digest): copied like any row, and expired by then.
  const now = Date.now();
  assert.ok(await rundownsRepository.claimWindow(t.ctx.db, a.accountId, { from: now - 2 * 86_400_000, to: now - 86_400_000 }, 'worker-1', now, now + 300_000));
  return key;
}

async function countRows(db: Kysely<DB>): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const table of TABLE_NAMES) out[table] = Number((await db.selectFrom(table).select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow()).n);
  return out;
}

const zeros = () => Object.fromEntries(TABLE_NAMES.map((t) => [t, 0]));

const other = (d: DialectName): DialectName => (d === 'sqlite' ? 'postgres' : 'sqlite');

for (const from of ['sqlite', 'postgres'] as const) {
  const into = other(from);
  describe(`parley copy: ${from} → ${into}`, () => {
    let dir: string;
    let source: TestApp;
    let receiver: TestServer;
    let key: string;
    const targets: Array<{ cleanup(): Promise<void> }> = [];
    const newTarget = async () => {
      const t = await freshDatabase(into);
      targets.push(t);
      return t.url;
    };
    const open = (url: string): Database => openDatabase(url, { poolSize: 2 });

    before(async () => {
      assertBuildIsFresh();
      dir = mkdtempSync(join(tmpdir(), 'parley-copy-'));
      source = await createTestApp(from, from === 'sqlite' ? { sqliteFile: join(dir, 'source.db') } : {});
      receiver = await startServer();
      key = await fill(source, receiver);
    });
    after(async () => {
      await source?.close();
      await receiver?.close();
      for (const t of targets) await t.cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    test('every row of every table arrives as it was, and a node on the copy answers as the source did', async () => {
      const before = await dump(source.ctx.db);
      for (const table of TABLE_NAMES) assert.ok(before[table]!.length > 0, `the source's ${table} is empty: fill() must reach every table`);
      const url = await newTarget();
      const r = await cli(['copy', '--from', source.database.url, '--json'], { DATABASE_URL: url });
      assert.equal(r.code, 0, r.stderr);
      const said = oneJson(r);
      assert.deepEqual(said.tables, Object.fromEntries(TABLE_NAMES.map((t) => [t, before[t]!.length])));
      assert.equal(said.rows, Object.values(before).reduce((n, rows) => n + rows.length, 0));
      assert.deepEqual(said.sourceChangedDuringCopy, []);
      assert.doesNotMatch(r.stderr, /warning/);
      assert.doesNotMatch(r.stdout, /password/);

      const copy = open(url);
      try {
        assert.deepEqual(await dump(copy.db), before);
      } finally {
        await copy.close();
      }

      // The account's key opens it on a node serving the copy, which answers what the source's node answers.
      const node = await startServe({ DATABASE_URL: url });
      try {
        for (const path of ['/v1/documents', '/v1/faqs', '/v1/conversations', '/v1/webhooks', '/v1/workflows', '/v1/rundowns', '/v1/events?limit=100', '/v1/analytics/overview']) {
          const here = await source.request('GET', path, { key });
          const there = await fetch(`${node.url}${path}`, { headers: { authorization: `Bearer ${key}` } });
          assert.equal(there.status, 200, path);
          assert.deepEqual(await there.json(), here.body, path);
        }
      } finally {
        await node.stop();
      }
    });

    test('a target that already holds data is refused, and nothing in it changes', async () => {
      const url = await newTarget();
      const first = await cli(['copy', '--from', source.database.url], { DATABASE_URL: url });
      assert.equal(first.code, 0, first.stderr);
      const t = open(url);
      try {
        const counts = await countRows(t.db);
        const again = await cli(['copy', '--from', source.database.url, '--json'], { DATABASE_URL: url });
        assert.equal(again.code, 2);
        assert.match(oneJson(again).error, /^the target already holds data \(accounts, api_keys, .*\): copy into a new, empty database$/);
        assert.deepEqual(await countRows(t.db), counts);
      } finally {
        await t.close();
      }
    });

    test('a copy the target refuses half-way leaves the target empty', async () => {
      const url = await newTarget();
      const migrated = await cli(['migrate'], { DATABASE_URL: url });
      assert.equal(migrated.code, 0, migrated.stderr);
      const t = open(url);
      try {
        // A trigger refuses the first event, after accounts, keys, knowledge and conversations went in.
        if (into === 'sqlite') {
          await sql`create trigger refuse_events before insert on events begin select raise(abort, 'refused by the test'); end`.execute(t.db);
        } else {
          await sql`create function refuse_events() returns trigger language plpgsql as $$ begin raise exception 'refused by the test'; end $$`.execute(t.db);
          await sql`create trigger refuse_events before insert on events for each row execute function refuse_events()`.execute(t.db);
        }
        const r = await cli(['copy', '--from', source.database.url, '--json'], { DATABASE_URL: url });
        assert.equal(r.code, 2, r.stderr);
        assert.match(oneJson(r).error, /^the target refused a row of events \(one of evt_\w+ … evt_\w+\): .*refused by the test/);
        assert.match(r.stderr, /copied messages/, 'the tables before events were copied before the refusal');
        assert.deepEqual(await countRows(t.db), zeros());
      } finally {
        await t.close();
      }
    });
  });
}

describe('parley copy: what is refused before anything is written', () => {
  let dir: string;
  before(() => {
    assertBuildIsFresh();
    dir = mkdtempSync(join(tmpdir(), 'parley-copy-'));
  });
  after(() => rmSync(dir, { recursive: true, force: true }));

  const run = async (args: string[], target = `sqlite:${join(dir, `t${Math.random().toString(36).slice(2)}.db`)}`) => {
    const r = await cli(['copy', ...args, '--json'], { DATABASE_URL: target });
    return { code: r.code, error: oneJson(r).error as string, target };
  };

  test('no --from, a URL of another kind, a missing file, an in-memory database, the target itself', async () => {
    assert.match((await run([])).error, /^--from is required/);
    assert.match((await run(['--from', 'mysql://x'])).error, /must start with sqlite: or postgres:\/\//);
    assert.match((await run(['--from', `sqlite:${join(dir, 'none.db')}`])).error, /^--from: no database at /);
    assert.match((await run(['--from', 'sqlite::memory:'])).error, /in-memory/);
    const self = `sqlite:${join(dir, 'self.db')}`;
    assert.match((await run(['--from', self], self)).error, /^--from is DATABASE_URL itself/);
    const r = await run(['--from', 'postgres://postgres@127.0.0.1:1/none']);
    assert.equal(r.code, 2);
    assert.match(r.error, /^cannot read the source database: /);
  });

  test('a source an older version left, or a newer one wrote, is refused and no target is set up', async () => {
    const file = join(dir, 'older.db');
    const older = openDatabase(`sqlite:${file}`);
    try {
      const migrator = new Migrator({ db: older.db, provider: migrationProvider });
      const names = Object.keys(migrations);
      assert.equal((await migrator.migrateTo(names.at(-2)!)).error, undefined);
      const r = await run(['--from', `sqlite:${file}`]);
      assert.equal(r.code, 2);
      assert.ok(r.error.startsWith(`an older version of Parley wrote the source, which needs this version's migrations (${names.at(-1)}) first`), r.error);
      assert.equal(existsSync(r.target.slice('sqlite:'.length)), false, 'no target database was created');
      assert.equal((await migrator.migrateToLatest()).error, undefined);
      await sql`insert into kysely_migration (name, timestamp) values ('0099_from_the_future', '2030-01-01T00:00:00.000Z')`.execute(older.db);
      const newer = await run(['--from', `sqlite:${file}`]);
      assert.match(newer.error, /^a newer version of Parley wrote the source \(migrations 0099_from_the_future are unknown to this one\)/);
    } finally {
      await older.close();
    }
  });
});

/**
 * A SQLite source filled through the API and a migrated PostgreSQL target whose inserts of events each wait `sleep`
 * seconds (a trigger), and a `parley copy` of one into the other under way: `reachedEvents` resolves once the copy has
 * done the tables before the events, so a test acts while the copy's transaction is open. Removes all of it afterwards.
 */
async function duringSlowCopy(
  sleep: number,
  fn: (c: { source: TestApp; key: string; target: Database; targetUrl: string; child: ChildProcess; exited: Promise<number | null>; output: () => { stdout: string; stderr: string } }) => Promise<void>,
) {
  assertBuildIsFresh();
  const dir = mkdtempSync(join(tmpdir(), 'parley-copy-'));
  const source = await createTestApp('sqlite', { sqliteFile: join(dir, 'source.db') });
  const receiver = await startServer();
  const targetDb = await freshDatabase('postgres');
  try {
    const key = await fill(source, receiver);
    const migrated = await cli(['migrate'], { DATABASE_URL: targetDb.url });
    assert.equal(migrated.code, 0, migrated.stderr);
    const target = openDatabase(targetDb.url, { poolSize: 2 });
    try {
      await sql`create function slow_events() returns trigger language plpgsql as $$ begin perform pg_sleep(${sql.lit(sleep)}); return new; end $$`.execute(target.db);
      await sql`create trigger slow_events before insert on events for each row execute function slow_events()`.execute(target.db);
      const child = spawn(process.execPath, [ENTRY, 'copy', '--from', source.database.url, '--json'], {
        env: { PATH: process.env.PATH ?? '', DATABASE_URL: targetDb.url },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      const exited = new Promise<number | null>((r) => child.once('exit', r));
      await new Promise<void>((resolve, reject) => {
        child.stderr.on('data', (c: Buffer) => {
          stderr += c.toString();
          if (stderr.includes('copied messages')) resolve();
        });
        void exited.then((code) => reject(new Error(`copy exited (${code}) before it reached the events: ${stderr}`)));
      });
      await fn({ source, key, target, targetUrl: targetDb.url, child, exited, output: () => ({ stdout, stderr }) });
    } finally {
      await target.close();
    }
  } finally {
    await source.close();
    await receiver.close();
    await targetDb.cleanup();
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('parley copy killed mid-way (postgres target)', () => {
  test('SIGKILL during the copy leaves the target empty; a second run copies everything', async () => {
    await duringSlowCopy(0.2, async ({ source, target, targetUrl, child, exited }) => {
      child.kill('SIGKILL');
      await exited;
      assert.deepEqual(await countRows(target.db), zeros());
      // Once the server has noticed the dead connection and rolled back, a second run finds an empty target.
      await sql`drop trigger slow_events on events`.execute(target.db).catch(() => undefined);
      const again = await cli(['copy', '--from', source.database.url, '--json'], { DATABASE_URL: targetUrl });
      assert.equal(again.code, 0, again.stderr);
      assert.deepEqual(await countRows(target.db), await countRows(source.ctx.db));
    });
  });
});

describe('parley copy beside a node still writing to the source', () => {
  test('the copy is the snapshot it began with, and says which tables the source gained rows in meanwhile', async () => {
    await duringSlowCopy(0.05, async ({ source, key, target, exited, output }) => {
      const documentsBefore = (await countRows(source.ctx.db)).documents!;
      const doc = await source.request('POST', '/v1/documents', { key, body: { title: 'Written during the copy', content: 'Not in it.' } });
      assert.equal(doc.status, 201, doc.text);
      assert.equal(await exited, 0, output().stderr);
      const { stdout, stderr } = output();
      const said = oneJson({ code: 0, stdout, stderr });
      assert.ok(said.sourceChangedDuringCopy.includes('documents'), JSON.stringify(said.sourceChangedDuringCopy));
      assert.match(stderr, /warning: the source was written to during the copy \(.*documents.*\): the copy lacks those writes/);
      assert.equal(said.tables.documents, documentsBefore, 'the copy is the snapshot it began with');
      assert.equal((await countRows(target.db)).documents, documentsBefore);
    });
  });
});
