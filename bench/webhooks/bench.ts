/**
 * Webhook delivery throughput and latency, emit → 2xx at a fast local receiver, beside the raw rate of the
 * same POSTs sent straight with undici. Run: node --import tsx bench/webhooks/bench.ts [sqlite|postgres|URL]
 * (`postgres`: a new schema in the local test database, dropped afterwards).
 */
import { spawn } from 'node:child_process';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Agent } from 'undici';
import { loadConfig } from '../../src/config.js';
import { benchDatabase } from '../database.mjs';
import { createContext } from '../../src/context.js';
import { migrateToLatest, openDatabase } from '../../src/db/database.js';
import { writeTransaction } from '../../src/db/unit-of-work.js';
import { systemClock } from '../../src/lib/clock.js';
import { buildDeliveryHeaders } from '../../src/modules/webhooks/signing.js';
import { workerTasks } from '../../src/worker/tasks.js';
import { createWorker } from '../../src/worker/worker.js';

const now = () => performance.timeOrigin + performance.now();
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] ?? NaN;
};

// Events come from 50 concurrent writers by default, as from that many API requests in flight, whose commits SQLite
// shares. BENCH_EMITTERS=1 emits one after another: then each emit waits for its own sync (~1 ms with
// synchronous=FULL) and the emitter, not the deliveries, sets the rate.
const EMITTERS = Number(process.env.BENCH_EMITTERS ?? 50);
// BENCH_WORKER=process runs the deliveries in a separate `parley worker` process on the same database (run
// `npm run build` first), as an operator would to give them their own CPU; default: in this process, as
// `parley serve` runs them.
const SPLIT = process.env.BENCH_WORKER === 'process';
// BENCH_HOOKS=1 runs only the one-webhook case (default: 1 and 20).
const HOOKS = (process.env.BENCH_HOOKS ?? '1,20').split(',').map(Number);

