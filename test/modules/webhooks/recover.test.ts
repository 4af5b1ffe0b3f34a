import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { sql, type Transaction } from 'kysely';
import { loadConfig } from '../../../src/config.js';
import { createContext } from '../../../src/context.js';
import { openDatabase } from '../../../src/db/database.js';
import { deliveriesChannel } from '../../../src/db/notify.js';
import type { DB } from '../../../src/db/schema.js';
import { systemClock, toIso } from '../../../src/lib/clock.js';
import { newId } from '../../../src/lib/ids.js';
import { conversationsRepository } from '../../../src/modules/conversations/conversations.repository.js';
import { SUBSCRIBABLE_EVENTS } from '../../../src/modules/webhooks/events.js';
import { deliveriesRepository } from '../../../src/modules/webhooks/webhooks.repository.js';
import { RECOVER_MAX } from '../../../src/modules/webhooks/webhooks.schemas.js';
import { useTestApp, type SuiteApp } from '../../helpers/app.js';
import pg from 'pg';
import { DIALECTS, PG_URL, waitingOn } from '../../helpers/db.js';
import { startServer, type TestServer } from './helpers.js';
import { createWorker } from '../../../src/worker/worker.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { assertVerifies, emit, quietLog, sleep, startWorker, waitFor } from './delivery-helpers.js';

const SECRET = 'whsec_before_the_outage';
const NEW_SECRET = 'whsec_after_the_outage';

const recover = (t: SuiteApp, key: string, id: string, body: unknown) => t.request('POST', `/v1/webhooks/${id}/recover`, { key, body });
const ago = (ms: number) => new Date(Date.now() - ms).toISOString();

async function createHook(t: SuiteApp, key: string, url: string, events: string[], secret = SECRET) {
  const r = await t.request('POST', '/v1/webhooks', { key, body: { url, events, secret } });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id as string;
}

/** Every delivery row of the webhook, oldest first. */
const deliveriesOf = (t: SuiteApp, webhookId: string) =>
  t.ctx.db.selectFrom('deliveries').selectAll().where('webhook_id', '=', webhookId).orderBy('created_at').orderBy('id').execute();

/**
 * PostgreSQL: waits until `n` connections wait, directly or behind another waiter, on the connection `locker` (a row
 * lock's second waiter waits for the first, which holds the row's place in line, not for the holder).
 */
async function waitingBehind(locker: number, n: number) {
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  try {
    const deadline = Date.now() + 8_000;
    const count = async () =>
      (
        await c.query(
          `with recursive w(pid) as (
             select pid from pg_stat_activity where $1 = any(pg_blocking_pids(pid))
             union select a.pid from pg_stat_activity a join w on w.pid = any(pg_blocking_pids(a.pid)))
           select count(*)::int as n from w`,
          [locker],
        )
      ).rows[0].n as number;
    while ((await count()) < n) {
      assert.ok(Date.now() < deadline, `${n} connections waiting behind the lock`);
      await sleep(10);
    }
  } finally {
    await c.end();
  }
}

