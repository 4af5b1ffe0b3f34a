import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { workerTasks } from '../../../src/worker/tasks.js';
import { createWorker } from '../../../src/worker/worker.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { fillDatabase } from '../../helpers/full.js';
import { captureLog } from '../../helpers/log.js';
import { emit, sleep, waitFor } from './delivery-helpers.js';
import { startServer, type TestServer } from './helpers.js';

const SECRET = 'whsec_full_database';

for (const dialect of DIALECTS) {
  describe(`webhook worker with a full database (${dialect})`, () => {
    // Leases of 5 s (2 × WEBHOOK_TIMEOUT + 1 s), swept every 1.25 s: an attempt whose record is lost is sent again
    // within about 6.5 s.
    const t = useTestApp(dialect, { env: { WEBHOOK_TIMEOUT: '2s' } });
    const log = captureLog();
    let rx: TestServer;
    let open: () => void = () => undefined;
    let gate = new Promise<void>((resolve) => (open = resolve));
    /** Runs of the delivery task (claim, send, or a retry of the records). */
    let runs = 0;
    before(async () => {
      // 4 KiB answers: each attempt's record keeps the body, so it needs pages of its own (SQLite cannot squeeze it in).
      rx = await startServer((_req, res) => {
        void gate.then(() => {
          res.writeHead(200, { 'content-type': 'text/plain' });
          res.end('x'.repeat(4096));
        });
      });
      t.beforeClose(() => rx.close());
      const tasks = workerTasks(t.ctx).map((task) =>
        task.name === 'webhook-deliveries'
          ? {
              ...task,
              run: (signal: AbortSignal) => {
                runs++;
                return task.run(signal);
              },
            }
          : task,
      );
      const worker = createWorker(tasks, log.logger);
      worker.start();
      t.beforeClose(() => worker.stop());
    });

    test('attempts whose records the database refuses are kept and recorded once it takes writes again: each sent once, none lost; no new sends meanwhile, and the task backs off', async () => {
      const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/full`, events: ['conversation.started'], secret: SECRET } });
      assert.equal(r.status, 201, r.text);
      const hookId = r.body.data.id as string;
      // Sixteen deliveries (one webhook's share in flight), held by the receiver until the database is full.
      for (let n = 0; n < 16; n++) await emit(t, t.accountId, 'conversation.started', { n });
      await waitFor(() => rx.received.length === 16, 'the 16 attempts sent');
      // Full before the receiver answers (within WEBHOOK_TIMEOUT, so that each attempt is a success to record). On
      // PostgreSQL only the table of attempt records, the worker's first write after a send: one trigger, set up at once.
      const lift = await fillDatabase(t.database, { pgTables: ['delivery_attempts'] });
      const logged = log.lines.length;
      let runsWhileFull: number;
      try {
        const runsBefore = runs;
        open();
        await waitFor(() => t.ctx.deliveries.unrecorded === 16, 'the 16 records refused and kept');
        // Past the leases and a sweep: a delivery whose record had been dropped (as before) is sent again by now.
        await sleep(7_000);
        runsWhileFull = runs - runsBefore;
        assert.equal(rx.received.length, 16, 'nothing sent again, nothing new sent');
        assert.equal(t.ctx.deliveries.unrecorded, 16);
      } finally {
        await lift();
      }
      // Backing off (0.1, 0.2, 0.4 … up to 5 s apart), not polling every 50 ms (about 140 runs in those 7 s).
      assert.ok(runsWhileFull <= 15, `${runsWhileFull} runs of the delivery task while full`);

      // Space is back: the same worker records all sixteen, each once, as the one attempt the receiver got.
      const list = await waitFor(
        async () => {
          const l = (await t.request('GET', `/v1/webhooks/${hookId}/deliveries?limit=100`, { key: t.key })).body.data.deliveries as Array<{ id: string; status: string; attempts: unknown[] }>;
          return l.length === 16 && l.every((d) => d.status === 'succeeded' && d.attempts.length === 1) ? l : undefined;
        },
        'every delivery recorded as succeeded with one attempt',
        15_000,
      );
      const sent = rx.received.map((x) => x.headers['webhook-id']);
      assert.equal(sent.length, 16);
      assert.deepEqual(new Set(sent), new Set(list.map((d) => d.id)));
      assert.equal(t.ctx.deliveries.unrecorded, 0);

      // The operator read it once, with the database's own code, then that it recovered.
      const lines = log.lines.slice(logged).filter((l) => l.task === 'webhook-deliveries');
      assert.deepEqual(
        lines.map((l) => l.msg),
        ['worker task failed', 'worker task recovered'],
      );
      assert.equal(lines[0]!.err.code, dialect === 'sqlite' ? 'SQLITE_FULL' : '53100');

      // And it goes on delivering.
      await emit(t, t.accountId, 'conversation.started', { n: 16 });
      await waitFor(() => rx.received.length === 17, 'a new event delivered');
      gate = Promise.resolve();
    });
  });
}
