/*
 * Every scheduler run (about once a minute) looks for missing scheduled rundowns of the last complete window and the
 * RUNDOWN_BACKFILL windows before it, for every account (rundowns.repository.ts missingScheduled). Nearly always nothing
 * is missing, so that look must stay a few index probes per account and window, on the partial unique index
 * rundowns_scheduled_window, whatever the accounts' history: never a scan of the rundowns table. PostgreSQL is checked
 * with statistics (ANALYZE) and with the generic plan it may settle on for the prepared statement after five runs
 * (README: queries run as named prepared statements), which is planned without the parameters' values.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery, type Kysely } from 'kysely';
import type { DB } from '../../../src/db/schema.js';
import { rundownsRepository } from '../../../src/modules/rundowns/rundowns.repository.js';
import { windowsToSchedule } from '../../../src/modules/rundowns/rundowns.service.js';
import { createTestDatabase, DIALECTS, planOf, type TestDatabase } from '../../helpers/db.js';
import { DAY, HOUR, T0 } from './helpers.js';

const ACCOUNTS = 150;
/** Days of scheduled rundowns each account already has: far more rows than one run needs to look at. */
const HISTORY = 120;
/** Shaped like the real ones, so the table is as wide as a deployment's for the planner. */
const FIGURES = JSON.stringify({ conversations: 5, messages: 23, resolved: 1, escalated: 2, unresolved: 1, resolutionRate: 0.25, escalationRate: 0.4, averageMessages: 4.6, unansweredQuestions: 5 });
const BODY = JSON.stringify({
  topTopics: Array.from({ length: 10 }, (_, i) => ({ name: `topic ${i}`, count: 3, percentage: 0.1 })),
  unanswered: Array.from({ length: 10 }, (_, i) => ({ question: `is there a student discount on order ${i}`, count: 2, lastAskedAt: '2026-03-02T04:02:00.000Z' })),
  suggestedFaqs: [],
});

/** The statement missingScheduled runs, compiled with its parameters. */
async function captured(db: Kysely<DB>, windows: Parameters<typeof rundownsRepository.missingScheduled>[1]) {
  const seen: CompiledQuery[] = [];
  const c = db.withPlugin({
    transformQuery: ({ node, queryId }) => {
      seen.push(db.getExecutor().compileQuery(node, queryId));
      return node;
    },
    transformResult: async ({ result }) => result,
  });
  const rows = await rundownsRepository.missingScheduled(c, windows);
  assert.equal(seen.length, 1, 'one statement');
  return { q: seen[0]!, rows };
}


/** PostgreSQL's generic plan of the statement: prepared and explained on one connection with plan_cache_mode forced. */
async function genericPlanOf(db: Kysely<DB>, q: CompiledQuery): Promise<string> {
  return db.connection().execute(async (conn) => {
    await conn.executeQuery(CompiledQuery.raw('set plan_cache_mode = force_generic_plan'));
    try {
      await conn.executeQuery(CompiledQuery.raw(`prepare scheduler_probe as ${q.sql}`));
      const args = q.parameters.map((p) => (typeof p === 'number' ? String(p) : `'${String(p)}'`)).join(', ');
      const { rows } = await conn.executeQuery<{ 'QUERY PLAN': string }>(CompiledQuery.raw(`explain execute scheduler_probe(${args})`));
      await conn.executeQuery(CompiledQuery.raw('deallocate scheduler_probe'));
      return rows.map((r) => r['QUERY PLAN']).join('\n');
    } finally {
      await conn.executeQuery(CompiledQuery.raw('reset plan_cache_mode'));
    }
  });
}

for (const dialect of DIALECTS) {
  describe(`the scheduler's look for missing rundowns reads through rundowns_scheduled_window (${dialect})`, () => {
    let database: TestDatabase;
    const now = T0 + HOUR;
    before(async () => {
      database = await createTestDatabase(dialect);
      const db = database.db;
      const accounts = Array.from({ length: ACCOUNTS }, (_, i) => ({
        id: `acct_${String(i).padStart(4, '0')}`,
        name: `a${i}`,
        plan: 'pro' as const,
        rate_limit_minute: null,
        rate_limit_day: null,
        assistant_settings: null,
        created_at: 0,
        deletion_started_at: null,
      }));
      await db.insertInto('accounts').values(accounts).execute();
      // Every account has its daily rundowns up to the last complete window, but the first one misses the last two.
      const rows = accounts.flatMap((a, n) =>
        Array.from({ length: HISTORY }, (_, k) => T0 - (HISTORY - k) * DAY)
          .filter((from) => n > 0 || from < T0 - 2 * DAY)
          .map((from) => ({ id: `rd_${a.id}_${from}`, account_id: a.id, trigger: 'schedule' as const, from_ts: from, to_ts: from + DAY, figures: FIGURES, body: BODY, created_at: from + DAY })),
      );
      for (let i = 0; i < rows.length; i += 200) await db.insertInto('rundowns').values(rows.slice(i, i + 200)).execute();
      if (dialect === 'postgres') await db.executeQuery(CompiledQuery.raw('analyze'));
    });
    after(() => database?.cleanup());

    test('one statement for every window; each pair is one probe of the partial index, no scan of rundowns', async () => {
      const { q, rows } = await captured(database.db, windowsToSchedule(now, DAY, 7));
      assert.deepEqual(
        rows.map((r) => [r.account_id, r.from_ts]),
        [['acct_0000', T0 - 2 * DAY], ['acct_0000', T0 - DAY]],
        'the two missing, oldest first',
      );
      // The literal 'schedule' is what lets a plan use the partial index without knowing a parameter's value.
      assert.match(q.sql, /"r"\."trigger" = 'schedule'/);
      const plans = [await planOf(database.db, dialect, q)];
      if (dialect === 'postgres') plans.push(await genericPlanOf(database.db, q));
      for (const plan of plans) {
        if (dialect === 'sqlite') {
          assert.match(plan, /SEARCH r USING (COVERING )?INDEX rundowns_scheduled_window \(account_id=\? AND from_ts=\? AND to_ts=\?\)/, plan);
          assert.match(plan, /SEARCH r USING (COVERING )?INDEX rundowns_scheduled_window \(account_id=\? AND from_ts<\?\)/, plan);
          assert.doesNotMatch(plan, /SCAN r\b/, plan);
        } else {
          assert.match(plan, /Index (Only )?Scan using rundowns_scheduled_window on rundowns r\b[^\n]*\n\s+Index Cond: \(\(account_id = a\.id\) AND \(from_ts = "\*VALUES\*"\.column1\) AND \(to_ts = "\*VALUES\*"\.column2\)\)/, plan);
          assert.match(plan, /Limit[^\n]*\n\s+-> {2}Index (Only )?Scan Backward using rundowns_scheduled_window on rundowns r_1[^\n]*\n\s+Index Cond: \(\(account_id = a\.id\) AND \(from_ts < "\*VALUES\*"\.column2\)\)/, plan);
          assert.doesNotMatch(plan, /Seq Scan on rundowns|Bitmap Heap Scan on rundowns|Hash/, plan);
        }
      }
    });
  });
}
