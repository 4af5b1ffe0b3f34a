// Two `parley accounts delete ID --yes` runs of one large account started together on PostgreSQL (real CLI processes,
// as two operators or a retry would run them): how long each run's transactions lasted, how long they waited on a row
// lock, and what each deleted. Usage (after `node scripts/build.mjs`):
//   node --import tsx bench/accounts/delete-concurrent.ts [--reps 5] [--messages 50000] [--events 50000] [--deliveries 50000] [--verbose] [--json]
// The account: one webhook, conversations of 100 messages each, events, succeeded deliveries with one attempt each
// (test/modules/accounts/fixtures.ts bulkFill). PostgreSQL at TEST_DATABASE_URL or 127.0.0.1:5432/test, a schema of
// its own per repetition, dropped at the end.
//
// A watcher connection samples pg_stat_activity every few milliseconds for the two runs' backends (told apart by
// application_name): a transaction lasts from its xact_start to the last sample that saw it; it waited on a lock for as
// long as the samples saw it in wait_event_type 'Lock' (first to last such sample). Sampling resolution: a few ms.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import pg from 'pg';
import { bulkFill } from '../../test/modules/accounts/fixtures.js';
import { createTestDatabase, PG_URL } from '../../test/helpers/db.js';

const { values } = parseArgs({
  options: {
    reps: { type: 'string', default: '5' },
    messages: { type: 'string', default: '50000' },
    events: { type: 'string', default: '50000' },
    deliveries: { type: 'string', default: '50000' },
    verbose: { type: 'boolean', default: false },
    json: { type: 'boolean', default: false },
  },
});
const ENTRY = join(import.meta.dirname, '../../bin/parley.js');
const reps = Number(values.reps);
const shape = { conversations: Math.ceil(Number(values.messages) / 100), messagesEach: 100, events: Number(values.events), deliveries: Number(values.deliveries), attemptsEach: 1 };

interface Xact { app: string; pid: number; start: number; last: number; lockFirst: number | null; lockLast: number | null; tables: Set<string> }

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2;
};

