/*
 * Deliveries survive a worker killed mid-delivery, and several workers share the queue without sending
 * any attempt twice. The worker runs as a real child process (`parley worker` through tsx) on a SQLite
 * FILE or a PostgreSQL schema shared with this process, which emits the events.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../../src/config.js';
import { createContext } from '../../../src/context.js';
import type { DialectName } from '../../../src/db/database.js';
import { systemClock } from '../../../src/lib/clock.js';
import { createTestDatabase, DIALECTS } from '../../helpers/db.js';
import { sleep, waitFor } from './delivery-helpers.js';
import { startServer, type TestServer } from './helpers.js';

const ENV = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', WEBHOOK_TIMEOUT: '1s', WEBHOOK_RETRY_DELAYS: '0,50ms,50ms,50ms,50ms' };

function spawnWorker(url: string, extraEnv: Record<string, string> = {}): ChildProcess & { ready: Promise<void> } {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/main.ts', 'worker', '--json'], {
    env: { ...process.env, ...ENV, ...extraEnv, DATABASE_URL: url, LOG_LEVEL: 'error' },
    stdio: ['ignore', 'pipe', 'pipe'],
  }) as ChildProcess & { ready: Promise<void> };
  let err = '';
  child.stderr!.on('data', (c: Buffer) => (err += c.toString()));
  child.ready = new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code) => reject(new Error(`worker exited ${code}: ${err}`)));
  });
  return child;
}

const exited = (c: ChildProcess) => new Promise<number | null>((r) => (c.exitCode !== null || c.signalCode ? r(c.exitCode) : c.once('exit', (code) => r(code))));

async function setup(dialect: DialectName, dir: string) {
  const database = await createTestDatabase(dialect, dialect === 'sqlite' ? { file: join(dir, 'crash.db') } : {});
  const ctx = createContext(loadConfig({ ...ENV, DATABASE_URL: database.url }), database, systemClock);
  const acct = await ctx.services.accounts.createAccount({ name: 'crash', plan: 'enterprise', rateLimitMinute: 1000, rateLimitDay: 100000 });
  return { database, ctx, accountId: acct.id };
}

for (const dialect of DIALECTS) {
  describe(`worker crash and restart (${dialect})`, () => {
    let dir: string;
    let env: Awaited<ReturnType<typeof setup>>;
    let rx: TestServer;
    const arrivals: Array<{ path: string; seq: number; at: number; id: string }> = [];
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'parley-crash-'));
      env = await setup(dialect, dir);
      rx = await startServer((req, res, body) => {
        arrivals.push({ path: req.url!, seq: JSON.parse(body.toString()).data.seq, at: Date.now(), id: req.headers['x-service-delivery-id'] as string });
        setTimeout(() => {
          res.writeHead(200);
          res.end();
        }, 3);
      });
    });
    after(async () => {
      await rx.close();
      await env.ctx.deliveries.close();
      await env.database.cleanup();
      rmSync(dir, { recursive: true, force: true });
    });

    test('SIGKILL mid-storm: every event arrives at least once after restart; nothing after its webhook was disabled', async () => {
      const { ctx, accountId } = env;
      const a = await ctx.services.webhooks.create(accountId, { url: `${rx.url}/a`, events: ['conversation.message'], secret: 'secret-aaaa' });
      const b = await ctx.services.webhooks.create(accountId, { url: `${rx.url}/b`, events: ['conversation.message'], secret: 'secret-bbbb' });
      let worker = spawnWorker(env.database.url);
      await worker.ready;
      let seq = 0;
      const storm = async (n: number) => {
        for (let i = 0; i < n / 10; i++) {
          await ctx.db.transaction().execute(async (trx) => {
            for (let j = 0; j < 10; j++) await ctx.events.emit(trx, accountId, 'conversation.message', { seq: seq++ });
          });
        }
      };
      await storm(300);
      await waitFor(() => arrivals.length >= 60, 'deliveries under way');
      worker.kill('SIGKILL');
      await exited(worker);
      const killedAfter = arrivals.length;
      assert.ok(killedAfter < 600, `killed mid-delivery (${killedAfter} of 600 arrived)`);

      await ctx.services.webhooks.update(accountId, b.id, { enabled: false });
      const disabledAt = Date.now();
      await storm(100);

      worker = spawnWorker(env.database.url);
      await worker.ready;
      await waitFor(
        async () => {
          const left = await ctx.db.selectFrom('deliveries').select('id').where('status', '=', 'pending').limit(1).execute();
          return left.length === 0;
        },
        'all deliveries settled',
        30_000,
      );
      worker.kill('SIGTERM');
      assert.equal(await exited(worker), 0, 'graceful exit');

      const seenA = new Set(arrivals.filter((x) => x.path === '/a').map((x) => x.seq));
      for (let s = 0; s < 400; s++) assert.ok(seenA.has(s), `event ${s} reached webhook a`);
      const lateB = arrivals.filter((x) => x.path === '/b' && x.at > disabledAt);
      assert.deepEqual(lateB, [], 'nothing reached b after it was disabled');
      const rows = await ctx.db.selectFrom('deliveries').select(['webhook_id', 'status']).execute();
      assert.ok(rows.filter((r) => r.webhook_id === a.id).every((r) => r.status === 'succeeded'));
      assert.equal(rows.filter((r) => r.webhook_id === a.id).length, 400);
      assert.equal(rows.filter((r) => r.webhook_id === b.id).length, 300, 'no deliveries for a disabled webhook');
      assert.ok(rows.some((r) => r.webhook_id === b.id && r.status === 'cancelled'), 'b had pending deliveries that were cancelled');
      const leased = await ctx.db.selectFrom('deliveries').select('id').where('lease_owner', 'is not', null).execute();
      assert.equal(leased.length, 0, 'SIGTERM released every lease');
    });
  });
}

describe('two workers on PostgreSQL share the queue', () => {
  let dir: string;
  let env: Awaited<ReturnType<typeof setup>>;
  let rx: TestServer;
  const seen = new Map<string, number>();
  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'parley-two-'));
    env = await setup('postgres', dir);
    // The first arrival of each delivery fails, the second succeeds: two attempts each, in order.
    rx = await startServer((req, res) => {
      const id = req.headers['x-service-delivery-id'] as string;
      const n = (seen.get(id) ?? 0) + 1;
      seen.set(id, n);
      res.writeHead(n === 1 ? 503 : 200);
      res.end();
    });
  });
  after(async () => {
    await rx.close();
    await env.ctx.deliveries.close();
    await env.database.cleanup();
    rmSync(dir, { recursive: true, force: true });
  });

  test('no (delivery, attempt) is made twice; attempts are in order; both workers work', async () => {
    const { ctx, accountId } = env;
    for (const p of ['x', 'y']) await ctx.services.webhooks.create(accountId, { url: `${rx.url}/${p}`, events: ['escalation'], secret: 'secret-two-workers' });
    // The receiver answers at once, so no attempt should time out; 1 s did on a loaded machine, when a starved
    // worker read the answer late, and that attempt was then made again (a third arrival).
    const workers = [spawnWorker(env.database.url, { WEBHOOK_TIMEOUT: '15s' }), spawnWorker(env.database.url, { WEBHOOK_TIMEOUT: '15s' })];
    await Promise.all(workers.map((w) => w.ready));
    for (let i = 0; i < 30; i++) {
      await ctx.db.transaction().execute(async (trx) => {
        for (let j = 0; j < 10; j++) await ctx.events.emit(trx, accountId, 'escalation', { i, j });
      });
      await sleep(5);
    }
    await waitFor(
      async () => (await ctx.db.selectFrom('deliveries').select('id').where('status', '=', 'pending').limit(1).execute()).length === 0,
      'all delivered',
      30_000,
    );
    for (const w of workers) w.kill('SIGTERM');
    await Promise.all(workers.map(exited));
    assert.equal(seen.size, 600);
    for (const [id, n] of seen) assert.equal(n, 2, `delivery ${id} arrived ${n} times`);
    const attempts = await ctx.db.selectFrom('delivery_attempts').selectAll().orderBy('delivery_id').orderBy('attempt').execute();
    assert.equal(attempts.length, 1200);
    const byDelivery = new Map<string, typeof attempts>();
    for (const a of attempts) byDelivery.set(a.delivery_id, [...(byDelivery.get(a.delivery_id) ?? []), a]);
    for (const [id, list] of byDelivery) {
      assert.deepEqual(list.map((a) => [a.attempt, a.status_code]), [[1, 503], [2, 200]], id);
      assert.ok(list[1]!.at >= list[0]!.at + list[0]!.duration_ms, `${id}: attempt 2 started after attempt 1 ended`);
    }
    const owners = new Set(attempts.map((a) => a.worker));
    assert.equal(owners.size, 2, 'both workers made attempts');
  });
});