async function main() {
  const dir = mkdtempSync(join(tmpdir(), 'parley-bench-'));
  const arg = process.argv[2] ?? 'sqlite';
  const bench = arg === 'sqlite' || arg === 'postgres' ? await benchDatabase(arg, dir, 'bench_webhooks') : { url: arg, drop: async () => {} };
  const url = bench.url;
  // SQLITE_SYNCHRONOUS=normal compares the two durability settings (default full, as the service runs).
  const config = loadConfig({ DATABASE_URL: url, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'error', SQLITE_SYNCHRONOUS: process.env.SQLITE_SYNCHRONOUS });
  const database = openDatabase(url, { poolSize: 20, sqliteSynchronous: config.sqliteSynchronous });
  await migrateToLatest(database.db);
  const ctx = createContext(config, database, systemClock);

  // The receiver: answers 200 at once, records when each event's first attempt arrived.
  const firstArrival = new Map<string, number>();
  let received = 0;
  let onReceived: (() => void) | null = null;
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const t = now();
      const id = req.headers['x-service-delivery-id'] as string;
      if (!firstArrival.has(id)) firstArrival.set(id, t);
      received++;
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('ok');
      onReceived?.();
    });
  });
  server.keepAliveTimeout = 60_000;
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const untilReceived = (n: number) =>
    new Promise<void>((resolve) => {
      onReceived = () => {
        if (received >= n) {
          onReceived = null;
          resolve();
        }
      };
      onReceived();
    });

  const worker = SPLIT ? null : createWorker(workerTasks(ctx), { info() {}, warn: (o) => console.error(o), error: (o) => console.error(o) });
  worker?.start();
  const child = SPLIT
    ? spawn(process.execPath, [join(import.meta.dirname, '../../bin/parley.js'), 'worker'], {
        env: { ...process.env, DATABASE_URL: url, WEBHOOK_ALLOW_PRIVATE_URLS: 'true', LOG_LEVEL: 'error' },
        stdio: ['ignore', 'ignore', 'inherit'],
      })
    : null;

  const results: Record<string, unknown>[] = [];
  const sampleBody = JSON.stringify({ event: 'conversation.message', timestamp: new Date().toISOString(), data: { conversationId: 'conv_x', content: 'x'.repeat(200) } });

  for (const hooks of HOOKS) {
    const acct = await ctx.services.accounts.createAccount({ name: `bench ${hooks}`, plan: 'enterprise', rateLimitMinute: 1e6, rateLimitDay: 1e9 });
    for (let i = 0; i < hooks; i++) {
      await ctx.services.webhooks.create(acct.id, { url: `${base}/h${i}`, events: ['conversation.message'], secret: 'bench-secret-123' });
    }
    // Throughput: a storm of emits (one transaction each), time until every delivery got its 2xx.
    const events = Number(process.env.BENCH_EVENTS ?? 0) || (hooks === 1 ? 10_000 : 500);
    const total = events * hooks;
    received = 0;
    firstArrival.clear();
    const t0 = now();
    const cpu0 = process.cpuUsage();
    // Emitted as the API emits: each event in its own write transaction (writeTransaction, group-committed on
    // SQLite), from EMITTERS concurrent writers, like that many requests in flight (1: one after another).
    let nextEvent = 0;
    await Promise.all(
      Array.from({ length: EMITTERS }, async () => {
        while (nextEvent < events) {
          const i = nextEvent++;
          await writeTransaction(ctx.db, (trx) => ctx.events.emit(trx, acct.id, 'conversation.message', { seq: i, content: 'x'.repeat(200) }));
        }
      }),
    );
    const emitted = now();
    const receivedWhileEmitting = received;
    await untilReceived(total);
    const t1 = now();
    const cpu = process.cpuUsage(cpu0);
    // Latency: paced emits (200/s), emit → first attempt arriving.
    const lat: number[] = [];
    const paced = 200;
    for (let i = 0; i < paced; i++) {
      const before = received;
      const te = now();
      const ev = await writeTransaction(ctx.db, (trx) => ctx.events.emit(trx, acct.id, 'conversation.message', { seq: i, paced: true }));
      void ev;
      await untilReceived(before + hooks);
      lat.push(now() - te);
      await new Promise((r) => setTimeout(r, 5));
    }
    // Raw baseline: the same number of signed POSTs straight through undici, same concurrency.
    const agent = new Agent({ connections: 16, pipelining: 1 });
    let next = 0;
    const tr0 = now();
    await Promise.all(
      Array.from({ length: Math.min(64, 16 * hooks) }, async () => {
        while (next < total) {
          const i = next++;
          const headers = buildDeliveryHeaders({ deliveryId: `raw_${i}`, event: 'conversation.message', secret: 'bench-secret-123', body: sampleBody });
          const r = await agent.request({ origin: base, path: `/h${i % hooks}`, method: 'POST', headers, body: sampleBody });
          await r.body.dump();
        }
      }),
    );
    const tr1 = now();
    await agent.close();
    const rate = total / ((t1 - t0) / 1000);
    const raw = total / ((tr1 - tr0) / 1000);
    results.push({
      dialect: database.dialect,
      webhooks: hooks,
      deliveries: total,
      emitters: EMITTERS,
      worker: SPLIT ? 'process' : 'in-process',
      emitSeconds: +((emitted - t0) / 1000).toFixed(2),
      deliveriesPerSecond: Math.round(rate),
      // Split at the end of the emits: while the emitters ran, and draining the backlog after them.
      whileEmittingPerSecond: Math.round(receivedWhileEmitting / ((emitted - t0) / 1000)),
      drainPerSecond: Math.round((total - receivedWhileEmitting) / ((t1 - emitted) / 1000)),
      rawUndiciPerSecond: Math.round(raw),
      ratioToRaw: +(rate / raw).toFixed(2),
      // CPU time of this process (emitters, receiver and, unless BENCH_WORKER=process, the worker) per delivery:
      // steadier than the rates on a shared machine.
      cpuUsPerDelivery: Math.round((cpu.user + cpu.system) / total),
      latencyP50Ms: +pct(lat, 50).toFixed(1),
      latencyP99Ms: +pct(lat, 99).toFixed(1),
    });
    console.log(JSON.stringify(results.at(-1)));
  }

  await worker?.stop();
  if (child) {
    child.kill('SIGTERM');
    await new Promise((r) => child.once('exit', r));
  }
  await ctx.deliveries.close();
  server.closeAllConnections();
  server.close();
  await database.close();
  await bench.drop();
  rmSync(dir, { recursive: true, force: true });
}

await main();
