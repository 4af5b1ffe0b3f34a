import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS, PG_URL } from '../../helpers/db.js';
import { openDatabase } from '../../../src/db/database.js';
import { createDeliveryEngine } from '../../../src/modules/webhooks/delivery.js';
import { createUndiciSender } from '../../../src/modules/webhooks/sender.js';
import { startServer } from './helpers.js';
import { emit, sleep, waitFor } from './delivery-helpers.js';

const SECRET = 'whsec_test_secret_1';

for (const dialect of DIALECTS) {
  describe(`delivery engine: records and orphans (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { WEBHOOK_RETRY_DELAYS: '0,1h,1h,1h,1h', WEBHOOK_TIMEOUT: '2s' } });
    const engine = (
      maxInFlight = 4,
      db = t.ctx.db,
      log?: { error(obj: unknown, msg?: string): void },
      shares: { perWebhook?: number; perAccount?: number } = {},
    ) =>
      createDeliveryEngine({
        db,
        dialect,
        clock: t.ctx.clock,
        config: t.ctx.config,
        sender: createUndiciSender({ allowPrivate: true }),
        maxInFlight,
        perWebhook: maxInFlight,
        maxUnrecorded: maxInFlight,
        ...(log ? { log } : {}),
        ...shares,
      });

    test("an account whose receivers never answer holds only its share of a worker: another account's delivery goes out meanwhile", async () => {
      // Receivers that take requests and answer none until the end of the test (the 2 s timeout would free them).
      const hanging: Array<() => void> = [];
      const stuck = await startServer((_req, res) => void hanging.push(() => (res.writeHead(200), res.end())));
      const fine = await startServer();
      const other = await t.account();
      const hooks: Array<[string, string]> = [];
      const e = engine(4, t.ctx.db, undefined, { perWebhook: 2, perAccount: 2 });
      try {
        for (const n of [1, 2]) {
          const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${stuck.url}/h${n}`, events: ['rundown.generated'], secret: SECRET } });
          assert.equal(r.status, 201, r.text);
          hooks.push([t.key, r.body.data.id]);
        }
        const r = await t.request('POST', '/v1/webhooks', { key: other.key, body: { url: `${fine.url}/other`, events: ['rundown.generated'], secret: SECRET } });
        assert.equal(r.status, 201, r.text);
        hooks.push([other.key, r.body.data.id]);
        // The first account's deliveries (two webhooks, three events: six) are due first, so the first claim takes
        // as many of them as the worker has room for.
        for (const n of [1, 2, 3]) await emit(t, t.accountId, 'rundown.generated', { n });
        await emit(t, other.accountId, 'rundown.generated', { n: 'other' });
        for (let i = 0; i < 100 && fine.received.length === 0; i++) {
          await e.run();
          await sleep(20);
        }
        assert.equal(fine.received.length, 1, "the other account's delivery was sent");
        // Before any of the first account's requests was answered or timed out: it held its share (2) of the 4 slots.
        assert.equal(hanging.length, 2);
        assert.equal(stuck.received.length, 2);
      } finally {
        for (const answer of hanging) answer();
        await e.close();
        // The deliveries left pending would be the next tests' work: deleting the webhooks cancels them.
        for (const [key, id] of hooks) await t.request('DELETE', `/v1/webhooks/${id}`, { key });
        await stuck.close();
        await fine.close();
      }
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

    test('two workers recording last failures of one webhook at once: both recorded, the webhook disabled, no deadlock', async () => {
      // Two deliveries of one webhook at their fifth (last) attempt, one claimed by each of two engines (a worker
      // each, each with its own connection on PostgreSQL); the receiver fails both at once. Each record may disable
      // the webhook. On PostgreSQL a second connection holds back the records' INSERT into delivery_attempts until
      // both are under way, so they overlap for certain: each used to hold the webhook row FOR SHARE (read by its
      // UPDATE of the delivery) when it came to disable the webhook, and PostgreSQL aborted one as a deadlock,
      // rolling back its record (the delivery left leased, to be sent again once the lease expired).
      const held: Array<() => void> = [];
      const srv = await startServer((_req, res) => {
        held.push(() => {
          res.writeHead(500);
          res.end('boom');
        });
      });
      const errors: unknown[] = [];
      const log = { error: (obj: unknown) => void errors.push(obj) };
      const own = dialect === 'postgres' ? [0, 1].map(() => openDatabase(PG_URL, { schema: t.database.schema!, poolSize: 1 })) : [];
      const dbs = own.length ? own.map((d) => d.db) : [t.ctx.db, t.ctx.db];
      const engines = dbs.map((db) => engine(1, db, log));
      const locker = dialect === 'postgres' ? new pg.Client({ connectionString: PG_URL }) : null;
      try {
        await locker?.connect();
        const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${srv.url}/last`, events: ['escalation.submitted'], secret: SECRET } });
        const id = r.body.data.id as string;
        await emit(t, t.accountId, 'escalation.submitted', { n: 1 });
        await emit(t, t.accountId, 'escalation.submitted', { n: 2 });
        // As after four failed attempts each: the next is the last.
        await t.ctx.db.updateTable('deliveries').set({ attempt_count: 4, auto_attempts: 4 }).where('webhook_id', '=', id).execute();
        for (const e of engines) await e.run(); // one delivery each (one in flight at most)
        await waitFor(() => held.length === 2, 'both last attempts at the receiver');
        const pids = await Promise.all(own.map(async (d) => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(d.db)).rows[0]!.pid));
        if (locker) await locker.query(`BEGIN; SET LOCAL search_path TO ${t.database.schema}; LOCK TABLE delivery_attempts IN EXCLUSIVE MODE`);
        for (const f of held) f();
        if (locker) {
          // Both records are waiting on a lock: on this one, or (one at a time) on each other.
          await waitFor(async () => {
            const w = await locker.query(`select count(*)::int as n from pg_stat_activity where pid = any($1) and wait_event_type = 'Lock'`, [pids]);
            return w.rows[0].n === 2;
          }, 'both records waiting');
          await locker.query('COMMIT');
        }
        const rows = await waitFor(async () => {
          const all = await t.ctx.db.selectFrom('deliveries').select(['id', 'status', 'attempt_count', 'lease_owner']).where('webhook_id', '=', id).execute();
          return errors.length || all.every((x) => x.lease_owner === null) ? all : null;
        }, 'both records committed (or one failed)');
        assert.deepEqual(errors, [], 'no record failed');
        assert.deepEqual(rows.map((x) => [x.status, x.attempt_count, x.lease_owner]), [['failed', 5, null], ['failed', 5, null]]);
        const attempts = await t.ctx.db.selectFrom('delivery_attempts').select(['delivery_id', 'attempt']).where('delivery_id', 'in', rows.map((x) => x.id)).execute();
        assert.deepEqual(attempts.map((a) => a.attempt), [5, 5]);
        const w = await t.ctx.db.selectFrom('webhooks').select(['enabled', 'disabled_reason']).where('id', '=', id).executeTakeFirstOrThrow();
        assert.equal(w.enabled, 0);
        assert.match(w.disabled_reason ?? '', /^5 failed attempts for delivery /);
      } finally {
        await locker?.query('ROLLBACK').catch(() => undefined);
        await locker?.end();
        for (const e of engines) await e.close();
        for (const d of own) await d.close();
        await srv.close();
      }
    });

    test('the lease sweep skips a row a batch of records is writing: no deadlock with it (postgres)', { skip: dialect !== 'postgres' && 'one writer on SQLite' }, async () => {
      // Two expired leases (a worker's whose machine stalled, say); a transaction of another worker is writing one of
      // them (a batch of records: several statements) when the sweep comes, and writes the other next. The sweep's
      // UPDATE used to lock B (earlier expiry, first in its scan), wait for A, and the batch's write of B then closed
      // the cycle: PostgreSQL aborted one of them as a deadlock (seen with two `parley worker`s on a loaded machine).
      const srv = await startServer();
      const locker = new pg.Client({ connectionString: PG_URL });
      await locker.connect();
      const e = engine();
      let sweeping: Promise<unknown> | undefined;
      try {
        const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${srv.url}/s`, events: ['workflow.triggered'], secret: SECRET } });
        const id = r.body.data.id as string;
        await emit(t, t.accountId, 'workflow.triggered', { n: 1 });
        await emit(t, t.accountId, 'workflow.triggered', { n: 2 });
        const [a, b] = (await t.ctx.db.selectFrom('deliveries').select('id').where('webhook_id', '=', id).orderBy('id').execute()).map((x) => x.id);
        const past = t.ctx.clock.now() - 60_000;
        // B first whichever way the sweep scans: its lease expired first (the index's order) and its row version was
        // written first (a sequential scan's).
        await t.ctx.db.updateTable('deliveries').set({ lease_owner: 'stalled', lease_expires_at: past }).where('id', '=', b!).execute();
        await t.ctx.db.updateTable('deliveries').set({ lease_owner: 'stalled', lease_expires_at: past + 1 }).where('id', '=', a!).execute();
        await locker.query(`BEGIN; SET LOCAL search_path TO ${t.database.schema}`);
        await locker.query('update deliveries set updated_at = updated_at + 1 where id = $1', [a]);
        let swept = false;
        sweeping = e.sweep().then(
          () => (swept = true),
          (err: unknown) => err,
        );
        // The sweep is done, or waits for the row this transaction holds.
        await waitFor(async () => {
          if (swept) return true;
          // Inside a transaction pg_stat_activity is a snapshot taken at its first read: cleared, it is read afresh.
          await locker.query('select pg_stat_clear_snapshot()');
          const w = await locker.query(`select 1 from pg_stat_activity where wait_event_type = 'Lock' and query like '%lease_expires_at%' and query not like '%pg_stat_activity%'`);
          return (w.rowCount ?? 0) > 0;
        }, 'the sweep done or waiting');
        await locker.query('update deliveries set updated_at = updated_at + 1 where id = $1', [b]);
        await locker.query('COMMIT');
        assert.equal(await sweeping, true, 'the sweep did not fail');
        const rows = await t.ctx.db.selectFrom('deliveries').select(['id', 'lease_owner']).where('webhook_id', '=', id).orderBy('id').execute();
        assert.deepEqual(rows.map((x) => [x.id, x.lease_owner]), [[a, 'stalled'], [b, null]], 'B released; A, being written, left for the next sweep');
        await e.sweep();
        assert.equal((await t.ctx.db.selectFrom('deliveries').select('id').where('webhook_id', '=', id).where('lease_owner', 'is not', null).execute()).length, 0);
        await t.request('DELETE', `/v1/webhooks/${id}`, { key: t.key });
      } finally {
        await locker.query('ROLLBACK').catch(() => undefined);
        await sweeping;
        await locker.end();
        await e.close();
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
