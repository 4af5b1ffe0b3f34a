import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import { resourceError } from '../../src/db/resource-errors.js';
import { createTestApp, useTestApp, type TestApp, type TestResponse } from '../helpers/app.js';
import { DIALECTS, PG_URL } from '../helpers/db.js';
import { fillDatabase, raiseOnInsert } from '../helpers/full.js';
import { captureLog } from '../helpers/log.js';

const LEAK = /at \S+ \(|\.ts:\d+|node_modules|SELECT|INSERT|UPDATE|sqlite|SQLITE|relation|could not extend|No space|stack|\b53\d{3}\b|\b57P0\d\b/i;

/** A database's resource failure as the client gets it: the failure envelope, a 500 it may retry after Retry-After. */
function assertRetryLater(r: TestResponse, retryAfter: number) {
  assert.equal(r.status, 500, r.text);
  assert.equal(r.body?.success, false, r.text);
  assert.equal(r.body.error.code, 'SERVER_ERROR');
  assert.match(r.body.error.message, new RegExp(`^the service cannot handle this request right now; retry in ${retryAfter} s \\(request \\S+\\)$`));
  assert.equal(r.headers.get('retry-after'), String(retryAfter));
  assert.doesNotMatch(r.text, LEAK);
}

test('the database errors that mean "out of a resource, come back later" and only those', () => {
  const of = (code: string) => resourceError(Object.assign(new Error('x'), { code }));
  for (const [code, problem] of [
    ['SQLITE_FULL', 'full'],
    ['53100', 'full'],
    ['SQLITE_NOMEM', 'out-of-memory'],
    ['53200', 'out-of-memory'],
    ['53300', 'too-many-connections'],
    ['53000', 'insufficient-resources'],
    ['53400', 'insufficient-resources'],
    ['57P01', 'unavailable'],
    ['57P02', 'unavailable'],
    ['57P03', 'unavailable'],
    ['08006', 'unavailable'],
    ['08001', 'unavailable'],
    ['ECONNREFUSED', 'unavailable'],
    ['SQLITE_BUSY', 'busy'],
  ] as const) {
    assert.equal(of(code)?.problem, problem, code);
    assert.equal(of(code)?.retryAfterSeconds, problem === 'full' ? 30 : 5, code);
    assert.ok(of(code)?.operatorMessage.endsWith(`(${code})`), code);
  }
  for (const code of ['SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_IOERR', 'SQLITE_ERROR', '23505', '40P01', '57014', 'P0001', 'ECONNRESET']) {
    assert.equal(of(code), null, code);
  }
  assert.equal(resourceError(new Error('no code')), null);
  assert.equal(resourceError(null), null);
});

for (const dialect of DIALECTS) {
  describe(`a full database (${dialect})`, () => {
    const log = captureLog();
    const t = useTestApp(dialect, { log: log.logger, appLogger: log.logger });
    // Rows that cannot fit in the pages a SQLite file already has (each needs overflow pages).
    const bigContent = 'Returns are accepted within 30 days. '.repeat(6_000);
    const bigAnswer = 'a'.repeat(20_000);
    const bigMessage = 'where is my order? '.repeat(200);

    test('writes get a 500 envelope with Retry-After and a generic message, the log says the database is full; nothing half-written; the same process takes writes again once there is room', async () => {
      const doc = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Returns', content: 'Within 30 days.' } });
      assert.equal(doc.status, 201, doc.text);
      const docId = doc.body.data.id as string;
      const conv = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: { customerId: 'c1' } });
      assert.equal(conv.status, 201, conv.text);
      const convId = conv.body.data.conversation.id as string;
      const messagesBefore = (await t.request('GET', `/v1/conversations/${convId}`, { key: t.key })).body.data.messages.length as number;
      const totals = async () => ({
        documents: (await t.request('GET', '/v1/documents', { key: t.key })).body.data.total as number,
        faqs: (await t.request('GET', '/v1/faqs', { key: t.key })).body.data.total as number,
      });
      const before = await totals();

      const lift = await fillDatabase(t.database);
      const logged = log.lines.length;
      try {
        const writes: Array<[string, string, unknown, Record<string, string>?]> = [
          ['POST', '/v1/documents', { title: 'Big', content: bigContent }],
          ['POST', '/v1/documents', { title: 'Big, with a key', content: bigContent }, { 'idempotency-key': 'full-doc-1' }],
          ['PUT', `/v1/documents/${docId}`, { content: bigContent }],
          ['POST', '/v1/faqs', { question: 'How long do refunds take?', answer: bigAnswer, category: 'billing' }],
          ['POST', `/v1/chat/conversations/${convId}/messages`, { content: bigMessage }],
        ];
        for (const [method, path, body, headers] of writes) {
          const r = await t.request(method, path, { key: t.key, body, ...(headers ? { headers } : {}) });
          assertRetryLater(r, 30);
        }
        // Reads still work, and show that nothing of the refused writes is there.
        assert.deepEqual(await totals(), before);
        const kept = await t.request('GET', `/v1/documents/${docId}`, { key: t.key });
        assert.equal(kept.body.data.content, 'Within 30 days.');
        // No customer message without its reply, no reply without its message.
        assert.equal((await t.request('GET', `/v1/conversations/${convId}`, { key: t.key })).body.data.messages.length, messagesBefore);
        // One log line per refused request, saying what happened and what to do, with the database's own code.
        const lines = log.lines.slice(logged).filter((l) => l.level === 50);
        assert.equal(lines.length, writes.length, JSON.stringify(lines.map((l) => l.msg)));
        for (const l of lines) {
          assert.match(l.msg, /^the database is full \(no space left for it\): writes are refused until space is freed/);
          assert.deepEqual(l.database, { problem: 'full', code: dialect === 'sqlite' ? 'SQLITE_FULL' : '53100' });
          assert.ok(l.reqId);
        }
        assert.equal(log.lines.slice(logged).some((l) => l.msg === 'unhandled error'), false);
      } finally {
        await lift();
      }

      // Room again: the same requests go through, in the same process. The one with an Idempotency-Key runs (its key
      // was released with the 500), and a retry of it is answered from its record.
      assert.equal((await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Big', content: bigContent } })).status, 201);
      const keyed = { key: t.key, body: { title: 'Big, with a key', content: bigContent }, headers: { 'idempotency-key': 'full-doc-1' } };
      const first = await t.request('POST', '/v1/documents', keyed);
      assert.equal(first.status, 201, first.text);
      const again = await t.request('POST', '/v1/documents', keyed);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(again.body.data.id, first.body.data.id);
      assert.equal((await t.request('PUT', `/v1/documents/${docId}`, { key: t.key, body: { content: bigContent } })).status, 200);
      assert.equal((await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'How long do refunds take?', answer: bigAnswer, category: 'billing' } })).status, 201);
      const sent = await t.request('POST', `/v1/chat/conversations/${convId}/messages`, { key: t.key, body: { content: bigMessage } });
      assert.equal(sent.status, 200, sent.text);
      assert.equal((await t.request('GET', `/v1/conversations/${convId}`, { key: t.key })).body.data.messages.length, messagesBefore + 2);
      assert.deepEqual(await totals(), { documents: before.documents + 2, faqs: before.faqs + 1 });
    });
  });
}

