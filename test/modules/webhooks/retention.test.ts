import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { loadConfig } from '../../../src/config.js';
import { newId } from '../../../src/lib/ids.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp, type SuiteApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

const DAY = 86_400_000;

/** A delivery (with `attempts` attempts) and its event, both made at `at`. */
async function delivery(t: SuiteApp, accountId: string, webhookId: string, at: number, status: 'pending' | 'succeeded' | 'failed' | 'cancelled', attempts = 1) {
  const eventId = newId('evt', at);
  const id = newId('dlv', at);
  const body = JSON.stringify({ event: 'escalation', timestamp: new Date(at).toISOString(), data: { conversationId: 'conv_x' } });
  await t.ctx.db.insertInto('events').values({ id: eventId, account_id: accountId, kind: 'escalation', payload: body, created_at: at }).execute();
  await t.ctx.db
    .insertInto('deliveries')
    .values({
      id, account_id: accountId, webhook_id: webhookId, event_id: eventId, event: 'escalation', url: 'http://127.0.0.1:9/h', secret: 's', body, status,
      attempt_count: attempts, auto_attempts: attempts, next_attempt_at: status === 'pending' ? at + DAY : null, lease_owner: null, lease_expires_at: null,
      created_at: at, updated_at: at,
    })
    .execute();
  for (let n = 1; n <= attempts; n++) {
    await t.ctx.db
      .insertInto('delivery_attempts')
      .values({ delivery_id: id, attempt: n, kind: 'auto', at, status_code: 500, duration_ms: 3, error: null, response_body: 'no', worker: 'w' })
      .execute();
  }
  return { id, eventId };
}

