/*
 * Two `parley worker`s on one PostgreSQL database, one of them on a machine whose clock is 90 s ahead (simulated with
 * a test-only preload that shifts Date.now: test/helpers/skewed-clock.mjs). Real processes, the build, as an operator
 * runs them. Every process tells time by the database server's clock (src/db/server-clock.ts), so the skewed worker
 * must not:
 *  - take over the other worker's live lease (by its own clock the lease would have expired 29 s before it was even taken) and send that
 *    delivery a second time while the first attempt is still waiting on a slow receiver;
 *  - end a conversation that has been idle for seconds as if it had been idle past CONVERSATION_IDLE_TIMEOUT;
 * and what it does write (an attempt, the signature's timestamp) carries the server's time, not its own. It says at
 * start that its clock is off.
 */
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import type { ServerResponse } from 'node:http';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { openDatabase, type Database } from '../../src/db/database.js';
import { until } from '../helpers/until.js';
import { startServer, type TestServer } from '../modules/webhooks/helpers.js';
import { cli, ENTRY, oneJson, startServe, stopChild, useCliDatabase } from './cli-suite.js';

const SKEW_MS = 90_000;
const SKEWED = join(import.meta.dirname, '../helpers/skewed-clock.mjs');
const ENV = {
  LOG_LEVEL: 'warn',
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  // A lease is 2 × WEBHOOK_TIMEOUT + 1 s = 61 s, inside the skew (a worker 90 s ahead would see it expired); the sweeper
  // looks every 10 s (its cap). The held first attempt must not time out while the test watches: at 12 s it did, once, in a full
  // run on a loaded machine (the skewed worker's start and the watch took over 12 s), and its failure released the lease.
  WEBHOOK_TIMEOUT: '30s',
  // Inside the skew too: a worker 90 s ahead would find a conversation started a moment ago idle for 90 s.
  CONVERSATION_IDLE_TIMEOUT: '60s',
};
/**
 * Long enough for the skewed worker's lease sweeper to run at its start and once more (every 10 s), and short enough
 * that the held attempt (sent before the skewed worker starts) is still waiting at the end (WEBHOOK_TIMEOUT 30 s).
 */
const WATCH_MS = 12_000;

function startWorker(env: Record<string, string>, preload?: string) {
  const child = spawn(process.execPath, [...(preload ? ['--import', preload] : []), ENTRY, 'worker', '--json'], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const ready = new Promise<void>((resolve, reject) => {
    child.stdout!.once('data', () => resolve());
    child.once('exit', (code, signal) => reject(new Error(`worker exited (${code ?? signal}) before it started: ${stderr}`)));
  });
  ready.catch(() => undefined);
  return { child, ready, stderr: () => stderr };
}

const exited = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode ? r() : c.once('exit', () => r())));

/** The warn lines a worker logged (pino JSON on stderr). */
const warnings = (stderr: string) =>
  stderr
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { level: number; msg: string; offsetMs?: number })
    .filter((l) => l.level === 40);

