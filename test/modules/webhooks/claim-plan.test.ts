/*
 * The worker's claim walks the due deliveries in order (deliveries_due) and stops at its LIMIT, however many are due:
 * a plan that reads every due delivery and sorts them costs each claim time in proportion to the backlog. The
 * statement is captured as the engine runs it and explained with its own parameters. On PostgreSQL, with a large
 * table of finished deliveries and a few thousand due (ANALYZEd), the planner underestimates the due rows (status
 * and next_attempt_at go together; it multiplies their selectivities: 68 estimated for 5,050 here), and with the
 * webhook and the account as joins it hashed and sorted them all (bench/webhooks/claim-plan.mjs: 5–100 ms a claim
 * against 0.2 ms). The claim now reads one table and probes the webhook and the account per row.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery, sql } from 'kysely';
import { systemClock } from '../../../src/lib/clock.js';
import { createDeliveryEngine } from '../../../src/modules/webhooks/delivery.js';
import type { SendRequest } from '../../../src/modules/webhooks/sender.js';
import { waitFor } from './delivery-helpers.js';
import { capturing, createTestDatabase, DIALECTS, planOf, type TestDatabase } from '../../helpers/db.js';

const FINISHED = 200_000;
const DUE = 5_000;
const WEBHOOKS = 20;

for (const dialect of DIALECTS) {
  describe(`webhook worker: the claim stops at its limit, whatever the backlog (${dialect})`, () => {
    let database: TestDatabase;
    const now = Date.now();
    before(async () => {
      database = await createTestDatabase(dialect);
      const db = database.db;
      const account = { name: 'a', plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 0 } as const;
      await db.insertInto('accounts').values([
        { ...account, id: 'acct_live', deletion_started_at: null },
        { ...account, id: 'acct_leaving', deletion_started_at: null },
      ]).execute();
      const webhook = (id: string, accountId: string) => ({ id, account_id: accountId, url: `https://hooks.example.com/${id}`, events: '["escalation"]', secret: 'secretsecret', enabled: 1, disabled_reason: null, created_at: 0, updated_at: 0 });
      await db.insertInto('webhooks').values([...Array.from({ length: WEBHOOKS }, (_, i) => webhook(`wh_${i}`, 'acct_live')), webhook('wh_leaving', 'acct_leaving')]).execute();
      // Written by the database itself (generate_series, a recursive CTE): a deployment's table is large.
      const series = (count: number) =>
        dialect === 'postgres' ? sql`select g as n from generate_series(1, ${count}) g` : sql`with recursive s(n) as (select 1 union all select n + 1 from s where n < ${count}) select n from s`;
      // Numbers as literals: better-sqlite3 binds a JS number as a REAL, and 'wh_' || (n % 20.0) is 'wh_3.0'.
      const fill = (first: number, count: number, accountId: string, webhook: ReturnType<typeof sql>, due: boolean) => {
        const k = sql`(n + ${sql.lit(first)})`;
        const id = dialect === 'postgres' ? sql`lpad(${k}::text, 8, '0')` : sql`printf('%08d', ${k})`;
        return sql`insert into deliveries (id, account_id, webhook_id, event_id, event, url, secret, body, status, attempt_count, auto_attempts, next_attempt_at, created_at, updated_at)
          select 'dlv_' || ${id}, ${accountId}, ${webhook}, 'evt_' || ${k}, 'escalation', 'https://hooks.example.com/x', 'secretsecret', '{}',
            ${due ? 'pending' : 'succeeded'}, 0, 0, ${due ? sql`${sql.lit(now - 1_000_000)} + ${k}` : sql`null`}, ${k}, ${k}
          from (${series(count)}) g`.execute(db);
      };
      await fill(0, FINISHED, 'acct_live', sql`'wh_' || (n % ${sql.lit(WEBHOOKS)})`, false);
      // The account being deleted has the soonest due deliveries: the claim must pass over them.
      await fill(FINISHED, 50, 'acct_leaving', sql`'wh_leaving'`, true);
      await fill(FINISHED + 50, DUE, 'acct_live', sql`'wh_' || (n % ${sql.lit(WEBHOOKS)})`, true);
      // Statistics as a deployment has them: no account being deleted (the common case, where the planner went wrong).
      if (dialect === 'postgres') await db.executeQuery(CompiledQuery.raw('analyze'));
      await db.updateTable('accounts').set({ deletion_started_at: now - 1_000 }).where('id', '=', 'acct_leaving').execute();
    });
    after(() => database?.cleanup());

    test('one claim: the due index read in order up to the limit, no sort; none of an account being deleted', async () => {
      const c = capturing(database.db);
      const sent: string[] = [];
      const engine = createDeliveryEngine({
        db: c.db,
        dialect,
        clock: systemClock,
        config: { webhookTimeoutMs: 5_000, webhookRetryDelaysMs: [0, 60_000], webhookSecretOverlapMs: 0 },
        sender: {
          send: async (req: SendRequest) => {
            sent.push(req.url);
            return { ok: true, statusCode: 200, durationMs: 1, error: null, responseBody: '', gone: false };
          },
        },
      });
      try {
        await engine.run();
        await waitFor(() => sent.length >= 80, `the claimed deliveries sent (${sent.length})`);
      } finally {
        await engine.close();
      }
      assert.ok(sent.every((url) => !url.endsWith('/wh_leaving')), sent.join('\n'));
      const claim = c.seen.find((q) => /^update "deliveries" set "lease_owner"/.test(q.sql) && /next_attempt_at/.test(q.sql));
      assert.ok(claim, c.seen.map((q) => q.sql).join('\n'));
      const plan = await planOf(database.db, dialect, claim);
      if (dialect === 'sqlite') {
        assert.match(plan, /deliveries_due/, plan);
        assert.doesNotMatch(plan, /TEMP B-TREE/, plan);
      } else {
        assert.match(plan, /Index Scan using deliveries_due on deliveries d/, plan);
        assert.doesNotMatch(plan, /Sort|Hash Anti Join/, plan);
      }
    });
  });
}