async function remaining(t: SuiteApp, ids: { id: string; eventId: string }[]) {
  const dIds = ids.map((i) => i.id);
  const eIds = ids.map((i) => i.eventId);
  const deliveries = (await t.ctx.db.selectFrom('deliveries').select('id').where('id', 'in', dIds).execute()).map((r) => r.id);
  const events = (await t.ctx.db.selectFrom('events').select('id').where('id', 'in', eIds).execute()).map((r) => r.id);
  const attempts = (await t.ctx.db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', 'in', dIds).execute()).map((r) => r.delivery_id);
  return { deliveries: new Set(deliveries), events: new Set(events), attempts: new Set(attempts) };
}

test('DELIVERY_RETENTION: 30d by default, 0 keeps everything, a bare small number is refused (it would be milliseconds)', () => {
  assert.equal(loadConfig({}).deliveryRetentionMs, 30 * DAY);
  assert.equal(loadConfig({ DELIVERY_RETENTION: '90d' }).deliveryRetentionMs, 90 * DAY);
  assert.equal(loadConfig({ DELIVERY_RETENTION: '0' }).deliveryRetentionMs, 0);
  assert.throws(() => loadConfig({ DELIVERY_RETENTION: '30' }), /DELIVERY_RETENTION="30": must be 0 \(keep everything\) or at least 1h, such as 30d \(a bare number is milliseconds\)/);
  assert.throws(() => loadConfig({ DELIVERY_RETENTION: 'a month' }), /DELIVERY_RETENTION/);
});

for (const dialect of DIALECTS) {
  describe(`delivery history retention (${dialect})`, () => {
    const t = useTestApp(dialect);

    async function webhook() {
      const a = await t.account();
      const r = await t.request('POST', '/v1/webhooks', { key: a.key, body: { url: 'http://127.0.0.1:9/h', events: ['escalation'], secret: 'retention-secret' } });
      assert.equal(r.status, 201, r.text);
      return { ...a, webhookId: r.body.data.id as string };
    }

    test('finished deliveries and events older than the cut go with their attempts; pending ones and newer ones stay', async () => {
      const { accountId, key, webhookId } = await webhook();
      const now = Date.now();
      const old = now - 40 * DAY;
      const gone = [
        await delivery(t, accountId, webhookId, old, 'succeeded'),
        await delivery(t, accountId, webhookId, old + 1, 'failed', 5),
        await delivery(t, accountId, webhookId, old + 2, 'cancelled', 0),
      ];
      const stale = await delivery(t, accountId, webhookId, old + 3, 'pending', 2);
      const fresh = await delivery(t, accountId, webhookId, now - DAY, 'succeeded');
      const listed = async () => (await t.request('GET', `/v1/webhooks/${webhookId}/deliveries?status=all`, { key })).body.data.total;
      assert.equal(await listed(), 5);

      const pruned = await t.ctx.services.webhooks.pruneHistory(now - 30 * DAY);
      assert.ok(pruned.deliveries >= 3 && pruned.events >= 3, JSON.stringify(pruned));
      const left = await remaining(t, [...gone, stale, fresh]);
      for (const g of gone) {
        assert.ok(!left.deliveries.has(g.id) && !left.attempts.has(g.id) && !left.events.has(g.eventId), `pruned ${g.id}`);
      }
      // A pending delivery is never pruned, nor its event (an erasure finds the delivery through it).
      assert.ok(left.deliveries.has(stale.id) && left.attempts.has(stale.id) && left.events.has(stale.eventId));
      assert.ok(left.deliveries.has(fresh.id) && left.attempts.has(fresh.id) && left.events.has(fresh.eventId));
      assert.equal(await listed(), 2);
    });

    test('a delivery still retrying after the retention is found and erased with its conversation', async () => {
      const { key, webhookId } = await webhook();
      const started = await t.request('POST', '/v1/chat/conversations', { key, body: { customerId: 'cust-retrying' } });
      assert.equal(started.status, 201, started.text);
      const id = started.body.data.conversation.id as string;
      const escalated = await t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key, body: {} });
      assert.equal(escalated.status, 200, escalated.text);
      const pending = async () =>
        (await t.ctx.db.selectFrom('deliveries').select(['id', 'body']).where('webhook_id', '=', webhookId).where('status', '=', 'pending').execute()).filter((d) =>
          d.body.includes(id),
        );
      assert.equal((await pending()).length, 1);
      // Its receiver has been failing for longer than DELIVERY_RETENTION (1h at the least; the default schedule retries for a day).
      await t.ctx.services.webhooks.pruneHistory(Date.now() + 1);
      assert.equal((await pending()).length, 1, 'a pending delivery is never pruned');
      const r = await t.request('DELETE', `/v1/conversations/${id}`, { key });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(await pending(), [], 'erased with its conversation, never sent');
    });

    test('a finished delivery being retried by hand is left to that attempt (pruned at a later run)', async () => {
      const { accountId, webhookId } = await webhook();
      const now = Date.now();
      const old = await delivery(t, accountId, webhookId, now - 40 * DAY, 'failed', 5);
      // POST .../retry has taken its lease and is sending it.
      const lease = await t.ctx.deliveries.acquire(old.id);
      assert.ok(lease);
      await t.ctx.services.webhooks.pruneHistory(now - 30 * DAY);
      assert.ok((await remaining(t, [old])).deliveries.has(old.id), 'kept while its attempt is under way');
      await t.ctx.db.updateTable('deliveries').set({ lease_owner: null, lease_expires_at: null }).where('id', '=', old.id).execute();
      await t.ctx.services.webhooks.pruneHistory(now - 30 * DAY);
      const left = await remaining(t, [old]);
      assert.equal(left.deliveries.size + left.events.size + left.attempts.size, 0);
    });

    test('in batches until nothing is left to prune; two workers pruning at once neither fail nor double count', async () => {
      const { accountId, webhookId } = await webhook();
      const now = Date.now();
      const made = [];
      for (let i = 0; i < 25; i++) made.push(await delivery(t, accountId, webhookId, now - 60 * DAY + i, i % 2 ? 'failed' : 'succeeded'));
      const [a, b] = await Promise.all([
        t.ctx.services.webhooks.pruneHistory(now - 30 * DAY, undefined, 3),
        t.ctx.services.webhooks.pruneHistory(now - 30 * DAY, undefined, 4),
      ]);
      const left = await remaining(t, made);
      assert.equal(left.deliveries.size + left.events.size + left.attempts.size, 0);
      // Other tests' rows may be pruned too, but never one row twice: at least these 25 of each.
      assert.ok(a.deliveries + b.deliveries >= 25 && a.events + b.events >= 25, JSON.stringify([a, b]));
    });

    test("the worker's pruner uses DELIVERY_RETENTION, and 0 keeps everything", async () => {
      const { accountId, webhookId } = await webhook();
      const now = Date.now();
      const mid = await delivery(t, accountId, webhookId, now - 10 * DAY, 'succeeded');
      const pruner = (env: Record<string, string>) => {
        const task = workerTasks({ ...t.ctx, config: { ...t.ctx.config, ...loadConfig(env) } }).find((k) => k.name === 'delivery-history-pruner');
        assert.ok(task);
        return task.run(new AbortController().signal);
      };
      await pruner({ DELIVERY_RETENTION: '0' });
      assert.ok((await remaining(t, [mid])).deliveries.has(mid.id), '0 keeps everything');
      await pruner({ DELIVERY_RETENTION: '30d' });
      assert.ok((await remaining(t, [mid])).deliveries.has(mid.id), 'younger than 30 days');
      await pruner({ DELIVERY_RETENTION: '7d' });
      const left = await remaining(t, [mid]);
      assert.equal(left.deliveries.size + left.events.size + left.attempts.size, 0);
    });
  });
}
