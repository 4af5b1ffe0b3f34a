import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { startServer, type TestServer } from './helpers.js';
import { startWorker, waitFor } from './delivery-helpers.js';

// A receiver that answers every request in well under the timeout must never see a timeout, whatever the
// backlog: an attempt's timeout covers the request, not a wait for a free connection inside Parley.
for (const dialect of DIALECTS) {
  describe(`webhook deliveries under a backlog (${dialect})`, () => {
    // The answer time and the timeout keep the ratio that catches attempts queued for a connection on the clock
    // (48 requests through a few connections take several answer times), at a scale where a loaded machine's
    // event-loop stalls (well under 2 s) do not look like timeouts.
    const ANSWER_MS = 900;
    const t = useTestApp(dialect, { env: { WEBHOOK_TIMEOUT: '3s', WEBHOOK_RETRY_DELAYS: '0,1h,1h,1h,1h' } });
    let rx: TestServer;
    let worker: ReturnType<typeof startWorker> | undefined;
    const open = new Map<string, number>();
    const peak = new Map<string, number>();
    before(async () => {
      rx = await startServer((req, res) => {
        const path = req.url ?? '';
        open.set(path, (open.get(path) ?? 0) + 1);
        peak.set(path, Math.max(peak.get(path) ?? 0, open.get(path)!));
        setTimeout(() => {
          open.set(path, open.get(path)! - 1);
          res.writeHead(200).end('ok');
        }, ANSWER_MS);
      });
      t.beforeClose(() => rx.close());
      // The test starts the worker, once the backlog is in place.
      t.beforeClose(() => worker?.stop());
    });

    test('three webhooks on one receiver host, 60 events each: every attempt succeeds first time, at most 16 in flight per webhook', async () => {
      const hooks: string[] = [];
      for (const p of ['a', 'b', 'c']) {
        const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/${p}`, events: ['conversation.started'], secret: 'whsec_load_test' } });
        hooks.push(r.body.data.id);
      }
      // The backlog is in place before the worker starts, as after a receiver outage or a restart.
      await t.ctx.db.transaction().execute(async (trx) => {
        for (let i = 0; i < 60; i++) await t.ctx.events.emit(trx, t.accountId, 'conversation.started', { conversationId: `conv_${i}`, customerId: `c${i}` });
      });
      worker = startWorker(t);
      await waitFor(() => rx.received.length >= 180, 'every delivery received', 30_000);
      // A failed attempt is retried only an hour later: wait for one recorded attempt per delivery.
      await waitFor(async () => (await t.ctx.db.selectFrom('delivery_attempts').select('delivery_id').execute()).length >= 180, 'every attempt recorded', 10_000);
      const attempts = await t.ctx.db.selectFrom('delivery_attempts').select(['error', 'status_code']).execute();
      assert.equal(attempts.length, 180, 'one attempt per delivery');
      assert.deepEqual(
        attempts.filter((a) => a.status_code !== 200),
        [],
        'no attempt failed (a timeout here means it waited for a connection on the clock)',
      );
      const ids = rx.received.map((r) => r.headers['x-service-delivery-id']);
      assert.equal(new Set(ids).size, 180, 'no delivery sent twice');
      for (const p of ['/a', '/b', '/c']) assert.ok(peak.get(p)! <= 16, `${p}: ${peak.get(p)} requests in flight at once`);
    });
  });
}

// The worker's finished attempts wait a few milliseconds to be recorded together (delivery.ts, `record`). A worker
// stopped in that window must still record every attempt it made: unrecorded, they would be sent again.
for (const dialect of DIALECTS) {
  describe(`webhook deliveries: stopping right after a burst (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { WEBHOOK_RETRY_DELAYS: '0,1h,1h,1h,1h' } });
    let rx: TestServer;
    before(async () => {
      rx = await startServer((_req, res) => void res.writeHead(200).end('ok'));
      t.beforeClose(() => rx.close());
    });

    test('stop() as the last answer arrives: every attempt is recorded, nothing is left pending or leased', async () => {
      const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/burst`, events: ['conversation.started'], secret: 'whsec_load_test' } });
      assert.equal(r.status, 201);
      await t.ctx.db.transaction().execute(async (trx) => {
        for (let i = 0; i < 100; i++) await t.ctx.events.emit(trx, t.accountId, 'conversation.started', { conversationId: `conv_${i}`, customerId: `c${i}` });
      });
      const worker = startWorker(t);
      await waitFor(() => rx.received.length >= 100, 'every delivery received', 30_000);
      await worker.stop();
      const rows = await t.ctx.db.selectFrom('deliveries').select(['status', 'attempt_count', 'lease_owner']).execute();
      assert.equal(rows.length, 100);
      assert.deepEqual(
        rows.filter((d) => d.status !== 'succeeded' || d.attempt_count !== 1 || d.lease_owner !== null),
        [],
        'every delivery succeeded with one recorded attempt and no lease',
      );
      const attempts = await t.ctx.db.selectFrom('delivery_attempts').select('delivery_id').execute();
      assert.equal(attempts.length, 100);
    });
  });
}
