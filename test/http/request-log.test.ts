import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';
import { captureLog } from '../helpers/log.js';

for (const dialect of DIALECTS) {
  describe(`the request log (${dialect})`, () => {
    // The logger `parley serve` passes to Fastify, at the default level, its lines captured.
    const log = captureLog();
    const t = useTestApp(dialect, { log: log.logger, appLogger: log.logger });

    /**
     * The lines of the request with this X-Request-Id (echoed as its reqId). The line is written when the answer has
     * gone out, which the client may see first: wait for one, then a little longer, so a second one would be seen too.
     */
    async function linesOf(reqId: string) {
      const of = () => log.lines.filter((l) => l.reqId === reqId);
      for (let i = 0; i < 200 && of().length === 0; i++) await sleep(10);
      await sleep(50);
      return of();
    }

    test('one line per request, at info, when it is answered: reqId, method, path without its query, client address, status, time; never the key or the body', async () => {
      const secret = 'body-secret-7f3a9c';
      const created = await t.request('POST', '/v1/documents', {
        key: t.key,
        headers: { 'x-request-id': 'log-create' },
        body: { title: 'Returns', content: `Within 30 days. ${secret}` },
      });
      assert.equal(created.status, 201, created.text);
      const id = created.body.data.id as string;
      const requests: Array<[reqId: string, method: string, path: string, status: number, key?: string]> = [
        ['log-list', 'GET', '/v1/documents?limit=5&offset=0', 200],
        ['log-get', 'GET', `/v1/documents/${id}`, 200],
        ['log-erase', 'DELETE', '/v1/conversations?customerId=customer%40example.com', 200],
        ['log-bad-query', 'GET', '/v1/documents?limit=many', 400],
        ['log-bad-key', 'GET', '/v1/documents', 401, 'sk_live_not-a-real-key-0000'],
        ['log-no-route', 'GET', '/v1/nothing-here?x=1', 404],
      ];
      for (const [reqId, method, path, status, key] of requests) {
        const r = await t.request(method, path, { key: key ?? t.key, headers: { 'x-request-id': reqId } });
        assert.equal(r.status, status, `${method} ${path}: ${r.text}`);
      }

      for (const [reqId, method, path, status] of [['log-create', 'POST', '/v1/documents', 201] as const, ...requests]) {
        const lines = await linesOf(reqId);
        assert.equal(lines.length, 1, `${method} ${path}: ${JSON.stringify(lines)}`);
        const line = lines[0]!;
        assert.equal(line.msg, 'request completed');
        assert.equal(line.level, 30, `${method} ${path} ${status} is logged at info`);
        assert.deepEqual(line.req, { method, url: path.split('?')[0], remoteAddress: '127.0.0.1' });
        assert.deepEqual(line.res, { statusCode: status });
        assert.equal(typeof line.responseTime, 'number');
        assert.ok(line.responseTime >= 0 && line.responseTime < 60_000, String(line.responseTime));
      }

      const all = JSON.stringify(log.lines);
      assert.doesNotMatch(all, /incoming request/);
      for (const leak of [t.key, 'sk_live_not-a-real-key-0000', 'Bearer', secret, 'customer%40example.com', 'customer@example.com', 'limit=']) {
        assert.equal(all.includes(leak), false, `the log has ${leak}`);
      }
    });

    test('a 5xx: its request line at info, and its cause at error (as before) with the same reqId, method and path', async () => {
      // A write the database refuses with an error that means nothing to the service: an unhandled error, a 500.
      const fn = `parley_test_fail_${Math.random().toString(36).slice(2, 10)}`;
      if (dialect === 'sqlite') {
        await sql.raw(`create trigger ${fn} before insert on documents begin select raise(abort, 'simulated failure'); end`).execute(t.database.db);
      } else {
        await sql.raw(`create function ${fn}() returns trigger language plpgsql as $$ begin raise exception 'simulated failure' using errcode = 'XX000'; end $$`).execute(t.database.db);
        await sql.raw(`create trigger ${fn} before insert on documents for each row execute function ${fn}()`).execute(t.database.db);
      }
      try {
        const r = await t.request('POST', '/v1/documents', { key: t.key, headers: { 'x-request-id': 'log-fail' }, body: { title: 'x', content: 'y' } });
        assert.equal(r.status, 500, r.text);
      } finally {
        await sql.raw(dialect === 'sqlite' ? `drop trigger ${fn}` : `drop function ${fn}() cascade`).execute(t.database.db);
      }
      const lines = await linesOf('log-fail');
      assert.deepEqual(
        lines.map((l) => [l.level, l.msg]),
        [
          [50, 'unhandled error'],
          [30, 'request completed'],
        ],
      );
      for (const l of lines) assert.deepEqual(l.req, { method: 'POST', url: '/v1/documents', remoteAddress: '127.0.0.1' });
      assert.equal(lines[0]!.err?.message?.includes('simulated failure'), true);
      assert.deepEqual(lines[1]!.res, { statusCode: 500 });
    });
  });
}
