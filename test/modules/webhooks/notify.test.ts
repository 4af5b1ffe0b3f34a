import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../../src/config.js';
import { createContext } from '../../../src/context.js';
import { openDatabase } from '../../../src/db/database.js';
import { deliveriesChannel } from '../../../src/db/notify.js';
import { writeTransaction } from '../../../src/db/unit-of-work.js';
import { systemClock } from '../../../src/lib/clock.js';
import { createWorker } from '../../../src/worker/worker.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp } from '../../helpers/app.js';
import { PG_URL } from '../../helpers/db.js';
import { startServer, type TestServer } from './helpers.js';
import { emit, quietLog, waitFor } from './delivery-helpers.js';

// PostgreSQL only: SQLite runs on one machine, where `parley serve` has the worker in the same process and an
// emit wakes it directly (tested in delivery.test.ts); there is no cross-process notification to test there.
describe('a worker in another process hears of new deliveries once they commit (postgres LISTEN/NOTIFY)', () => {
  // The worker polls every 30 s, so anything delivered within a few seconds was woken by a notification.
  const env = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WORKER_POLL_INTERVAL: '30s' };
  const api = useTestApp('postgres', { env });
  let rx: TestServer;
  before(async () => {
    rx = await startServer();
    api.beforeClose(() => rx.close());
    const workerDb = openDatabase(api.database.url);
    api.beforeClose(() => workerDb.close());
    const ctx = createContext(loadConfig({ ...env, DATABASE_URL: api.database.url }), workerDb, systemClock, quietLog);
    const worker = createWorker(workerTasks(ctx), quietLog);
    worker.start();
    api.beforeClose(() => worker.stop());
    const r = await api.request('POST', '/v1/webhooks', { key: api.key, body: { url: `${rx.url}/n`, events: ['conversation.message'], secret: 'whsec_notify' } });
    assert.equal(r.status, 201, r.text);
    await waitFor(() => listenerPid(), 'the worker to LISTEN');
  });

  async function listenerPid(): Promise<number | null> {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    try {
      const r = await c.query<{ pid: number }>(`select pid from pg_stat_activity where query = $1`, [`LISTEN "${deliveriesChannel(api.database.schema)}"`]);
      return r.rows[0]?.pid ?? null;
    } finally {
      await c.end();
    }
  }

  test('an event emitted by the API process is delivered by the other worker long before its next poll', async () => {
    const started = Date.now();
    // A real request: the chat's first message emits conversation.message from the API's own write transaction.
    const chat = await api.request('POST', '/v1/chat/conversations', { key: api.key, body: { customerId: 'cust_notify' } });
    assert.equal(chat.status, 201, chat.text);
    const sent = await api.request('POST', `/v1/chat/conversations/${chat.body.data.conversation.id}/messages`, { key: api.key, body: { content: 'hello' } });
    assert.equal(sent.status, 200, sent.text);
    await waitFor(() => rx.received.length >= 1, 'delivery', 5_000);
    assert.ok(Date.now() - started < 5_000);
    assert.equal(JSON.parse(rx.received[0]!.body.toString('utf8')).event, 'conversation.message');
  });

  test('NOTIFY runs after the emitting transaction has committed, never inside it (PostgreSQL serialises the commits of transactions that ran NOTIFY)', async () => {
    // Every query of a database opened after this patch (its clients bind `query` when they connect), per client:
    // what it was and whether it ran inside a transaction.
    const seen: Array<{ text: string; inTransaction: boolean }> = [];
    const open = new WeakSet<object>();
    let recording = true;
    const original = pg.Client.prototype.query;
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      if (recording) {
        const first = args[0];
        const text = (typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '')).trim().toLowerCase();
        if (text === 'begin' || text.startsWith('start transaction')) open.add(this);
        seen.push({ text, inTransaction: open.has(this) });
        if (text === 'commit' || text === 'rollback') open.delete(this);
      }
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
    const database = openDatabase(api.database.url);
    try {
      const ctx = createContext(loadConfig({ ...env, DATABASE_URL: api.database.url }), database, systemClock, quietLog);
      await writeTransaction(ctx.db, (trx) => ctx.events.emit(trx, api.accountId, 'conversation.message', { content: 'ordered' }));
      await waitFor(() => seen.some((q) => q.text.includes('pg_notify')), 'the announcement', 5_000);
    } finally {
      recording = false;
      pg.Client.prototype.query = original;
      await database.close();
    }
    const insert = seen.findIndex((q) => q.text.includes('insert into "deliveries"'));
    assert.ok(insert >= 0 && seen[insert]!.inTransaction, 'the delivery was inserted inside the emitting transaction');
    const commit = seen.findIndex((q, i) => i > insert && q.text === 'commit');
    const notifies = seen.filter((q) => q.text.includes('pg_notify'));
    assert.ok(notifies.every((q) => !q.inTransaction), 'no NOTIFY inside a transaction');
    assert.ok(commit > insert && seen.indexOf(notifies[0]!) > commit, 'announced after the commit');
  });

  test('when the notification connection is killed, the worker reconnects and still hears', async () => {
    const pid = await listenerPid();
    assert.ok(pid);
    const admin = new pg.Client({ connectionString: PG_URL });
    await admin.connect();
    await admin.query('select pg_terminate_backend($1)', [pid]);
    await admin.end();
    await waitFor(async () => {
      const now = await listenerPid();
      return now !== null && now !== pid;
    }, 'a new LISTEN connection');
    const before = rx.received.length;
    await emit(api, api.accountId, 'conversation.message', { content: 'second' });
    await waitFor(() => rx.received.some((r, i) => i >= before && r.body.toString('utf8').includes('"second"')), 'delivery after reconnect', 5_000);
  });
});
