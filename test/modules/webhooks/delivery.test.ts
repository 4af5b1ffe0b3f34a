import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { aboutOneRecord, connectionLost } from '../../../src/modules/webhooks/delivery.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { freePort, startServer, type TestServer } from './helpers.js';
import { assertVerifies, emit, sleep, startWorker, waitFor } from './delivery-helpers.js';

const SECRET = 'whsec_test_secret_1';

test('a failed batch of attempt records is recorded again one by one only for errors one record or one race causes', () => {
  // A value, a constraint, a deadlock, a trigger's exception (PostgreSQL); a constraint, a trigger, a mismatch (SQLite).
  for (const code of ['22P05', '23505', '40P01', '40001', 'P0001', 'SQLITE_CONSTRAINT_TRIGGER', 'SQLITE_CONSTRAINT_UNIQUE', 'SQLITE_MISMATCH', 'SQLITE_TOOBIG']) {
    assert.equal(aboutOneRecord(Object.assign(new Error('x'), { code })), true, code);
  }
  // A lost connection, a timeout, a query cancelled (statement_timeout), a busy SQLite file, no code at all: one by
  // one, the batch would wait that out once per record.
  for (const code of ['08006', '57014', '53300', 'ECONNRESET', 'ETIMEDOUT', 'SQLITE_BUSY', 'SQLITE_IOERR', undefined]) {
    assert.equal(aboutOneRecord(Object.assign(new Error('x'), { code })), false, String(code));
  }
  assert.equal(aboutOneRecord(new Error('Query read timeout')), false);
  // Written again once, on another connection: a lost connection, not a timeout.
  for (const code of ['08006', '08003', '57P01', 'ECONNRESET', 'EPIPE']) assert.equal(connectionLost(Object.assign(new Error('x'), { code })), true, code);
  assert.equal(connectionLost(new Error('Connection terminated unexpectedly')), true);
  for (const code of ['57014', '23505', 'ETIMEDOUT', undefined]) assert.equal(connectionLost(Object.assign(new Error('Query read timeout'), { code })), false, String(code));
});

