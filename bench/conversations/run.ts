/*
 * Latency of the conversations and analytics endpoints over a seeded data set (see seed.ts), through real
 * HTTP, beside a bare node:http server answering the same bytes in the same run.
 *
 *   DATABASE_URL=sqlite:./data/bench-conv.db npx tsx bench/conversations/run.ts [--no-migrate] [--requests 300]
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/parley_bench_conv npx tsx bench/conversations/run.ts
 *
 * Requests are sequential on one keep-alive connection (latency, not throughput): per scenario 30 warm-up
 * requests, then N measured ones against Parley and N against the bare server. --no-migrate leaves the
 * database at whatever migration it has (to measure without the analytics index).
 */
import { fork } from 'node:child_process';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { Client } from 'undici';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { migrateToLatest, openDatabase } from '../../src/db/database.js';
import { systemClock } from '../../src/lib/clock.js';
import { accountId, END } from './seed.js';

const args = process.argv.slice(2);
const N = Number(args[args.indexOf('--requests') + 1] ?? 0) || 300;
const WARMUP = 30;
const DAY = 86_400_000;
const iso = (ms: number) => new Date(ms).toISOString();

const config = loadConfig();
const database = openDatabase(config.databaseUrl);
const { db } = database;
if (!args.includes('--no-migrate')) {
  await migrateToLatest(db);
  await sql`analyze`.execute(db);
}
const ctx = createContext(config, database, systemClock);
const migrations = await sql<{ name: string }>`select name from kysely_migration order by name`.execute(db);

async function fixtureFor(acct: string) {
  const { key } = await ctx.services.accounts.createKey({ accountId: acct, type: 'server', scopes: ['conversations:read', 'analytics:read'] });
  const conv = await db.selectFrom('conversations').select(['id', 'message_count']).where('account_id', '=', acct).where('message_count', '>=', 10)
    .orderBy('created_at', 'desc').limit(1).executeTakeFirstOrThrow();
  const cust = await db.selectFrom('conversations').select(['customer_id', (eb) => eb.fn.countAll<number>().as('n')]).where('account_id', '=', acct)
    .groupBy('customer_id').orderBy('n', 'desc').limit(1).executeTakeFirstOrThrow();
  const n = await db.selectFrom('conversations').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', acct).executeTakeFirstOrThrow();
  return { key, convId: conv.id, customerId: cust.customer_id, conversations: Number(n.n) };
}

const scenarios = (f: Awaited<ReturnType<typeof fixtureFor>>): [string, string][] => {
  const last30 = `from=${iso(END - 30 * DAY)}&to=${iso(END)}`;
  return [
    ['list (default)', '/v1/conversations'],
    ['list status=ended', '/v1/conversations?status=ended'],
    ['list last 30 days', `/v1/conversations?${last30}`],
    ['list escalated, 30 days, limit=100', `/v1/conversations?status=escalated&${last30}&limit=100`],
    ['list customerId', `/v1/conversations?customerId=${f.customerId}`],
    ['list deep page (offset = 80% of total)', `/v1/conversations?offset=${Math.floor(f.conversations * 0.8)}`],
    ['get conversation (≥10 messages)', `/v1/conversations/${f.convId}`],
    ['overview all time', '/v1/analytics/overview'],
    ['overview last 30 days', `/v1/analytics/overview?${last30}`],
    ['topics all time', '/v1/analytics/topics'],
    ['topics last 7 days', `/v1/analytics/topics?from=${iso(END - 7 * DAY)}&to=${iso(END)}`],
  ];
};

function pct(sorted: number[], p: number) {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function measure(client: Client, path: string, key: string | null) {
  const headers = key ? { authorization: `Bearer ${key}` } : {};
  const one = async () => {
    const t = performance.now();
    const r = await client.request({ method: 'GET', path, headers });
    const body = await r.body.text();
    if (r.statusCode !== 200) throw new Error(`${path}: ${r.statusCode} ${body}`);
    return performance.now() - t;
  };
  for (let i = 0; i < WARMUP; i++) await one();
  const out: number[] = [];
  for (let i = 0; i < N; i++) out.push(await one());
  out.sort((a, b) => a - b);
  return { p50: pct(out, 50), p95: pct(out, 95), p99: pct(out, 99) };
}

const child = fork(new URL('./server.ts', import.meta.url).pathname, [], { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
const ready = await new Promise<{ parley: number; bare: number }>((resolve) => child.once('message', (m: any) => resolve(m)));
const ask = (msg: object) => new Promise<void>((resolve) => { child.once('message', () => resolve()); child.send(msg); });
const parley = new Client(`http://127.0.0.1:${ready.parley}`);
const bare = new Client(`http://127.0.0.1:${ready.bare}`);

const f2 = (x: number) => x.toFixed(2);
const rows: string[] = [];
const worst = { p95: 0, what: '' };
for (const [label, acct] of [['big (10,000 conv.)', accountId(0)], ['typical', accountId(1)]] as const) {
  const f = await fixtureFor(acct);
  for (const [name, path] of scenarios(f)) {
    const first = await parley.request({ method: 'GET', path, headers: { authorization: `Bearer ${f.key}` } });
    const body = await first.body.text();
    if (first.statusCode !== 200) throw new Error(`${path}: ${first.statusCode} ${body}`);
    await ask({ type: 'body', path, body });
    const p = await measure(parley, path, f.key);
    const b = await measure(bare, path, null);
    if (p.p95 > worst.p95) Object.assign(worst, { p95: p.p95, what: `${label} ${name}` });
    rows.push(`| ${label} (${f.conversations}) | ${name} | ${f2(p.p50)} | ${f2(p.p95)} | ${f2(p.p99)} | ${f2(b.p50)} | ${f2(b.p95)} | ${(p.p50 / b.p50).toFixed(1)}× | ${Buffer.byteLength(body)} |`);
    process.stderr.write(`${rows.at(-1)}\n`);
  }
}
child.send({ type: 'stop' });
await parley.close();
await bare.close();

process.stdout.write(
  [
    `database: ${database.dialect}; migrations: ${migrations.rows.map((r) => r.name).join(', ')}; ${N} sequential requests per row after ${WARMUP} warm-up; node ${process.version}; ${new Date().toISOString()}`,
    '',
    '| account (conversations) | request | Parley p50 ms | p95 ms | p99 ms | bare p50 ms | bare p95 ms | p50 ratio | bytes |',
    '|---|---|---|---|---|---|---|---|---|',
    ...rows,
    '',
    `worst Parley p95: ${f2(worst.p95)} ms (${worst.what})`,
    '',
  ].join('\n'),
);
await database.close();
