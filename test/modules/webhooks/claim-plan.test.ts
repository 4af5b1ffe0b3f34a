/*
 * The worker's claim walks the due deliveries in order (deliveries_due) and stops at its LIMIT, however many are due:
 * a plan that reads every due delivery and sorts them costs each claim time in proportion to the backlog. The
 * statement is captured as the engine runs it and explained with its own parameters. On PostgreSQL the shape that
 * led there (ANALYZEd: a large table of finished deliveries and a thousand due) made the planner turn the "account
 * not being deleted" probe into a hash anti-join, then sort: 2–3 ms a claim against 0.15 ms at 5,000 due.
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery } from 'kysely';
import { systemClock } from '../../../src/lib/clock.js';
import { createDeliveryEngine } from '../../../src/modules/webhooks/delivery.js';
import type { SendRequest } from '../../../src/modules/webhooks/sender.js';
import { waitFor } from './delivery-helpers.js';
import { capturing, createTestDatabase, DIALECTS, planOf, type TestDatabase } from '../../helpers/db.js';

const FINISHED = 10_000;
const DUE = 1_000;
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
      const delivery = (n: number, accountId: string, webhookId: string, due: boolean) => ({
        id: `dlv_${String(n).padStart(8, '0')}`,
        account_id: accountId,
        webhook_id: webhookId,
        event_id: `evt_${n}`,
        event: 'escalation',
        url: `https://hooks.example.com/${webhookId}`,
        secret: 'secretsecret',
        body: '{}',
        status: due ? ('pending' as const) : ('succeeded' as const),
        attempt_count: 0,
        auto_attempts: 0,
        next_attempt_at: due ? now - 100_000 + n : null,
        lease_owner: null,
        lease_expires_at: null,
        created_at: n,
        updated_at: n,
      });
      const rows = [
        ...Array.from({ length: FINISHED }, (_, n) => delivery(n, 'acct_live', `wh_${n % WEBHOOKS}`, false)),
        // The account being deleted has the soonest due deliveries: the claim must pass over them.
        ...Array.from({ length: 50 }, (_, i) => delivery(FINISHED + i, 'acct_leaving', 'wh_leaving', true)),
        ...Array.from({ length: DUE }, (_, i) => delivery(FINISHED + 50 + i, 'acct_live', `wh_${i % WEBHOOKS}`, true)),
      ];
      for (let i = 0; i < rows.length; i += 500) await db.insertInto('deliveries').values(rows.slice(i, i + 500)).execute();
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