describe('SQLite locked by another process past the busy timeout (sqlite)', () => {
  test('a write waits out busy_timeout (5 s), then gets a 500 with Retry-After: 5 and a log line saying so; served once the lock is gone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-busy-'));
    const log = captureLog();
    const t = await createTestApp('sqlite', { sqliteFile: join(dir, 'parley.db'), appLogger: log.logger });
    // Another process's connection (a backup, a parley command) holding the write lock.
    const other = new Database(join(dir, 'parley.db'));
    try {
      const { key } = await t.account();
      other.exec('begin immediate');
      const logged = log.lines.length;
      assertRetryLater(await t.request('POST', '/v1/documents', { key, body: { title: 'x', content: 'y' } }), 5);
      const line = log.lines.slice(logged).find((l) => l.level === 50);
      assert.match(line?.msg ?? '', /^the SQLite database stayed locked by another process past the busy timeout/);
      assert.deepEqual(line?.database, { problem: 'busy', code: 'SQLITE_BUSY' });
      other.exec('rollback');
      assert.equal((await t.request('POST', '/v1/documents', { key, body: { title: 'x', content: 'y' } })).status, 201);
    } finally {
      other.close();
      await t.close();
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('PostgreSQL resource errors (postgres)', () => {
  const log = captureLog();
  const t = useTestApp('postgres', { log: log.logger, appLogger: log.logger });

  for (const [errcode, sqlstate, problem, retryAfter, says] of [
    ['out_of_memory', '53200', 'out-of-memory', 5, /^the database ran out of memory/],
    ['too_many_connections', '53300', 'too-many-connections', 5, /^the database refused a connection: it has no slot left/],
    ['insufficient_resources', '53000', 'insufficient-resources', 5, /^the database lacks a resource/],
    ['configuration_limit_exceeded', '53400', 'insufficient-resources', 5, /^the database lacks a resource/],
    ['admin_shutdown', '57P01', 'unavailable', 5, /^the database is shutting down, restarting, not yet accepting connections or cannot be reached/],
    ['cannot_connect_now', '57P03', 'unavailable', 5, /^the database is shutting down, restarting, not yet accepting connections or cannot be reached/],
  ] as const) {
    test(`${errcode} (${sqlstate}): a 500 with Retry-After: ${retryAfter}, and the log names it`, async () => {
      const lift = await raiseOnInsert(t.database.db, errcode, `simulated ${errcode}`);
      const logged = log.lines.length;
      try {
        assertRetryLater(await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'x', content: 'y' } }), retryAfter);
      } finally {
        await lift();
      }
      const line = log.lines.slice(logged).find((l) => l.level === 50);
      assert.match(line?.msg ?? '', says);
      assert.deepEqual(line?.database, { problem, code: sqlstate });
      assert.equal((await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'x', content: 'y' } })).status, 201);
    });
  }

  test('any other database error stays a plain 500, without Retry-After', async () => {
    const lift = await raiseOnInsert(t.database.db, 'XX000', 'simulated internal error');
    const logged = log.lines.length;
    try {
      const r = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'x', content: 'y' } });
      assert.equal(r.status, 500);
      assert.match(r.body.error.message, /^internal server error \(request \S+\)$/);
      assert.equal(r.headers.get('retry-after'), null);
    } finally {
      await lift();
    }
    assert.equal(log.lines.slice(logged).find((l) => l.level === 50)?.msg, 'unhandled error');
  });

  test('a connection the server refuses for lack of slots (a real 53300): 500 with Retry-After, and served again once it has slots', async () => {
    // A role of this test's own, allowed one connection, which the test takes: the app's pool can open none.
    const role = `parley_t_${randomBytes(4).toString('hex')}`;
    const schema = t.database.schema!;
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    let other: TestApp | undefined;
    let holder: pg.Client | undefined;
    try {
      await admin.query(`create role ${role} login connection limit 1`);
      await admin.query(`grant usage on schema ${schema} to ${role}`);
      await admin.query(`grant all on all tables in schema ${schema} to ${role}`);
      await admin.query(`grant all on all sequences in schema ${schema} to ${role}`);
      const url = new URL(PG_URL);
      url.username = role;
      const roleUrl = `${url.toString()}?options=${encodeURIComponent(`-c search_path=${schema}`)}`;
      holder = new pg.Client({ connectionString: roleUrl });
      await holder.connect();
      other = await createTestApp('postgres', { sameDatabaseAs: { database: { url: roleUrl } } as TestApp, appLogger: log.logger });
      const logged = log.lines.length;
      assertRetryLater(await other.request('GET', '/v1/documents', { key: t.key }), 5);
      const line = log.lines.slice(logged).find((l) => l.level === 50);
      assert.deepEqual(line?.database, { problem: 'too-many-connections', code: '53300' });
      await holder.end();
      holder = undefined;
      assert.equal((await other.request('GET', '/v1/documents', { key: t.key })).status, 200);
    } finally {
      await holder?.end();
      await other?.close();
      await admin.query(`drop owned by ${role}`);
      await admin.query(`drop role ${role}`);
      await admin.end();
    }
  });
});
