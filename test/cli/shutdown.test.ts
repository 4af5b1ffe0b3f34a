import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import pg from 'pg';
import { DIALECTS } from '../helpers/db.js';
import { cli, oneJson, startServe, useCliDatabase } from './cli-suite.js';

// Shutdown of a real `parley serve` while requests are in flight (its own file: the runner spreads the slow
// process start-ups over several workers).
for (const dialect of DIALECTS) {
  describe(`parley serve shutdown (${dialect})`, () => {
    const c = useCliDatabase(dialect);

    test(
      'SIGTERM with requests in flight: each finishes and commits, even for a client that hung up, and the server exits 0 at once',
      // better-sqlite3 waits synchronously: a request blocked on the database blocks the whole process, signals
      // included, so SQLite cannot have a handler waiting while shutdown runs.
      { skip: dialect === 'sqlite' && 'a handler can only be waiting on the database while shutdown runs on PostgreSQL' },
      async () => {
        const out = oneJson(await cli(['init', '--force', '--json'], c.env));
        const auth = { authorization: `Bearer ${out.key.key}`, 'content-type': 'application/json' };
        const s = await startServe(c.env);
        const locker = new pg.Client({ connectionString: c.env.DATABASE_URL });
        // Watches the others: pg_stat_activity is read once per transaction, and the locker's stays open.
        const watcher = new pg.Client({ connectionString: c.env.DATABASE_URL });
        await Promise.all([locker.connect(), watcher.connect()]);
        let stopped: Promise<number | null | 'hung'> | undefined;
        const { port } = new URL(s.url);
        // A connection opened ahead and never used (browsers and HTTP clients do that): Node's server.close()
        // waits for it.
        const spare = connect(Number(port), '127.0.0.1');
        const spareClosed = new Promise((r) => spare.once('close', r));
        try {
          const started = await fetch(`${s.url}/v1/chat/conversations`, { method: 'POST', headers: auth, body: '{}' });
          const id = ((await started.json()) as any).data.conversation.id as string;
          // The messages' first read of the conversation waits behind this lock.
          await locker.query('BEGIN');
          await locker.query('LOCK TABLE conversations IN ACCESS EXCLUSIVE MODE');
          const lockerPid = (await locker.query('SELECT pg_backend_pid() AS pid')).rows[0].pid as number;
          const message = (signal?: AbortSignal) =>
            fetch(`${s.url}/v1/chat/conversations/${id}/messages`, { method: 'POST', headers: auth, body: JSON.stringify({ content: 'how do I track my order?' }), signal });
          const hangingUp = new AbortController();
          const abandoned = message(hangingUp.signal).catch(() => 'aborted');
          // Kept alive: after its answer the connection would wait for a next request.
          const waited = message();
          // Only the connections this lock holds up: other test files share the PostgreSQL server and may wait on
          // locks of their own meanwhile.
          const waiting = async () =>
            (await watcher.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [lockerPid])).rows[0].n as number;
          const deadline = Date.now() + 10_000;
          while ((await waiting()) < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
          assert.equal(await waiting(), 2, 'both messages wait on the lock');
          hangingUp.abort();
          assert.equal(await abandoned, 'aborted');
          const t0 = Date.now();
          stopped = s.stop();
          // Long enough for the server to reach the database's close if it did not wait for the handlers.
          await new Promise((r) => setTimeout(r, 500));
          await locker.query('COMMIT');
          const res = await waited;
          assert.equal(res.status, 200);
          assert.equal(res.headers.get('connection'), 'close', 'the connection is not kept for a next request');
          assert.equal(await stopped, 0, s.stderr());
          assert.ok(Date.now() - t0 < 5_000, `exited ${Date.now() - t0} ms after SIGTERM, not at the 10 s deadline`);
          await spareClosed;
          const { rows } = await locker.query('SELECT role FROM messages WHERE conversation_id = $1 ORDER BY seq', [id]);
          assert.deepEqual(
            rows.map((r) => r.role),
            ['assistant', 'customer', 'assistant', 'customer', 'assistant'],
            'the greeting, then both exchanges, committed after SIGTERM',
          );
        } finally {
          spare.destroy();
          await Promise.all([locker.end(), watcher.end()]);
          await (stopped ?? s.stop());
        }
      },
    );

    test('SIGTERM the moment serve says it listens is a graceful shutdown (exit 0), not the default end of the process', { skip: dialect !== 'sqlite' && 'covered on sqlite' }, async () => {
      // The handler used to be installed just after the "listening" line: a signal sent on reading it ended the
      // process outright in 5 of 16 tries.
      for (let i = 0; i < 10; i++) {
        const s = await startServe(c.env);
        assert.equal(await s.stop(), 0, `try ${i}: ${s.stderr()}`);
      }
    });
  });
}
