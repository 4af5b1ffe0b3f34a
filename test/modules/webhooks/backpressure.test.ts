import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import pg from 'pg';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS, PG_URL } from '../../helpers/db.js';
import { createDeliveryEngine } from '../../../src/modules/webhooks/delivery.js';
import { createUndiciSender } from '../../../src/modules/webhooks/sender.js';
import { startServer } from './helpers.js';
import { emit, sleep, waitFor } from './delivery-helpers.js';

const SECRET = 'whsec_test_secret_1';

for (const dialect of DIALECTS) {
  describe(`delivery engine: records and orphans (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { WEBHOOK_RETRY_DELAYS: '0,1h,1h,1h,1h', WEBHOOK_TIMEOUT: '2s' } });
    const engine = (maxInFlight = 4) =>
      createDeliveryEngine({
        db: t.ctx.db,
        dialect,
        clock: t.ctx.clock,
        config: t.ctx.config,
        sender: createUndiciSender({ allowPrivate: true }),
        maxInFlight,
        perWebhook: maxInFlight,
        maxUnrecorded: maxInFlight,
      });

    test('a pending delivery whose webhook was deleted or disabled under it is cancelled by the sweep, never left pending', async () => {
      const srv = await startServer();
      try {
        const mk = async () => (await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${srv.url}/o`, events: ['rundown.generated'], secret: SECRET } })).body.data.id as string;
        const gone = await mk();
        const off = await mk();
        await emit(t, t.accountId, 'rundown.generated', { n: 1 });
        // As an event committed beside the change leaves it on PostgreSQL: the webhook changed, its delivery still pending.
        await t.ctx.db.deleteFrom('webhooks').where('id', '=', gone).execute();
        await t.ctx.db.updateTable('webhooks').set({ enabled: 0 }).where('id', '=', off).execute();
        const e = engine();
        try {
          await e.sweep();
          const rows = await t.ctx.db.selectFrom('deliveries').select(['webhook_id', 'status']).where('webhook_id', 'in', [gone, off]).execute();
          assert.deepEqual(rows.map((r) => r.status), ['cancelled', 'cancelled']);
          // Re-enabling does not send it: cancelled stays cancelled.
          await t.request('PUT', `/v1/webhooks/${off}`, { key: t.key, body: { enabled: true } });
          await e.run();
          await sleep(100);
          assert.equal(srv.received.length, 0);
        } finally {
          await e.close();
        }
      } finally {
        await srv.close();
      }
    });

    test('attempts sent but not yet recorded are bounded: new sends wait for records (postgres)', { skip: dialect !== 'postgres' && 'needs a second connection holding a lock' }, async () => {
      const srv = await startServer();
      const locker = new pg.Client({ connectionString: PG_URL });
      await locker.connect();
      const e = engine(4);
      try {
        const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${srv.url}/b`, events: ['workflow.triggered'], secret: SECRET } });
        const id = r.body.data.id as string;
        for (let i = 0; i < 40; i++) await emit(t, t.accountId, 'workflow.triggered', { i });
        // Records stall (their INSERT into delivery_attempts waits for this lock); sending needs nothing it holds.
        await locker.query(`BEGIN; SET LOCAL search_path TO ${t.database.schema}; LOCK TABLE delivery_attempts IN EXCLUSIVE MODE`);
        const until = Date.now() + 600;
        while (Date.now() < until) {
          await e.run();
          await sleep(20);
        }
        // In flight plus unrecorded: 4 + 4. Before the bound every run claimed and sent four more: all 40 went out
        // with none recorded.
        assert.ok(srv.received.length <= 8, `${srv.received.length} sent while no record could commit`);
        await locker.query('COMMIT');
        await waitFor(async () => {
          await e.run();
          const left = await t.ctx.db.selectFrom('deliveries').select('id').where('webhook_id', '=', id).where('status', '!=', 'succeeded').execute();
          return left.length === 0;
        }, 'every delivery recorded as sent');
        assert.equal(new Set(srv.received.map((x) => x.headers['x-service-delivery-id'] ?? x.headers['webhook-id'])).size, 40);
      } finally {
        await locker.query('ROLLBACK').catch(() => undefined);
        await locker.end();
        await e.close();
        await srv.close();
      }
    });
  });
}
