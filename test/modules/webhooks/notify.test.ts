import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../../src/config.js';
import { createContext } from '../../../src/context.js';
import { openDatabase } from '../../../src/db/database.js';
import { deliveriesChannel } from '../../../src/db/notify.js';
import { systemClock } from '../../../src/lib/clock.js';
import { createWorker } from '../../../src/worker/worker.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp } from '../../helpers/app.js';
import { PG_URL } from '../../helpers/db.js';
import { startServer, type TestServer } from './helpers.js';
import { emit, quietLog, waitFor } from './delivery-helpers.js';

// PostgreSQL only: SQLite runs on one machine, where `parley serve` has the worker in the same process and an
// emit wakes it directly (tested in delivery.test.ts); there is no cross-process notification to test there.
describe('a worker in another process hears of new deliveries at commit (postgres LISTEN/NOTIFY)', () => {
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
    await emit(api, api.accountId, 'conversation.message', { content: 'first' });
    await waitFor(() => rx.received.length === 1, 'delivery', 5_000);
    assert.ok(Date.now() - started < 5_000);
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
    await emit(api, api.accountId, 'conversation.message', { content: 'second' });
    await waitFor(() => rx.received.length === 2, 'delivery after reconnect', 5_000);
  });
});