function runCli(url: string, app: string, accountId: string) {
  const child = spawn(process.execPath, [ENTRY, 'accounts', 'delete', accountId, '--yes', '--json'], {
    env: { PATH: process.env.PATH ?? '', DATABASE_URL: `${url}&application_name=${app}`, LOG_LEVEL: 'silent' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
  const began = performance.now();
  return new Promise<{ app: string; ms: number; out: { resumed: boolean; finishedByAnotherRun: boolean; counts: Record<string, number> } }>((resolve, reject) =>
    child.once('exit', (code) => (code === 0 ? resolve({ app, ms: performance.now() - began, out: JSON.parse(stdout) }) : reject(new Error(`${app} exited ${code}: ${stderr}`)))),
  );
}

const rows: Array<Record<string, number | string>> = [];
for (let rep = 0; rep < reps; rep++) {
  const d = await createTestDatabase('postgres');
  const watcher = new pg.Client({ connectionString: PG_URL });
  await watcher.connect();
  try {
    const accountId = `acct_bench_${rep}`;
    await d.db.insertInto('accounts').values({ id: accountId, name: 'bench', plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: Date.now(), deletion_started_at: null }).execute();
    const filled = await bulkFill(d.db, accountId, shape);
    await sql`analyze`.execute(d.db);
    const apps = [`del_a_${process.pid}`, `del_b_${process.pid}`];
    const xacts = new Map<string, Xact>();
    let sampling = true;
    let samples = 0;
    const sampler = (async () => {
      while (sampling) {
        const r = await watcher.query(
          `select application_name as app, pid, extract(epoch from xact_start) * 1000 as start, extract(epoch from clock_timestamp()) * 1000 as now, wait_event_type, query
           from pg_stat_activity where application_name = any($1) and xact_start is not null`,
          [apps],
        );
        samples++;
        for (const s of r.rows) {
          const k = `${s.pid}:${s.start}`;
          const x = xacts.get(k) ?? { app: s.app, pid: s.pid, start: Number(s.start), last: Number(s.now), lockFirst: null, lockLast: null, tables: new Set<string>() };
          const table = /^\s*(?:select \S+ from|delete from) (?:"?\w+"?\.)?"?(\w+)/i.exec(s.query)?.[1];
          if (table) x.tables.add(table);
          if (/pg_advisory|kysely_migration/.test(s.query)) x.tables.add('(migrations)');
          x.last = Number(s.now);
          if (s.wait_event_type === 'Lock') {
            x.lockFirst ??= Number(s.now);
            x.lockLast = Number(s.now);
          }
          xacts.set(k, x);
        }
        await new Promise((res) => setTimeout(res, 2));
      }
    })();
    const began = performance.now();
    let runs;
    try {
      runs = await Promise.all(apps.map((app) => runCli(d.url, app, accountId)));
    } finally {
      sampling = false;
      await sampler;
    }
    const wall = performance.now() - began;
    // The deletion itself, from the first transaction of either run past its start (migrations) to the end of the last.
    const deleting = [...xacts.values()].filter((x) => !x.tables.has('(migrations)'));
    const spanMs = Math.max(...deleting.map((x) => x.last)) - Math.min(...deleting.map((x) => x.start));
    const total = Object.values(filled).reduce((a, b) => a + b, 0);
    const t0 = Math.min(...[...xacts.values()].map((x) => x.start));
    if (values.verbose) {
      for (const x of [...xacts.values()].sort((a, b) => a.start - b.start)) {
        console.log(`${x.app.slice(4, 5).toUpperCase()} +${Math.round(x.start - t0)} ms ${Math.round(x.last - x.start)} ms${x.lockFirst === null ? '' : ` (lock wait ${Math.round(x.lockLast! - x.lockFirst)} ms)`} ${[...x.tables].join('+')}`);
      }
    }
    for (const run of runs) {
      // The CLI's start (migrations: the two runs take Kysely's migration lock in turn) is not the deletion's.
      const mine = [...xacts.values()].filter((x) => x.app === run.app && !x.tables.has('(migrations)')).sort((a, b) => a.start - b.start);
      const dur = mine.map((x) => x.last - x.start);
      const waits = mine.map((x) => (x.lockFirst === null ? 0 : x.lockLast! - x.lockFirst));
      const final = mine.at(-1)!;
      const deleted = Object.values(run.out.counts).reduce((a, b) => a + b, 0);
      rows.push({
        rep,
        run: run.app.startsWith('del_a') ? 'A' : 'B',
        resumed: String(run.out.resumed),
        finishedByAnotherRun: String(run.out.finishedByAnotherRun),
        deleted,
        share: Number((deleted / total).toFixed(2)),
        runMs: Math.round(run.ms),
        spanMs: Math.round(spanMs),
        xactsSeen: mine.length,
        longestXactMs: Math.round(Math.max(...dur)),
        longestXactIn: [...mine[dur.indexOf(Math.max(...dur))]!.tables].join('+'),
        finalXactMs: Math.round(final.last - final.start),
        lockWaitTotalMs: Math.round(waits.reduce((a, b) => a + b, 0)),
        longestLockWaitMs: Math.round(Math.max(...waits)),
        xactsThatWaited: waits.filter((w) => w > 0).length,
      });
    }
    console.log(`rep ${rep}: ${total} rows (${JSON.stringify(filled)}), both done in ${Math.round(wall)} ms, ${samples} samples (every ${(wall / samples).toFixed(1)} ms)`);
    console.table(rows.filter((r) => r.rep === rep));
  } finally {
    await watcher.end();
    await d.cleanup();
  }
}

const keys = ['runMs', 'spanMs', 'longestXactMs', 'finalXactMs', 'lockWaitTotalMs', 'longestLockWaitMs', 'xactsThatWaited'] as const;
console.log(`\nmedians over ${reps} repetitions (per repetition, the larger of the two runs' figures; and the share of rows each deleted)`);
const perRep = Array.from({ length: reps }, (_, rep) => rows.filter((r) => r.rep === rep));
const summary: Record<string, number> = {};
for (const k of keys) summary[k] = median(perRep.map((rs) => Math.max(...rs.map((r) => Number(r[k])))));
summary.smallerShare = median(perRep.map((rs) => Math.min(...rs.map((r) => Number(r.share)))));
console.table([summary]);
if (values.json) console.log(JSON.stringify({ summary, rows }));