for (const dialect of DIALECTS) {
  describe(`webhook deliveries (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { WEBHOOK_RETRY_DELAYS: '0,50ms,50ms,50ms,50ms', WEBHOOK_TIMEOUT: '2s' } });
    let status = 200;
    let rx: TestServer;
    before(async () => {
      rx = await startServer((req, res) => {
        res.writeHead(status, { 'content-type': 'text/plain' });
        res.end(`answer ${status} ${'x'.repeat(5000)}`);
      });
      t.beforeClose(() => rx.close());
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());
    });

    async function hook(url: string, events = ['conversation.started']) {
      const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url, events, secret: SECRET } });
      assert.equal(r.status, 201, r.text);
      return r.body.data.id as string;
    }
    const forHook = (srv: TestServer, path: string) => srv.received.filter((r) => r.url === path);

    test('test send: delivered synchronously, both signature schemes verify, recorded as a test attempt', async () => {
      status = 200;
      const id = await hook(`${rx.url}/test-send`, ['escalation']);
      const r = await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key, body: { message: 'hello' } });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.data.status, 'succeeded');
      assert.equal(r.body.data.event, 'test');
      assert.equal(r.body.data.attempts.length, 1);
      assert.equal(r.body.data.attempts[0].kind, 'test');
      assert.equal(r.body.data.attempts[0].statusCode, 200);
      assert.equal(Buffer.byteLength(r.body.data.attempts[0].responseBody), 4096, 'response body cut to 4 KiB');
      const got = forHook(rx, '/test-send');
      assert.equal(got.length, 1);
      await assertVerifies(got[0]!, SECRET);
      assert.equal(got[0]!.headers['x-service-event'], 'test');
      assert.equal(got[0]!.headers['x-service-delivery-id'], r.body.data.id);
      assert.equal(got[0]!.headers['x-service-event-id'], undefined, 'a test send is no event');
      const payload = JSON.parse(got[0]!.body.toString());
      assert.deepEqual(payload.data, { message: 'hello' });
      assert.equal(payload.event, 'test');
      // bodiless POST works too
      const r2 = await fetch(`${t.baseUrl}/v1/webhooks/${id}/test`, { method: 'POST', headers: { authorization: `Bearer ${t.key}` } });
      assert.equal(r2.status, 200);
      // JSON null is not an object, here as on every other route
      const r3 = await fetch(`${t.baseUrl}/v1/webhooks/${id}/test`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json' }, body: 'null' });
      assert.equal(r3.status, 400);
      const e3 = (await r3.json()) as { success: boolean; error: { code: string; message: string } };
      assert.equal(e3.success, false);
      assert.equal(e3.error.code, 'INVALID_REQUEST');
      assert.match(e3.error.message, /body/);
    });

    test('an event emitted inside a transaction reaches the receiver signed, once, fast', async () => {
      status = 200;
      await hook(`${rx.url}/emit`, ['conversation.started', 'escalation']);
      await hook(`${rx.url}/other-kind`, ['conversation.ended']);
      const started = Date.now();
      const ev = await emit(t, t.accountId, 'conversation.started', { conversationId: 'conv_1', customerId: 'c1' });
      const got = await waitFor(() => forHook(rx, '/emit')[0], 'delivery');
      assert.ok(Date.now() - started < 2_000);
      await assertVerifies(got, SECRET);
      assert.equal(got.body.toString(), ev.body, 'the exact body bytes of the event');
      assert.equal(got.headers['x-service-event'], 'conversation.started');
      await sleep(100);
      assert.equal(forHook(rx, '/emit').length, 1);
      assert.equal(forHook(rx, '/other-kind').length, 0, 'not subscribed');
    });

    test('a receiver answering NUL bytes (binary, gzip) is recorded like any other, and so is the rest of the batch', async () => {
      // PostgreSQL text cannot hold U+0000: storing such an answer as it came failed the whole batch of records, so
      // every delivery in it stayed pending and was sent again at each lease expiry.
      const srv = await startServer((req, res) => {
        res.writeHead(req.url === '/nul-fail' ? 500 : 200);
        res.end(Buffer.from([0x1f, 0x8b, 0x00, 0x61, 0x00]));
      });
      try {
        const nul = await hook(`${srv.url}/nul`, ['conversation.ended']);
        const nulFail = await hook(`${srv.url}/nul-fail`, ['conversation.ended']);
        const plain = await hook(`${rx.url}/beside-nul`, ['conversation.ended']);
        const sent = await t.request('POST', `/v1/webhooks/${nul}/test`, { key: t.key, body: {} });
        assert.equal(sent.status, 200, sent.text);
        assert.equal(sent.body.data.status, 'succeeded');
        assert.equal(sent.body.data.attempts[0].responseBody, '\u001f\ufffd\ufffda\ufffd');
        await emit(t, t.accountId, 'conversation.ended', { n: 1 });
        for (const [id, want] of [[nul, 'succeeded'], [nulFail, 'pending'], [plain, 'succeeded']] as const) {
          const d = await waitFor(async () => {
            const l = await t.request('GET', `/v1/webhooks/${id}/deliveries?limit=1`, { key: t.key });
            return l.body.data.deliveries[0]?.attempts.length ? l.body.data.deliveries[0] : undefined;
          }, `an attempt recorded for ${id}`);
          assert.equal(d.status, want);
        }
      } finally {
        await srv.close();
      }
    });

    test("one attempt record the database refuses fails alone: the batch's other records are written", async () => {
      const refused = await hook(`${rx.url}/refused-record`, ['escalation.submitted']);
      const kept = await hook(`${rx.url}/kept-record`, ['escalation.submitted']);
      // The database refuses the attempt records of one webhook's deliveries (as it refused a NUL byte, say).
      if (dialect === 'sqlite') {
        await sql.raw(`create trigger refuse_record before insert on delivery_attempts when (select webhook_id from deliveries where id = new.delivery_id) = '${refused}' begin select raise(abort, 'refused by the test'); end`).execute(t.ctx.db);
      } else {
        await sql.raw(`create function refuse_record() returns trigger language plpgsql as $$ begin if (select webhook_id from deliveries where id = new.delivery_id) = '${refused}' then raise exception 'refused by the test'; end if; return new; end $$`).execute(t.ctx.db);
        await sql.raw('create trigger refuse_record before insert on delivery_attempts for each row execute function refuse_record()').execute(t.ctx.db);
      }
      try {
        // Several events at once, so the records of both webhooks' deliveries are written in the same batches.
        await Promise.all(Array.from({ length: 6 }, (_, n) => emit(t, t.accountId, 'escalation.submitted', { n })));
        const deliveries = async (id: string) => (await t.request('GET', `/v1/webhooks/${id}/deliveries?limit=10`, { key: t.key })).body.data.deliveries as { status: string; attempts: unknown[] }[];
        const done = await waitFor(async () => {
          const l = await deliveries(kept);
          return l.length === 6 && l.every((d) => d.status === 'succeeded' && d.attempts.length === 1) ? l : undefined;
        }, "every delivery of the webhook whose records are accepted recorded as succeeded");
        assert.equal(done.length, 6);
        await waitFor(async () => forHook(rx, '/refused-record').length >= 6 || undefined, 'the refused webhook sent to');
        await sleep(50);
        for (const d of await deliveries(refused)) {
          assert.equal(d.status, 'pending');
          assert.deepEqual(d.attempts, []);
        }
      } finally {
        await sql.raw('drop trigger refuse_record' + (dialect === 'sqlite' ? '' : ' on delivery_attempts')).execute(t.ctx.db);
        if (dialect !== 'sqlite') await sql.raw('drop function refuse_record()').execute(t.ctx.db);
        // Its pending deliveries would be sent again at each lease expiry: not this file's business any more.
        await t.request('DELETE', `/v1/webhooks/${refused}`, { key: t.key });
      }
    });

    test('a batch of attempt records cut off by a lost connection is written again on another: each delivery recorded once, sent once', { skip: dialect !== 'postgres' && 'PostgreSQL only: SQLite has no connection to lose' }, async () => {
      const lost = await hook(`${rx.url}/lost-connection`, ['workflow.triggered']);
      // The first attempt record written ends its own connection, as a server restart or a failover would (a sequence,
      // so that the rollback of that transaction does not undo the count).
      await sql.raw('create sequence lose_connection_once').execute(t.ctx.db);
      await sql.raw(`create function lose_connection() returns trigger language plpgsql as $$ begin if (select webhook_id from deliveries where id = new.delivery_id) = '${lost}' and nextval('lose_connection_once') = 1 then perform pg_terminate_backend(pg_backend_pid()); perform pg_sleep(5); end if; return new; end $$`).execute(t.ctx.db);
      await sql.raw('create trigger lose_connection before insert on delivery_attempts for each row execute function lose_connection()').execute(t.ctx.db);
      try {
        await Promise.all(Array.from({ length: 4 }, (_, n) => emit(t, t.accountId, 'workflow.triggered', { n })));
        const done = await waitFor(async () => {
          const l = (await t.request('GET', `/v1/webhooks/${lost}/deliveries?limit=10`, { key: t.key })).body.data.deliveries as { id: string; status: string; attempts: unknown[] }[];
          return l.length === 4 && l.every((d) => d.status === 'succeeded' && d.attempts.length === 1) ? l : undefined;
        }, 'every delivery recorded as succeeded, with one attempt');
        // The connection was lost once, and only once.
        assert.equal(Number((await sql<{ n: string }>`select last_value as n from lose_connection_once`.execute(t.ctx.db)).rows[0]!.n) >= 2, true);
        // Past the leases (2 × WEBHOOK_TIMEOUT + 1 s): a delivery whose record was lost would have been sent again by now.
        await sleep(5_500);
        const got = forHook(rx, '/lost-connection').map((r) => r.headers['webhook-id']);
        assert.equal(got.length, 4, JSON.stringify(got));
        assert.deepEqual(new Set(got).size, 4);
        assert.deepEqual(new Set(got), new Set(done.map((d) => d.id)));
      } finally {
        await sql.raw('drop trigger lose_connection on delivery_attempts').execute(t.ctx.db);
        await sql.raw('drop function lose_connection()').execute(t.ctx.db);
        await sql.raw('drop sequence lose_connection_once').execute(t.ctx.db);
      }
    });

    test('a rolled-back transaction delivers nothing', async () => {
      await hook(`${rx.url}/rollback`);
      await assert.rejects(
        t.ctx.db.transaction().execute(async (trx) => {
          await t.ctx.events.emit(trx, t.accountId, 'conversation.started', { conversationId: 'x' });
          throw new Error('abort');
        }),
      );
      await sleep(200);
      assert.equal(forHook(rx, '/rollback').length, 0);
    });

    test('five failures: identical body, signature and id each time, delays honoured, delivery failed, webhook disabled, others cancelled', async () => {
      const srv = await startServer((req, res) => {
        res.writeHead(500);
        res.end('boom');
      });
      try {
        const id = await hook(`${srv.url}/fail`);
        await emit(t, t.accountId, 'conversation.started', { n: 1 });
        await waitFor(() => srv.received.length >= 4, '4 attempts');
        await emit(t, t.accountId, 'conversation.started', { n: 2 });
        const w = await waitFor(async () => {
          const g = await t.request('GET', `/v1/webhooks/${id}`, { key: t.key });
          return g.body.data.enabled === false ? g.body.data : null;
        }, 'webhook disabled');
        const disabledAt = Date.now();
        assert.match(w.disabledReason, /5 failed attempts/);
        const first = srv.received.filter((r) => JSON.parse(r.body.toString()).data.n === 1);
        assert.equal(first.length, 5);
        for (const r of first) {
          assert.deepEqual(r.body, first[0]!.body);
          assert.equal(r.headers['x-service-signature'], first[0]!.headers['x-service-signature']);
          assert.equal(r.headers['x-service-delivery-id'], first[0]!.headers['x-service-delivery-id']);
        }
        // The second delivery is cancelled at once, or, when its own attempt was under way as the disable committed,
        // as that attempt's record commits: wait for it (read at once, it was still `pending` in a loaded run).
        const [second, firstD] = await waitFor(async () => {
          const l = await t.request('GET', `/v1/webhooks/${id}/deliveries`, { key: t.key });
          return l.body.data.deliveries.every((d: any) => d.status !== 'pending') ? l.body.data.deliveries : undefined;
        }, 'nothing pending');
        assert.equal(firstD.status, 'failed');
        assert.deepEqual(firstD.attempts.map((a: any) => a.attempt), [1, 2, 3, 4, 5]);
        for (let i = 1; i < 5; i++) {
          const gap = Date.parse(firstD.attempts[i].at) - Date.parse(firstD.attempts[i - 1].at);
          assert.ok(gap >= 50, `gap ${gap} ms before attempt ${i + 1}`);
        }
        assert.ok(firstD.attempts.every((a: any) => a.statusCode === 500 && a.error === 'HTTP 500'));
        assert.equal(firstD.nextAttemptAt, null);
        assert.equal(second.status, 'cancelled');
        const count = srv.received.length;
        await emit(t, t.accountId, 'conversation.started', { n: 3 });
        await sleep(200);
        assert.equal(srv.received.length, count, 'nothing sent after the disable');
        assert.ok(Date.now() >= disabledAt);
        const f = await t.request('GET', `/v1/webhooks/${id}/deliveries?status=failed`, { key: t.key });
        assert.equal(f.body.data.total, 1);
      } finally {
        await srv.close();
      }
    });

    test('two deliveries whose fifth attempts fail together are both failed; the disable cancels only what had attempts left', async () => {
      // Each delivery's fifth request is held until both have arrived, then both fail: the first recorded disables
      // the webhook while the other's last attempt is still in flight.
      const seen = new Map<string, number>();
      const held: Array<() => void> = [];
      const srv = await startServer((req, res) => {
        const id = String(req.headers['x-service-delivery-id']);
        const n = (seen.get(id) ?? 0) + 1;
        seen.set(id, n);
        const fail = () => {
          res.writeHead(500);
          res.end('boom');
        };
        if (n < 5) return fail();
        held.push(fail);
        if (held.length === 2) for (const f of held) f();
      });
      try {
        const id = await hook(`${srv.url}/together`);
        await t.ctx.db.transaction().execute(async (trx) => {
          await t.ctx.events.emit(trx, t.accountId, 'conversation.started', { n: 1 });
          await t.ctx.events.emit(trx, t.accountId, 'conversation.started', { n: 2 });
        });
        await waitFor(async () => {
          const g = await t.request('GET', `/v1/webhooks/${id}`, { key: t.key });
          return g.body.data.enabled === false || undefined;
        }, 'webhook disabled');
        const l = await waitFor(async () => {
          const r = await t.request('GET', `/v1/webhooks/${id}/deliveries`, { key: t.key });
          return r.body.data.deliveries.every((d: any) => d.attempts.length === 5) ? r.body.data.deliveries : undefined;
        }, 'both recorded');
        assert.deepEqual(l.map((d: any) => d.status), ['failed', 'failed']);
        assert.ok(l.every((d: any) => d.nextAttemptAt === null));
      } finally {
        await srv.close();
      }
    });

    test('410 Gone disables at once', async () => {
      const srv = await startServer((req, res) => {
        res.writeHead(410);
        res.end();
      });
      try {
        const id = await hook(`${srv.url}/gone`);
        await emit(t, t.accountId, 'conversation.started', {});
        const w = await waitFor(async () => {
          const g = await t.request('GET', `/v1/webhooks/${id}`, { key: t.key });
          return g.body.data.enabled === false ? g.body.data : null;
        }, 'disabled');
        assert.match(w.disabledReason, /410/);
        await sleep(150);
        assert.equal(srv.received.length, 1);
      } finally {
        await srv.close();
      }
    });

    test('manual retry: a fresh attempt now with the same id and signature; refused while disabled', async () => {
      let code = 503;
      const srv = await startServer((req, res) => {
        res.writeHead(code);
        res.end();
      });
      try {
        const id = await hook(`${srv.url}/manual`);
        await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key, body: {} });
        const l = await t.request('GET', `/v1/webhooks/${id}/deliveries`, { key: t.key });
        const d = l.body.data.deliveries[0];
        assert.equal(d.status, 'failed', 'a failed test send is not retried');
        code = 204;
        const r = await t.request('POST', `/v1/webhooks/${id}/deliveries/${d.id}/retry`, { key: t.key });
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.data.status, 'succeeded');
        assert.deepEqual(r.body.data.attempts.map((a: any) => [a.attempt, a.kind, a.statusCode]), [[1, 'test', 503], [2, 'manual', 204]]);
        assert.equal(srv.received.length, 2);
        assert.equal(srv.received[1]!.headers['x-service-signature'], srv.received[0]!.headers['x-service-signature']);
        assert.equal(srv.received[1]!.headers['x-service-delivery-id'], d.id);
        const one = await t.request('GET', `/v1/webhooks/${id}/deliveries/${d.id}`, { key: t.key });
        assert.equal(one.body.data.body, srv.received[0]!.body.toString());
        assert.equal((await t.request('POST', `/v1/webhooks/${id}/deliveries/dlv_nope/retry`, { key: t.key })).status, 404);
        await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { enabled: false } });
        const refused = await t.request('POST', `/v1/webhooks/${id}/deliveries/${d.id}/retry`, { key: t.key });
        assert.equal(refused.status, 400);
        assert.match(refused.body.error.message, /disabled/);
        assert.equal(srv.received.length, 2);
      } finally {
        await srv.close();
      }
    });
  });

  describe(`webhook failure classes and disabling (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { WEBHOOK_RETRY_DELAYS: '0,1h,1h,1h,1h', WEBHOOK_TIMEOUT: '2s' } });
    let worker: ReturnType<typeof startWorker>;
    before(() => {
      worker = startWorker(t);
      // One test swaps the worker for a new one: stop whichever runs at the end.
      t.beforeClose(() => worker.stop());
    });

    test('2xx succeed; 3xx (not followed), 4xx, 5xx, timeout and refused connections fail and are rescheduled', async () => {
      const target = await startServer();
      const srv = await startServer((req, res) => {
        const code = Number(req.url!.slice(1));
        if (code === 0) return; // never answers: timeout
        res.writeHead(code, code === 302 ? { location: `${target.url}/redirected` } : {});
        res.end();
      });
      const closed = await freePort();
      try {
        const cases: Array<[string, number | null, RegExp | null]> = [
          [`${srv.url}/200`, 200, null],
          [`${srv.url}/201`, 201, null],
          [`${srv.url}/204`, 204, null],
          [`${srv.url}/302`, 302, /redirects are not followed/],
          [`${srv.url}/400`, 400, /HTTP 400/],
          [`${srv.url}/404`, 404, /HTTP 404/],
          [`${srv.url}/500`, 500, /HTTP 500/],
          [`${srv.url}/0`, null, /timeout/],
          [`http://127.0.0.1:${closed}/refused`, null, /ECONNREFUSED/],
        ];
        const ids: string[] = [];
        for (const [url] of cases) {
          const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url, events: ['conversation.message'], secret: SECRET } });
          ids.push(r.body.data.id);
        }
        const before = Date.now();
        await emit(t, t.accountId, 'conversation.message', { content: 'hi' });
        for (const [i, [url, code, err]] of cases.entries()) {
          const d = await waitFor(async () => {
            const l = await t.request('GET', `/v1/webhooks/${ids[i]}/deliveries`, { key: t.key });
            const x = l.body.data.deliveries[0];
            return x && x.attempts.length === 1 ? x : null;
          }, url);
          const a = d.attempts[0];
          assert.equal(a.statusCode, code, `${url}: ${a.error}`);
          if (err) {
            assert.match(a.error, err, url);
            assert.equal(d.status, 'pending', url);
            const next = Date.parse(d.nextAttemptAt);
            assert.ok(next >= before + 3_600_000 - 1000 && next <= Date.now() + 3_600_000 + 1000, `${url} next attempt in 1h: next=${d.nextAttemptAt} before=${new Date(before).toISOString()}`);
          } else {
            assert.equal(a.error, null);
            assert.equal(d.status, 'succeeded');
            assert.equal(d.nextAttemptAt, null);
          }
        }
        assert.equal(target.received.length, 0, 'redirect not followed');
      } finally {
        await srv.close();
        await target.close();
      }
    });

    test('disabling cancels pending deliveries at once; re-enabling delivers new events only', async () => {
      let code = 500;
      const srv = await startServer((req, res) => {
        res.writeHead(code);
        res.end();
      });
      try {
        const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${srv.url}/d`, events: ['workflow.triggered'], secret: SECRET } });
        const id = r.body.data.id;
        for (let i = 0; i < 3; i++) await emit(t, t.accountId, 'workflow.triggered', { i });
        await waitFor(() => srv.received.length === 3, '3 first attempts');
        const off = await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { enabled: false } });
        assert.equal(off.body.data.enabled, false);
        // At once, or for an attempt whose record was still on its way (its lease held), as that record commits.
        let l = await waitFor(async () => {
          const r = await t.request('GET', `/v1/webhooks/${id}/deliveries`, { key: t.key });
          return r.body.data.deliveries.every((d: any) => d.status !== 'pending') ? r : null;
        }, 'cancelled');
        assert.deepEqual(l.body.data.deliveries.map((d: any) => d.status), ['cancelled', 'cancelled', 'cancelled']);
        await emit(t, t.accountId, 'workflow.triggered', { i: 'while disabled' });
        code = 200;
        await sleep(150);
        assert.equal(srv.received.length, 3);
        await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { enabled: true } });
        await emit(t, t.accountId, 'workflow.triggered', { i: 'after' });
        await waitFor(() => srv.received.length === 4, 'new event');
        assert.equal(JSON.parse(srv.received[3]!.body.toString()).data.i, 'after');
        l = await t.request('GET', `/v1/webhooks/${id}/deliveries?status=cancelled`, { key: t.key });
        assert.equal(l.body.data.total, 3);
        // delete cancels too
        await emit(t, t.accountId, 'workflow.triggered', { i: 'x' });
        code = 500;
        await waitFor(async () => (await t.ctx.db.selectFrom('deliveries').select('id').where('webhook_id', '=', id).where('status', '=', 'pending').where('attempt_count', '=', 1).execute()).length === 1 || srv.received.length === 5, 'x tried');
        await t.request('DELETE', `/v1/webhooks/${id}`, { key: t.key });
        // At once, or for an attempt whose record was on its way, as that record commits.
        await waitFor(async () => (await t.ctx.db.selectFrom('deliveries').select('id').where('webhook_id', '=', id).where('status', '=', 'pending').execute()).length === 0, 'nothing pending');
      } finally {
        await srv.close();
      }
    });

    test('a claimed delivery whose webhook is disabled before its send is cancelled, not sent', async () => {
      const srv = await startServer();
      const closers: Array<() => Promise<void>> = [];
      try {
        const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${srv.url}/race`, events: ['rundown.generated'], secret: SECRET } });
        const id = r.body.data.id;
        await worker.stop(); // take the engine out of the loop and drive a second one by hand
        const { createDeliveryEngine } = await import('../../../src/modules/webhooks/delivery.js');
        const { createUndiciSender } = await import('../../../src/modules/webhooks/sender.js');
        const engine = createDeliveryEngine({
          db: t.ctx.db,
          dialect,
          clock: t.ctx.clock,
          config: t.ctx.config,
          sender: createUndiciSender({ allowPrivate: true }),
          perWebhook: 1,
        });
        closers.push(() => engine.close());
        await emit(t, t.accountId, 'rundown.generated', { n: 1 });
        await emit(t, t.accountId, 'rundown.generated', { n: 2 });
        // Hold the first send open, so the second stays queued locally under this engine's lease.
        let release: (() => void) | undefined;
        const gate = new Promise<void>((res) => (release = res));
        closers.unshift(async () => release?.());
        const slow = await startServer(async (req, res) => {
          await gate;
          res.writeHead(200);
          res.end();
        });
        closers.push(() => slow.close());
        await t.ctx.db.updateTable('deliveries').set({ url: `${slow.url}/slow` }).where('webhook_id', '=', id).execute();
        await engine.run();
        await waitFor(() => slow.received.length === 1, 'first send');
        assert.equal(engine.inFlight, 2);
        await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { enabled: false } });
        release!();
        await waitFor(() => engine.inFlight === 0, 'drained');
        // The send's slot is freed before its record commits (delivery.ts): wait for the record, not a fixed time.
        const rows = await waitFor(async () => {
          const all = await t.ctx.db.selectFrom('deliveries').select(['id', 'status', 'lease_owner']).where('webhook_id', '=', id).execute();
          return all.every((x) => x.lease_owner === null) ? all : null;
        }, 'both leases released');
        assert.equal(slow.received.length, 1, 'the queued one was not sent');
        // Both were due at the same moment, so either may have gone first: the one received succeeded.
        const sentId = slow.received[0]!.headers['x-service-delivery-id'];
        assert.deepEqual(rows.map((x) => [x.id === sentId, x.status]).sort(), [[false, 'cancelled'], [true, 'succeeded']]);
        assert.ok(rows.every((x) => x.lease_owner === null));
      } finally {
        for (const c of closers) await c();
        worker = startWorker(t);
        await srv.close();
      }
    });
  });
}