describe('a worker whose clock is 90 s ahead, beside another on the same PostgreSQL database', () => {
  const c = useCliDatabase('postgres');

  test('does not take over the other worker’s live lease (no second send), nor end a fresh conversation; writes the server’s time', async (t) => {
    const env = { ...c.env, ...ENV };
    const init = await cli(['init', '--json'], env);
    assert.equal(init.code, 0, init.stderr);
    const key = oneJson(init).key.key as string;

    // The first request is held unanswered (a slow receiver) until the test lets it go; later ones answer at once.
    let held: ServerResponse | null = null;
    const rx: TestServer = await startServer((_req, res) => {
      if (rx.received.length === 1) held = res;
      else res.writeHead(200).end();
    });
    const api = await startServe(env);
    const workers: ReturnType<typeof startWorker>[] = [];
    let db: Database | undefined;
    try {
      db = openDatabase(c.env.DATABASE_URL!);
      const q = db.db;
      const post = async (path: string, body: unknown) => {
        const r = await fetch(`${api.url}/v1${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
        const text = await r.text();
        assert.ok(r.status < 300, `${path}: ${r.status} ${text}`);
        return (JSON.parse(text) as { data: any }).data;
      };
      await post('/webhooks', { url: `${rx.url}/hook`, events: ['conversation.started'], secret: 'skew-secret' });

      const right = startWorker(env);
      workers.push(right);
      await right.ready;
      const first = (await post('/chat/conversations', { customerId: 'cust_1' })).conversation.id as string;
      await until(() => rx.received.length === 1 && held, 'the first delivery at the slow receiver', 20_000);
      const deliveryId = String(rx.received[0]!.headers['x-service-delivery-id']);
      const lease = await q.selectFrom('deliveries').select(['lease_owner', 'lease_expires_at']).where('id', '=', deliveryId).executeTakeFirstOrThrow();
      assert.match(lease.lease_owner ?? '', new RegExp(`:${right.child.pid}:`), 'the un-skewed worker holds the lease');

      const skewed = startWorker({ ...env, PARLEY_TEST_CLOCK_SKEW_MS: String(SKEW_MS) }, SKEWED);
      workers.push(skewed);
      await skewed.ready;
      // Its sweeper and its idle sweeper ran at its start; watched past its sweeper's next run. A failure shows at once.
      const watchUntil = Date.now() + WATCH_MS;
      while (Date.now() < watchUntil) {
        assert.equal(rx.received.length, 1, 'the delivery under a live lease was sent a second time (by the skewed worker)');
        const now = await q.selectFrom('deliveries').select('lease_owner').where('id', '=', deliveryId).executeTakeFirstOrThrow();
        assert.equal(now.lease_owner, lease.lease_owner, 'the lease stays with its holder');
        const conv = await q.selectFrom('conversations').select('ended_at').where('id', '=', first).executeTakeFirstOrThrow();
        assert.equal(conv.ended_at, null, 'a conversation idle for seconds was ended (by the skewed worker)');
        await new Promise((r) => setTimeout(r, 50));
      }

      // The receiver answers: the holder records its one attempt.
      (held as ServerResponse | null)?.writeHead(200).end();
      await until(
        async () => (await q.selectFrom('deliveries').select('status').where('id', '=', deliveryId).executeTakeFirstOrThrow()).status === 'succeeded',
        'the held delivery recorded',
        20_000,
      );
      const attempts = await q.selectFrom('delivery_attempts').select(['worker']).where('delivery_id', '=', deliveryId).execute();
      assert.equal(attempts.length, 1);
      assert.match(attempts[0]!.worker, new RegExp(`:${right.child.pid}:`));

      // With the other worker gone, the skewed one delivers, stamping the server's time, not its own.
      assert.equal(await stopChild(right.child), 0);
      const sentFrom = Date.now();
      await post('/chat/conversations', { customerId: 'cust_2' });
      await until(() => rx.received.length === 2, 'the skewed worker’s delivery', 20_000);
      const stamp = Number(rx.received[1]!.headers['webhook-timestamp']) * 1000;
      assert.ok(Math.abs(stamp - sentFrom) < 5_000, `webhook-timestamp ${stamp - sentFrom} ms from the receiver's clock`);
      const second = String(rx.received[1]!.headers['x-service-delivery-id']);
      const attempt = await until(
        () => q.selectFrom('delivery_attempts').select(['worker', 'at']).where('delivery_id', '=', second).executeTakeFirst(),
        'the skewed worker’s attempt recorded',
        20_000,
      );
      assert.match(attempt.worker, new RegExp(`:${skewed.child.pid}:`));
      assert.ok(Math.abs(attempt.at - sentFrom) < 5_000, `attempt at ${attempt.at - sentFrom} ms from the test's clock`);

      // The operator is told, once, by the skewed worker only.
      const said = warnings(skewed.stderr()).filter((w) => /clock/.test(w.msg));
      assert.equal(said.length, 1, skewed.stderr());
      assert.ok(Math.abs(said[0]!.offsetMs! + SKEW_MS) < 1_000, `offset logged: ${said[0]!.offsetMs}`);
      assert.match(said[0]!.msg, /90\.0 s ahead of the database server's/);
      assert.deepEqual(warnings(right.stderr()).filter((w) => /clock/.test(w.msg)), []);
      assert.equal(await stopChild(skewed.child), 0);
      t.diagnostic(`skewed worker: ${said[0]!.msg} (offset ${said[0]!.offsetMs} ms)`);
    } finally {
      for (const w of workers) {
        if (w.child.exitCode === null && !w.child.signalCode) {
          w.child.kill('SIGKILL');
          await exited(w.child);
        }
      }
      await api.stop();
      await rx.close();
      await db?.close();
    }
  });
});
