// Whether planning a prepared statement once (PostgreSQL's default plan_cache_mode, `auto`) costs an account that
// is far bigger than the rest: one account with 300,000 conversations and twenty with 500 each, then each analytics
// and list read of the service (its own repository code) run 40 times for the small accounts first — by then
// PostgreSQL has chosen between a generic plan and a plan per run — and timed for the big one and the small ones.
// One connection, its mode switched between rounds (three rounds of each mode, alternating); medians of all rounds.
// "generic" says whether the big account's runs used the generic plan (pg_prepared_statements).
//   node --import tsx bench/postgres/plan-cache.ts [--big 300000] [--small 500]
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { benchDatabase } from '../database.mjs';
import { migrateToLatest, openDatabase } from '../../src/db/database.js';
import { analyticsRepository } from '../../src/modules/analytics/analytics.repository.js';
import { conversationsRepository } from '../../src/modules/conversations/conversations.repository.js';

const { values } = parseArgs({ options: { big: { type: 'string', default: '300000' }, small: { type: 'string', default: '500' } } });
const now = Date.now();
const hour = 3_600_000;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

const MODES = ['force_custom_plan', 'auto'] as const;
const { url, drop } = await benchDatabase('postgres', '/tmp', 'bench_plans');
const database = openDatabase(url, { poolSize: 1 });
const { db } = database;
try {
  await migrateToLatest(db);
  const accounts = Array.from({ length: 21 }, (_, i) => `acct_bench_${i}`);
  for (const [i, id] of accounts.entries()) {
    await db.insertInto('accounts').values({ id, name: id, plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: now }).execute();
    const n = i === 0 ? Number(values.big) : Number(values.small);
    // One conversation a second going back from now; a third each active, ended (resolved) and escalated.
    await sql`insert into conversations (id, account_id, customer_id, customer_label, status, outcome, topic, message_count, created_at, last_message_at, ended_at)
      select 'conv_' || ${id} || '_' || g, ${id}, 'cust_' || (g % 1000), 'x', (array['active','ended','escalated'])[1 + (g % 3)],
        case when g % 3 = 1 then 'resolved' end, 'topic ' || (g % 40), g % 20, ${now}::bigint - g * 1000, ${now}::bigint - g * 1000,
        case when g % 3 = 1 then ${now}::bigint end
      from generate_series(1, ${n}::int) g`.execute(db);
  }
  await sql`analyze`.execute(db);
  const all = { from: now - 400_000 * 1000, to: now };
  const lastHour = { from: now - hour, to: now };
  const reads: Record<string, (a: string) => Promise<unknown>> = {
    'overview, all time': (a) => analyticsRepository.overviewCounts(db, a, all),
    'overview, last hour': (a) => analyticsRepository.overviewCounts(db, a, lastHour),
    'topics': (a) => analyticsRepository.topics(db, 'postgres', a, all, 10),
    'count': (a) => analyticsRepository.countConversations(db, a, all),
    'list active': (a) => conversationsRepository.list(db, a, { ...all, status: 'active', limit: 20, offset: 0 }),
    'list ended, last hour': (a) => conversationsRepository.list(db, a, { ...lastHour, status: 'ended', limit: 20, offset: 0 }),
    'list of a customer': (a) => conversationsRepository.list(db, a, { status: 'all', customerId: 'cust_7', limit: 20, offset: 0 }),
    'list at offset 5000': (a) => conversationsRepository.list(db, a, { status: 'all', limit: 20, offset: 5000 }),
  };
  const genericRuns = async () => Number((await sql<{ n: string }>`select coalesce(sum(generic_plans), 0) as n from pg_prepared_statements`.execute(db)).rows[0]!.n);
  const time = async (read: (a: string) => Promise<unknown>, a: string) => {
    const t0 = performance.now();
    await read(a);
    return performance.now() - t0;
  };
  for (const [name, read] of Object.entries(reads)) {
    const big = { force_custom_plan: [] as number[], auto: [] as number[] };
    const small = { force_custom_plan: [] as number[], auto: [] as number[] };
    let generic = false;
    for (let round = 0; round < 3; round++) {
      for (const mode of MODES) {
        await sql.raw(`set plan_cache_mode = ${mode}`).execute(db);
        for (let i = 0; i < 40; i++) await read(accounts[1 + (i % 20)]!);
        const before = await genericRuns();
        for (let i = 0; i < 5; i++) big[mode].push(await time(read, accounts[0]!));
        if (mode === 'auto' && (await genericRuns()) > before) generic = true;
        for (let i = 0; i < 20; i++) small[mode].push(await time(read, accounts[1 + (i % 20)]!));
      }
    }
    const cell = (mode: (typeof MODES)[number]) => `${median(big[mode]).toFixed(2).padStart(7)} / ${median(small[mode]).toFixed(3)}`;
    console.log(`${name.padEnd(22)} per run ${cell('force_custom_plan')} ms   auto ${cell('auto')} ms   generic: ${generic ? 'yes' : 'no'}`);
  }
} finally {
  await database.close();
  await drop();
}
