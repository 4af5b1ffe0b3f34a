import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import type { DeliveriesTable } from '../../../src/db/schema.js';
import { deliveriesRepository, queueFiguresQuery } from '../../../src/modules/webhooks/webhooks.repository.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

const NOW = Date.UTC(2026, 5, 1, 12);

for (const dialect of DIALECTS) {
  describe(`webhook queue figures for the metrics endpoint (${dialect})`, () => {
    const t = useTestApp(dialect);
    let n = 0;
    const delivery = (status: DeliveriesTable['status'], nextAt: number | null, leaseOwner: string | null = null): DeliveriesTable => ({
      id: `dlv_q${String(n++).padStart(6, '0')}`,
      account_id: t.accountId,
      webhook_id: 'wh_q',
      event_id: null,
      event: 'conversation.started',
      url: 'http://127.0.0.1:9/x',
      secret: 's',
      body: '{}',
      status,
      attempt_count: 0,
      auto_attempts: 0,
      next_attempt_at: nextAt,
      lease_owner: leaseOwner,
      lease_expires_at: leaseOwner ? NOW + 60_000 : null,
      created_at: NOW - 600_000,
      updated_at: NOW - 600_000,
    });

    test('pending, due, held and the earliest waiting time, counted as the claim and the sweeper see them; disabled webhooks', async () => {
      const { db } = t.ctx;
      const empty = await deliveriesRepository.queueFigures(db, NOW);
      assert.deepEqual(empty, { waiting: 0, due: 0, oldestNextAttemptAt: null, leased: 0, disabledWebhooks: 0 });
      await db
        .insertInto('deliveries')
        .values([
          delivery('pending', NOW - 60_000), // due for a minute
          delivery('pending', NOW - 1_000),
          delivery('pending', NOW), // due now
          delivery('pending', NOW + 3_600_000), // a retry an hour away
          delivery('pending', NOW - 300_000, 'worker-a'), // being attempted: not due for anyone else
          delivery('pending', null, 'worker-a:api:1'), // a test send under way
          delivery('succeeded', null),
          delivery('failed', null),
          delivery('cancelled', null),
        ])
        .execute();
      const row = (id: string, enabled: number) => ({
        id, account_id: t.accountId, url: 'http://127.0.0.1:9/', events: '["conversation.started"]', secret: 's', enabled,
        disabled_reason: enabled ? null : 'x', created_at: NOW, updated_at: NOW,
      });
      await db.insertInto('webhooks').values([row('wh_q1', 1), row('wh_q2', 0), row('wh_q3', 0)]).execute();
      assert.deepEqual(await deliveriesRepository.queueFigures(db, NOW), {
        waiting: 4,
        due: 3,
        oldestNextAttemptAt: NOW - 60_000,
        leased: 2,
        disabledWebhooks: 2,
      });
      // Later, the retry is due too; the earliest waiting time stays the earliest.
      assert.deepEqual(await deliveriesRepository.queueFigures(db, NOW + 7_200_000), {
        waiting: 4,
        due: 4,
        oldestNextAttemptAt: NOW - 60_000,
        leased: 2,
        disabledWebhooks: 2,
      });
    });

    test('each figure is read through an index, not a scan of the deliveries table', async () => {
      const { db } = t.ctx;
      // A table mostly of finished deliveries, as a service's is after a while, with statistics.
      for (let chunk = 0; chunk < 5; chunk++) {
        await db
          .insertInto('deliveries')
          .values(Array.from({ length: 1_000 }, () => delivery('succeeded', null)))
          .execute();
      }
      await sql`analyze`.execute(db);
      if (dialect === 'sqlite') {
        const plan = (await sql<{ detail: string }>`explain query plan ${queueFiguresQuery(NOW)}`.execute(db)).rows.map((r) => r.detail);
        const onDeliveries = plan.filter((d) => / deliveries\b/.test(d));
        assert.equal(onDeliveries.length, 4, plan.join('\n'));
        for (const d of onDeliveries) assert.match(d, /USING (COVERING )?INDEX deliveries_(due|leased)\b/, plan.join('\n'));
        assert.equal(onDeliveries.filter((d) => d.includes('deliveries_due')).length, 3, plan.join('\n'));
      } else {
        const plan = (await sql<{ 'QUERY PLAN': string }>`explain ${queueFiguresQuery(NOW)}`.execute(db)).rows.map((r) => r['QUERY PLAN']).join('\n');
        assert.doesNotMatch(plan, /Seq Scan on deliveries/, plan);
        assert.equal(plan.match(/on deliveries_due|using deliveries_due/g)?.length, 3, plan);
        assert.match(plan, /using deliveries_leased/, plan);
      }
    });

    test('with an account being deleted, its waiting deliveries are left out, still through the indexes alone', async () => {
      const { db } = t.ctx;
      const going = (await t.account()).accountId;
      const before = await deliveriesRepository.queueFigures(db, NOW);
      const theirs = (nextAt: number | null, leaseOwner: string | null = null) => ({ ...delivery('pending', nextAt, leaseOwner), account_id: going });
      await db
        .insertInto('deliveries')
        .values([theirs(NOW - 3_600_000), theirs(NOW), theirs(NOW + 60_000), theirs(NOW - 60_000, 'worker-b'), { ...delivery('succeeded', null), account_id: going }])
        .execute();
      const added = await deliveriesRepository.queueFigures(db, NOW);
      assert.deepEqual(added, { ...before, waiting: before.waiting + 3, due: before.due + 2, oldestNextAttemptAt: NOW - 3_600_000, leased: before.leased + 1 });
      await db.updateTable('accounts').set({ deletion_started_at: NOW }).where('id', '=', going).execute();
      // Theirs no worker will send are gone from the figures; the one a worker held before the deletion stays.
      assert.deepEqual(await deliveriesRepository.queueFigures(db, NOW), { ...before, leased: before.leased + 1 });

      await sql`analyze`.execute(db);
      if (dialect === 'sqlite') {
        const plan = (await sql<{ detail: string }>`explain query plan ${queueFiguresQuery(NOW, true)}`.execute(db)).rows.map((r) => r.detail);
        const onDeliveries = plan.filter((d) => / deliveries\b/.test(d));
        assert.equal(onDeliveries.length, 5, plan.join('\n'));
        for (const d of onDeliveries) assert.match(d, /USING (COVERING )?INDEX deliveries_(due|leased)\b/, plan.join('\n'));
      } else {
        const plan = (await sql<{ 'QUERY PLAN': string }>`explain ${queueFiguresQuery(NOW, true)}`.execute(db)).rows.map((r) => r['QUERY PLAN']).join('\n');
        assert.doesNotMatch(plan, /Seq Scan on deliveries/, plan);
        assert.equal(plan.match(/on deliveries_due|using deliveries_due/g)?.length, 4, plan);
      }
    });
  });
}