for (const dialect of DIALECTS) {
  describe(`webhook recover after an outage (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { WEBHOOK_RETRY_DELAYS: '0,50ms,50ms,50ms,50ms', WEBHOOK_TIMEOUT: '2s' } });
    let status = 200;
    let old: TestServer;
    let fixed: TestServer;
    before(async () => {
      old = await startServer((_req, res) => {
        res.writeHead(status);
        res.end('old');
      });
      fixed = await startServer((_req, res) => {
        res.writeHead(200);
        res.end('fixed');
      });
      t.beforeClose(() => old.close());
      t.beforeClose(() => fixed.close());
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());
    });

    test('disabled after five failures, moved to a new URL and secret: each missed event arrives there once, signed; nothing twice', async () => {
      const { accountId, key } = await t.account();
      const since = ago(1_000);
      const id = await createHook(t, key, `${old.url}/hooks`, ['conversation.started', 'escalation']);
      status = 200;
      const e0 = await emit(t, accountId, 'conversation.started', { n: 0 });
      await waitFor(() => old.received.length === 1, 'e0 delivered');
      await waitFor(async () => (await deliveriesOf(t, id)).every((d) => d.status === 'succeeded'), 'e0 recorded');

      // The outage: e1 fails five times and disables the webhook; e2, pending meanwhile, is cancelled (or fails).
      status = 500;
      const e1 = await emit(t, accountId, 'conversation.started', { n: 1 });
      await waitFor(() => old.received.length >= 3, 'e1 failing');
      const e2 = await emit(t, accountId, 'escalation', { n: 2 });
      await waitFor(async () => (await t.request('GET', `/v1/webhooks/${id}`, { key })).body.data.enabled === false, 'disabled');
      await waitFor(async () => (await deliveriesOf(t, id)).every((d) => d.status !== 'pending'), 'nothing pending');
      // While disabled: no delivery at all, a subscribed kind or not.
      const e3 = await emit(t, accountId, 'conversation.started', { n: 3 });
      const e4 = await emit(t, accountId, 'escalation', { n: 4 });
      const e5 = await emit(t, accountId, 'conversation.ended', { n: 5 });
      const before = await deliveriesOf(t, id);
      assert.deepEqual(before.map((d) => d.event_id).sort(), [e0.id, e1.id, e2.id].sort());
      const oldCount = old.received.length;

      // Fixed, at a new URL with a new secret; then a new event, delivered as usual.
      const on = await t.request('PUT', `/v1/webhooks/${id}`, { key, body: { enabled: true, url: `${fixed.url}/new`, secret: NEW_SECRET } });
      assert.equal(on.status, 200, on.text);
      const e6 = await emit(t, accountId, 'conversation.started', { n: 6 });
      await waitFor(() => fixed.received.length === 1, 'e6 delivered');
      await waitFor(async () => (await deliveriesOf(t, id)).find((d) => d.event_id === e6.id)?.status === 'succeeded', 'e6 recorded');

      const r = await recover(t, key, id, { since });
      assert.equal(r.status, 202, r.text);
      assert.equal(r.body.data.recovered, 4, 'e1 (failed), e2 (cancelled), e3 and e4 (none while disabled)');
      assert.equal(r.body.data.since, new Date(since).toISOString());
      assert.ok(Date.parse(r.body.data.until) <= Date.now());
      assert.equal(r.body.data.next, null);

      await waitFor(() => fixed.received.length === 5, 'the four recovered deliveries');
      await sleep(200);
      assert.equal(fixed.received.length, 5, 'each once');
      assert.equal(old.received.length, oldCount, 'nothing to the old URL');
      const recovered = fixed.received.slice(1);
      const byBody = new Map(recovered.map((x) => [x.body.toString(), x]));
      const oldIds = new Set(before.map((d) => d.id));
      for (const e of [e1, e2, e3, e4]) {
        const got = byBody.get(e.body);
        assert.ok(got, `event ${JSON.parse(e.body).data.n} arrived with its stored body`);
        await assertVerifies(got, NEW_SECRET);
        assert.equal(got.headers['x-service-event'], e.kind);
        assert.match(String(got.headers['x-service-delivery-id']), /^dlv_/);
        assert.ok(!oldIds.has(String(got.headers['x-service-delivery-id'])), 'a new delivery id');
        assert.equal(got.headers['x-service-event-id'], e.id, "a new delivery id, but the event's own id");
      }
      for (const e of [e0, e5, e6]) assert.equal(recovered.filter((x) => x.body.toString() === e.body).length, 0);

      const rows = await waitFor(async () => {
        const all = await deliveriesOf(t, id);
        return all.every((d) => d.status !== 'pending') ? all : undefined;
      }, 'recovered deliveries recorded');
      // Made together (one created_at), so listed by id: the ids follow the events' order.
      const fresh = rows.filter((d) => !oldIds.has(d.id) && d.event_id !== e6.id);
      const inEventOrder = [e1, e2, e3, e4].sort((x, y) => x.createdAt - y.createdAt || (x.id < y.id ? -1 : 1));
      assert.deepEqual(fresh.map((d) => [d.event_id, d.url, d.secret, d.status]), inEventOrder.map((e) => [e.id, `${fixed.url}/new`, NEW_SECRET, 'succeeded']));
      // The outage's own deliveries stay as they were.
      assert.deepEqual(rows.filter((d) => oldIds.has(d.id)).map((d) => d.status).sort(), before.map((d) => d.status).sort());

      // A second recover finds nothing missed.
      const again = await recover(t, key, id, { since });
      assert.equal(again.status, 202, again.text);
      assert.equal(again.body.data.recovered, 0);
      await sleep(150);
      assert.equal(fixed.received.length, 5);

      // Kinds count as subscribed now: conversation.ended, added since, is recovered; nothing else is.
      await t.request('PUT', `/v1/webhooks/${id}`, { key, body: { events: ['conversation.started', 'escalation', 'conversation.ended'] } });
      const ended = await recover(t, key, id, { since });
      assert.equal(ended.body.data.recovered, 1);
      await waitFor(() => fixed.received.length === 6, 'e5');
      assert.equal(fixed.received[5]!.body.toString(), e5.body);
    });

    test('until is exclusive and bounds what is recovered', async () => {
      const { accountId, key } = await t.account();
      const id = await createHook(t, key, `${fixed.url}/until`, ['conversation.started']);
      await t.request('PUT', `/v1/webhooks/${id}`, { key, body: { enabled: false } });
      const a = await emit(t, accountId, 'conversation.started', { n: 'a' });
      await sleep(5);
      const b = await emit(t, accountId, 'conversation.started', { n: 'b' });
      await t.request('PUT', `/v1/webhooks/${id}`, { key, body: { enabled: true } });
      const r = await recover(t, key, id, { since: toIso(a.createdAt), until: toIso(b.createdAt) });
      assert.equal(r.status, 202, r.text);
      assert.deepEqual(r.body.data, { recovered: 1, since: toIso(a.createdAt), until: toIso(b.createdAt), next: null });
      await waitFor(() => fixed.received.some((x) => x.url === '/until'), 'a');
      await sleep(100);
      assert.deepEqual(fixed.received.filter((x) => x.url === '/until').map((x) => x.body.toString()), [a.body]);
    });
  });

  describe(`webhook recover: rules, limits and races (${dialect})`, () => {
    // No worker: deliveries stay pending, so what a recover wrote can be counted.
    const t = useTestApp(dialect, { env: { DELIVERY_RETENTION: '2h' } });

    /** A webhook of a new account that was disabled while `n` conversation.started events happened, re-enabled. */
    async function missed(n: number, events = ['conversation.started']) {
      const a = await t.account();
      const id = await createHook(t, a.key, 'http://127.0.0.1:9/hooks', events);
      await t.request('PUT', `/v1/webhooks/${id}`, { key: a.key, body: { enabled: false } });
      const emitted = [];
      for (let i = 0; i < n; i++) emitted.push(await emit(t, a.accountId, 'conversation.started', { i }));
      await t.request('PUT', `/v1/webhooks/${id}`, { key: a.key, body: { enabled: true } });
      return { ...a, id, emitted };
    }

    test('the window is validated, naming the field; a disabled webhook is refused until re-enabled', async () => {
      const { key, id } = await missed(1);
      const future = new Date(Date.now() + 60_000).toISOString();
      const sameInstant = ago(1_000);
      const cases: Array<[unknown, RegExp]> = [
        [{}, /body\.since is required/],
        [{ since: 'yesterday' }, /^body\.since must be an ISO 8601 date/],
        [{ since: '2026-02-30' }, /^body\.since must be an ISO 8601 date/],
        [{ since: ago(60_000), until: 'now' }, /^body\.until must be an ISO 8601 date/],
        [{ since: 12 }, /body\.since must be of type string/],
        [{ since: future }, /^body\.since must not be in the future/],
        [{ since: ago(60_000), until: future }, /^body\.until must not be in the future/],
        [{ since: ago(1_000), until: ago(60_000) }, /^body\.since must be earlier than body\.until/],
        [{ since: sameInstant, until: sameInstant.replace(/Z$/, '+00:00') }, /since must be earlier than body\.until/],
        // DELIVERY_RETENTION is 2h here: older events have been deleted.
        [{ since: ago(3 * 3_600_000) }, /^body\.since must be at or after .*Z: events older than DELIVERY_RETENTION have been deleted/],
        [{ since: ago(60_000), limit: 5 }, /body\.limit is not a known field/],
      ];
      for (const [body, re] of cases) {
        const r = await recover(t, key, id, body);
        assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re, JSON.stringify(body));
      }
      // Just inside the retention is fine.
      assert.equal((await recover(t, key, id, { since: ago(2 * 3_600_000 - 60_000) })).status, 202);

      await t.request('PUT', `/v1/webhooks/${id}`, { key, body: { enabled: false } });
      const refused = await recover(t, key, id, { since: ago(60_000) });
      assert.equal(refused.status, 400, refused.text);
      assert.match(refused.body.error.message, /webhook wh_\w+ is disabled; re-enable it \(PUT enabled: true\) before recovering/);
      assert.equal((await deliveriesOf(t, id)).filter((d) => d.status === 'pending').length, 0, 'nothing written');
    });

    test("scope webhooks:write; another account's webhook and an unknown one are 404s", async () => {
      const { accountId, key, id } = await missed(2);
      const readOnly = await t.ctx.services.accounts.createKey({ accountId, type: 'server', scopes: ['webhooks:read'] });
      const forbidden = await recover(t, readOnly.key, id, { since: ago(60_000) });
      assert.equal(forbidden.status, 403, forbidden.text);
      assert.equal(forbidden.body.error.code, 'FORBIDDEN');
      const other = await t.account();
      for (const [k, hook] of [[other.key, id], [key, 'wh_nope']] as const) {
        const r = await recover(t, k, hook, { since: ago(60_000) });
        assert.equal(r.status, 404, r.text);
        assert.equal(r.body.error.code, 'NOT_FOUND');
      }
      assert.equal((await deliveriesOf(t, id)).filter((d) => d.status === 'pending').length, 0, 'nothing written');
      assert.equal((await recover(t, key, id, { since: ago(60_000) })).body.data.recovered, 2);
    });

    test(`at most ${RECOVER_MAX} per call; next is where the following call starts, and the calls together take every event once`, async () => {
      const { accountId, key } = await t.account();
      const id = await createHook(t, key, 'http://127.0.0.1:9/hooks', ['conversation.message']);
      // Three events per millisecond, so the cut falls inside one: the call after it must not repeat that millisecond's.
      const base = Date.now() - 3_600_000;
      const total = RECOVER_MAX + 5;
      const rows = Array.from({ length: total }, (_, i) => {
        const at = base + Math.floor(i / 3);
        return { id: newId('evt', at), account_id: accountId, kind: 'conversation.message', payload: JSON.stringify({ event: 'conversation.message', timestamp: toIso(at), data: { i } }), created_at: at };
      });
      for (let i = 0; i < total; i += 1_000) await t.ctx.db.insertInto('events').values(rows.slice(i, i + 1_000)).execute();
      const ordered = [...rows].sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : 1));
      const until = new Date().toISOString();

      const first = await recover(t, key, id, { since: toIso(base), until });
      assert.equal(first.status, 202, first.text);
      assert.equal(first.body.data.recovered, RECOVER_MAX);
      assert.equal(first.body.data.next, toIso(ordered[RECOVER_MAX]!.created_at));
      assert.equal(first.body.data.next, toIso(ordered[RECOVER_MAX - 1]!.created_at), 'the cut is inside a millisecond');
      const taken = await deliveriesOf(t, id);
      assert.deepEqual(new Set(taken.map((d) => d.event_id)), new Set(ordered.slice(0, RECOVER_MAX).map((e) => e.id)), 'the oldest first');

      const second = await recover(t, key, id, { since: first.body.data.next, until });
      assert.deepEqual(second.body.data, { recovered: 5, since: first.body.data.next, until, next: null });
      const third = await recover(t, key, id, { since: toIso(base), until });
      assert.equal(third.body.data.recovered, 0);

      const all = await deliveriesOf(t, id);
      assert.equal(all.length, total);
      assert.equal(new Set(all.map((d) => d.event_id)).size, total, 'one delivery per event');
      assert.ok(all.every((d) => d.status === 'pending' && d.url === 'http://127.0.0.1:9/hooks'));
      const sample = all.find((d) => d.event_id === ordered[42]!.id)!;
      assert.equal(sample.body, ordered[42]!.payload, 'the stored body');
    });

    test("an erased conversation's events are not recovered; another conversation's are", async () => {
      const a = await t.account();
      const id = await createHook(t, a.key, 'http://127.0.0.1:9/hooks', [...SUBSCRIBABLE_EVENTS]);
      const since = ago(1_000);
      const convs: string[] = [];
      for (const customerId of ['erased-customer', 'kept-customer']) {
        const c = await t.request('POST', '/v1/chat/conversations', { key: a.key, body: { customerId } });
        assert.equal(c.status, 201, c.text);
        const s = await t.request('POST', `/v1/chat/conversations/${c.body.data.conversation.id}/messages`, { key: a.key, body: { content: `secret words of ${customerId}` } });
        assert.equal(s.status, 200, s.text);
        convs.push(c.body.data.conversation.id);
      }
      // The outage cancels every delivery; the erasure then deletes the first conversation's events and deliveries.
      await t.request('PUT', `/v1/webhooks/${id}`, { key: a.key, body: { enabled: false } });
      const erased = await t.request('DELETE', `/v1/conversations/${convs[0]}`, { key: a.key });
      assert.equal(erased.status, 200, erased.text);
      await t.request('PUT', `/v1/webhooks/${id}`, { key: a.key, body: { enabled: true } });

      const r = await recover(t, a.key, id, { since });
      assert.equal(r.status, 202, r.text);
      const pending = (await deliveriesOf(t, id)).filter((d) => d.status === 'pending');
      assert.equal(r.body.data.recovered, pending.length);
      assert.ok(!pending.some((d) => d.body.includes('secret words of erased-customer')), 'nothing of the erased conversation');
      assert.ok(pending.some((d) => d.body.includes('secret words of kept-customer')), 'the other conversation is recovered');
      // Its erasure notice (ids only) is an event like any other.
      assert.deepEqual(pending.filter((d) => d.body.includes(convs[0]!)).map((d) => d.event), ['conversation.erased']);
    });

    test('concurrent recovers of one webhook create each delivery once', async () => {
      const { key, id, emitted } = await missed(30);
      const since = ago(60_000);
      const answers = await Promise.all(Array.from({ length: 4 }, () => recover(t, key, id, { since })));
      assert.ok(answers.every((r) => r.status === 202), answers.map((r) => r.text).join('\n'));
      assert.equal(answers.reduce((n, r) => n + r.body.data.recovered, 0), 30);
      const all = await deliveriesOf(t, id);
      assert.deepEqual(all.map((d) => d.event_id).sort(), emitted.map((e) => e.id).sort());
    });

    const pgOnly = { skip: dialect !== 'postgres' && 'PostgreSQL only: SQLite runs one write transaction at a time' };
    const backendPid = async (trx: Transaction<DB>) => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;

    test('recovers racing on the webhook: the second waits for the first and then finds nothing missed', pgOnly, async () => {
      const { accountId, key, id, emitted } = await missed(20);
      const since = ago(60_000);
      let racing: Array<Promise<{ status: number; body: any; text: string }>> = [];
      await t.ctx.db.transaction().execute(async (trx) => {
        // Another writer of the webhook row (a PUT) holds it while both recovers arrive.
        await trx.selectFrom('webhooks').select('id').where('account_id', '=', accountId).where('id', '=', id).forUpdate().execute();
        racing = [recover(t, key, id, { since }), recover(t, key, id, { since })];
        await waitingBehind(await backendPid(trx), 2);
      });
      const answers = await Promise.all(racing);
      assert.deepEqual(answers.map((r) => r.status), [202, 202], answers.map((r) => r.text).join('\n'));
      assert.deepEqual(answers.map((r) => r.body.data.recovered).sort(), [0, 20]);
      assert.deepEqual((await deliveriesOf(t, id)).map((d) => d.event_id).sort(), emitted.map((e) => e.id).sort());
    });

    test('a recover waiting on a disable or a delete leaves nothing pending behind it', pgOnly, async () => {
      for (const change of ['disable', 'delete'] as const) {
        const { accountId, key, id } = await missed(5);
        let racing: Promise<{ status: number; text: string }> | undefined;
        await t.ctx.db.transaction().execute(async (trx) => {
          // The PUT enabled:false (or the DELETE), committed while the recover waits for the row.
          await trx.selectFrom('webhooks').select('id').where('account_id', '=', accountId).where('id', '=', id).forUpdate().execute();
          racing = recover(t, key, id, { since: ago(60_000) });
          await waitingOn(await backendPid(trx), 1);
          if (change === 'disable') await trx.updateTable('webhooks').set({ enabled: 0, disabled_reason: 'disabled by request' }).where('id', '=', id).execute();
          else await trx.deleteFrom('webhooks').where('id', '=', id).execute();
          await deliveriesRepository.cancelPending(trx, accountId, id, Date.now());
        });
        const r = await racing!;
        assert.equal(r.status, change === 'disable' ? 400 : 404, r.text);
        assert.equal((await deliveriesOf(t, id)).filter((d) => d.status === 'pending').length, 0, change);
      }
    });

    test('a recover and an erasure at once: whichever goes first, no delivery of the erased events is left', pgOnly, async () => {
      for (const first of ['erasure', 'recover'] as const) {
        const a = await t.account();
        const id = await createHook(t, a.key, 'http://127.0.0.1:9/hooks', ['conversation.started', 'conversation.message']);
        await t.request('PUT', `/v1/webhooks/${id}`, { key: a.key, body: { enabled: false } });
        const c = await t.request('POST', '/v1/chat/conversations', { key: a.key, body: { customerId: 'to-be-erased' } });
        const conv = c.body.data.conversation.id as string;
        await t.request('POST', `/v1/chat/conversations/${conv}/messages`, { key: a.key, body: { content: 'erase my words' } });
        await t.request('PUT', `/v1/webhooks/${id}`, { key: a.key, body: { enabled: true } });
        const window = { since: Date.now() - 60_000, until: Date.now() };
        const eventIds = (await t.ctx.db.selectFrom('events').select('id').where('account_id', '=', a.accountId).execute()).map((e) => e.id);
        assert.ok(eventIds.length >= 3);

        let other: Promise<{ status: number; body: any; text: string }> | undefined;
        await t.ctx.db.transaction().execute(async (trx) => {
          const pid = await backendPid(trx);
          if (first === 'erasure') {
            // The erasure's reads and deletes of the conversation's events, not yet committed when the recover comes.
            await conversationsRepository.find(trx, a.accountId, conv, true);
            const events = await conversationsRepository.eventsOf(trx, a.accountId, conv, 0);
            await conversationsRepository.deleteDeliveriesOf(trx, a.accountId, events.map((e) => e.id));
            await conversationsRepository.deleteEvents(trx, a.accountId, events.map((e) => e.id));
            await conversationsRepository.delete(trx, a.accountId, conv);
            other = recover(t, a.key, id, { since: toIso(window.since) });
          } else {
            // The recover's insert, not yet committed when the erasure comes.
            const hook = (await trx.selectFrom('webhooks').selectAll().where('id', '=', id).forUpdate().executeTakeFirstOrThrow());
            const ids = eventIds.map(() => newId('dlv')).sort();
            const n = await deliveriesRepository.insertRecovered(trx, a.accountId, hook, JSON.parse(hook.events), window, ids, { now: Date.now(), due: Date.now() });
            assert.equal(n, eventIds.length);
            other = t.request('DELETE', `/v1/conversations/${conv}`, { key: a.key });
          }
          await waitingOn(pid, 1);
        });
        const r = await other!;
        assert.equal(r.status, first === 'erasure' ? 202 : 200, r.text);
        const left = (await deliveriesOf(t, id)).filter((d) => d.body.includes('to-be-erased') || d.body.includes('erase my words'));
        assert.deepEqual(left.map((d) => d.event), [], `${first} first`);
      }
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`recovered deliveries wake the worker (${dialect})`, () => {
    // The worker polls every 30 s, so a delivery within seconds was woken: on SQLite the worker of the same process, on
    // PostgreSQL one in another context (another process), told by NOTIFY after the commit.
    const env = { WORKER_POLL_INTERVAL: '30s' };
    const t = useTestApp(dialect, { env });
    let rx: TestServer;
    before(async () => {
      rx = await startServer();
      t.beforeClose(() => rx.close());
      if (dialect === 'sqlite') {
        const worker = startWorker(t);
        t.beforeClose(() => worker.stop());
        return;
      }
      const workerDb = openDatabase(t.database.url);
      t.beforeClose(() => workerDb.close());
      const ctx = createContext(loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true', ...env, DATABASE_URL: t.database.url }), workerDb, systemClock, quietLog);
      const worker = createWorker(workerTasks(ctx), quietLog);
      worker.start();
      t.beforeClose(() => worker.stop());
      await waitFor(async () => {
        const r = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where query = ${`LISTEN "${deliveriesChannel(t.database.schema)}"`}`.execute(t.ctx.db);
        return r.rows[0]!.n > 0;
      }, 'the worker to LISTEN');
    });

    test('a recover is delivered long before the next poll', async () => {
      const id = await createHook(t, t.key, `${rx.url}/woken`, ['conversation.started']);
      await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { enabled: false } });
      const e = await emit(t, t.accountId, 'conversation.started', { woken: true });
      await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { enabled: true } });
      await sleep(200);
      const started = Date.now();
      const r = await recover(t, t.key, id, { since: ago(60_000) });
      assert.equal(r.body.data.recovered, 1, r.text);
      await waitFor(() => rx.received.length === 1, 'the recovered delivery', 5_000);
      assert.ok(Date.now() - started < 5_000);
      assert.equal(rx.received[0]!.body.toString(), e.body);
    });
  });
}
