// How NOTIFY inside a transaction limits PostgreSQL's commit rate: N concurrent clients each run
// BEGIN; INSERT; SELECT pg_notify(...) or SELECT ''; COMMIT in a loop (the same round trips either way), in
// alternating rounds.
// PostgreSQL takes one cluster-wide lock for the commit of every transaction that ran NOTIFY and holds it through
// the commit's WAL flush, so those commits cannot share a flush. Parley announces after the commit instead
// (src/db/notify.ts). Usage: node bench/postgres/notify-commits.mjs [--clients 50] [--seconds 5] [--rounds 3]
import { parseArgs } from 'node:util';
import pg from 'pg';

const { values } = parseArgs({ options: { clients: { type: 'string', default: '50' }, seconds: { type: 'string', default: '5' }, rounds: { type: 'string', default: '3' } } });
const url = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const table = `bench_notify_${process.pid}`;
const admin = new pg.Client({ connectionString: url });
await admin.connect();
await admin.query(`create table ${table} (id bigserial primary key, body text not null)`);
const clients = await Promise.all(
  Array.from({ length: Number(values.clients) }, async () => {
    const c = new pg.Client({ connectionString: url });
    await c.connect();
    return c;
  }),
);

async function run(notify) {
  const until = Date.now() + Number(values.seconds) * 1000;
  let commits = 0;
  await Promise.all(
    clients.map(async (c) => {
      while (Date.now() < until) {
        await c.query('begin');
        await c.query(`insert into ${table} (body) values ($1)`, ['x'.repeat(200)]);
        await c.query(notify ? `select pg_notify('bench_notify', '')` : `select ''`);
        await c.query('commit');
        commits++;
      }
    }),
  );
  return Math.round(commits / Number(values.seconds));
}

const rows = { without: [], with: [] };
for (let i = 0; i < Number(values.rounds); i++) {
  rows.without.push(await run(false));
  rows.with.push(await run(true));
}
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(JSON.stringify({ clients: clients.length, seconds: Number(values.seconds), commitsPerSecondWithoutNotify: rows.without, withNotify: rows.with, medians: [median(rows.without), median(rows.with)] }));
await Promise.all(clients.map((c) => c.end()));
await admin.query(`drop table ${table}`);
await admin.end();
