/*
 * The statements of `parley accounts delete` (accounts.service.ts deleteAccount) read an account's rows through
 * indexes, chunk after chunk, on both dialects: a chunk that scanned a table would read the whole table each time,
 * and the deletion of a large account would take as long as a scan per chunk. Migration 0016 added the one index they
 * lacked, deliveries by account (deliveries_account), partial so that it serves only them: the other queries on
 * deliveries that name the account keep their plans (checked here too).
 *
 * Each statement is captured as it runs (a Kysely plugin) and then explained with its own parameters. SQLite is
 * explained as the service runs it, without statistics (nothing runs ANALYZE). PostgreSQL plans with statistics
 * (ANALYZE here, autovacuum in a deployment). The first suite keeps the chunks small against the tables (50 rows
 * against tens of thousands); the second makes a chunk a large share of its table (100 rows of 4,000, as 2,000 are of
 * 80,000), where PostgreSQL planned `key in (select … limit n)` as a hash join over a scan of the whole table, and
 * checks that a chunk's DELETE finds its rows by primary key or ctid all the same (accounts.repository.ts chunkDelete).
 */
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { CompiledQuery } from 'kysely';
import { systemClock } from '../../src/lib/clock.js';
import { createAccountsService } from '../../src/modules/accounts/accounts.service.js';
import { conversationsRepository } from '../../src/modules/conversations/conversations.repository.js';
import { deliveriesRepository } from '../../src/modules/webhooks/webhooks.repository.js';
import { capturing, createTestDatabase, DIALECTS, genericPlanOf, planOf, type TestDatabase } from '../helpers/db.js';
import { bulkFill, fillEveryTable } from '../modules/accounts/fixtures.js';

/** The tables the fill makes large: where a scan would cost. */
const LARGE = ['deliveries', 'delivery_attempts', 'events', 'messages'];

for (const dialect of DIALECTS) {
  describe(`account deletion: every chunk reads through an index (migration 0016) (${dialect})`, () => {
    let database: TestDatabase;
    const deleted = 'acct_deleted';
    const others = ['acct_other1', 'acct_other2'];
    before(async () => {
      database = await createTestDatabase(dialect);
      for (const id of [deleted, ...others]) {
        await database.db.insertInto('accounts').values({ id, name: id, plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 0, deletion_started_at: null }).execute();
      }
      // Several chunks of each large table for the account deleted; far more rows for the others.
      await bulkFill(database.db, deleted, { conversations: 15, messagesEach: 20, events: 200, deliveries: 200, attemptsEach: 2 });
      for (const id of others) await bulkFill(database.db, id, { conversations: 500, messagesEach: 20, events: 8_000, deliveries: 8_000, attemptsEach: 2 });
      if (dialect === 'postgres') await database.db.executeQuery(CompiledQuery.raw('analyze'));
    });
    after(() => database?.cleanup());

    test("the deletion's statements: no scan of a table; deliveries by deliveries_account, their attempts by their primary key", async () => {
      const c = capturing(database.db);
      const r = await createAccountsService(c.db, systemClock, { dialect }).deleteAccount(deleted, { chunkRows: 50 });
      assert.equal(r.counts.deliveries, 200);
      assert.equal(r.counts.deliveryAttempts, 400);
      assert.equal(r.counts.messages, 300);
      // Each statement text once (the chunks repeat them), with the parameters of its first run.
      const statements = [...new Map(c.seen.map((q) => [q.sql, q])).values()];
      // Chunk statements: the bounded reads (LIMIT) and the deletes by the ids a chunk read (a list on SQLite, an array
      // on PostgreSQL).
      const chunks = statements.filter((q) => / limit \d+/.test(q.sql) || /" in \((\?|\$\d+), |= any\(array\(select unnest\(/.test(q.sql));
      assert.ok(chunks.length >= 10, chunks.map((q) => q.sql).join('\n'));
      const plans = new Map<string, string>();
      for (const q of statements) plans.set(q.sql, await planOf(database.db, dialect, q));
      const planOfStatement = (pattern: RegExp) => {
        const q = statements.find((s) => pattern.test(s.sql));
        assert.ok(q, `a statement matching ${pattern}`);
        return plans.get(q.sql)!;
      };

      if (dialect === 'sqlite') {
        for (const q of statements) assert.doesNotMatch(plans.get(q.sql)!, /^SCAN /m, `${q.sql}\n${plans.get(q.sql)}`);
        assert.match(planOfStatement(/^select id from "deliveries" where account_id = \? and id is not null order by "id" limit 50$/), /^SEARCH deliveries USING COVERING INDEX deliveries_account \(account_id=\? AND id>\?\)$/m);
        assert.match(planOfStatement(/^delete from "delivery_attempts" where "delivery_id" in \(\?/), /^SEARCH delivery_attempts USING INDEX sqlite_autoindex_delivery_attempts_1 \(delivery_id=\?\)$/m);
        // The final transaction's lock read of what is left.
        assert.match(planOfStatement(/^select "id" from "deliveries" where "account_id" = \? and "id" is not null order by "id"$/), /deliveries_account/);
      } else {
        for (const q of chunks) {
          for (const table of LARGE) assert.doesNotMatch(plans.get(q.sql)!, new RegExp(`Seq Scan on ${table}\\b`), `${q.sql}\n${plans.get(q.sql)}`);
        }
        assert.match(planOfStatement(/^select id from "deliveries" where account_id = \$1 and id is not null order by "id" limit 50 for update skip locked$/), /Index Scan using deliveries_account on deliveries/);
        assert.match(planOfStatement(/^delete from "delivery_attempts" where "delivery_id" = any\(array\(select unnest\(\$1::text\[\]\)\)\)$/), /Index Scan using delivery_attempts_pk|Bitmap Index Scan on delivery_attempts_pk/);
        assert.match(planOfStatement(/^select "id" from "deliveries" where "account_id" = \$1 and "id" is not null order by "id" for update$/), /deliveries_account/);
      }
    });

    test("the other queries on deliveries that name the account keep their indexes (an erasure's by event, a webhook's cancel, its list)", async () => {
      const account = others[0]!;
      const eventIds = (await database.db.selectFrom('events').select('id').where('account_id', '=', account).orderBy('id').limit(3).execute()).map((e) => e.id);
      const webhookId = (await database.db.selectFrom('webhooks').select('id').where('account_id', '=', account).executeTakeFirstOrThrow()).id;
      const c = capturing(database.db);
      // Run inside a transaction rolled back: only their statements matter here, not what they change.
      await c.db
        .transaction()
        .execute(async (trx) => {
          await conversationsRepository.deleteDeliveriesOf(trx, account, eventIds);
          await deliveriesRepository.cancelPending(trx, account, webhookId, Date.now());
          await deliveriesRepository.list(trx, account, webhookId, { status: 'all', limit: 20, offset: 0 });
          throw new Error('rollback');
        })
        .catch((err: Error) => assert.equal(err.message, 'rollback'));
      const onDeliveries = c.seen.filter((q) => /from "deliveries"|update "deliveries"/.test(q.sql));
      assert.ok(onDeliveries.length >= 4, onDeliveries.map((q) => q.sql).join('\n'));
      for (const q of onDeliveries) {
        const plan = await planOf(database.db, dialect, q);
        assert.doesNotMatch(plan, /deliveries_account/, `${q.sql}\n${plan}`);
        assert.doesNotMatch(plan, dialect === 'sqlite' ? /^SCAN deliveries/m : /Seq Scan on deliveries/, `${q.sql}\n${plan}`);
      }
    });
  });
}

/**
 * The tables the second fill makes large whose chunks delete the rows a subquery names (chunkDelete): single-column
 * keys (events, messages) and composite ones (workflow runs, Idempotency-Keys, quotes).
 */
const BY_SUBQUERY = ['events', 'messages', 'workflow_runs', 'idempotency_keys', 'rundown_quotes'];
/** All of its large tables: those and the deliveries with their attempts (deleted by the ids a chunk read). */
const LARGE_TOO = [...BY_SUBQUERY, 'deliveries', 'delivery_attempts'];

for (const dialect of DIALECTS) {
  describe(`account deletion: a chunk's DELETE finds its rows by key or address, whatever share of the table it is (${dialect})`, () => {
    let database: TestDatabase;
    const deleted = 'acct_big';
    before(async () => {
      database = await createTestDatabase(dialect);
      for (const id of [deleted, 'acct_rest']) {
        await database.db.insertInto('accounts').values({ id, name: id, plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 0, deletion_started_at: null }).execute();
      }
      // A chunk of 100 rows of tables of 4,000: the share 2,000 rows are of 80,000, where `key in (select …)` was planned
      // as a scan of the table (bench/accounts/chunk-plan.ts).
      await fillEveryTable(database.db, deleted, 2_000);
      await fillEveryTable(database.db, 'acct_rest', 2_000);
      if (dialect === 'postgres') {
        await database.db.executeQuery(CompiledQuery.raw('analyze'));
        // The plans are read after the deletion, from these statistics: autovacuum must not replace them meanwhile.
        for (const { name } of (await database.db.introspection.getTables()).filter((t) => !t.isView)) {
          await database.db.executeQuery(CompiledQuery.raw(`alter table "${name}" set (autovacuum_enabled = false)`));
        }
      }
    });
    after(() => database?.cleanup());

    test('no scan of a large table in any chunk statement; on PostgreSQL the DELETE by primary key (single column) or ctid (composite), custom and generic plans alike', async () => {
      const c = capturing(database.db);
      const r = await createAccountsService(c.db, systemClock, { dialect }).deleteAccount(deleted, { chunkRows: 100 });
      assert.equal(r.counts.events, 2_000);
      assert.equal(r.counts.workflowRuns, 2_000);
      assert.equal(r.counts.idempotencyKeys, 2_000);
      const statements = [...new Map(c.seen.map((q) => [q.sql, q])).values()];
      const chunkDeletes = new Map(BY_SUBQUERY.map((table) => [table, statements.find((q) => q.sql.startsWith(`delete from "${table}" where`) && / limit 100/.test(q.sql))]));
      for (const [table, q] of chunkDeletes) assert.ok(q, `the chunk statement of ${table}\n${statements.map((s) => s.sql).join('\n')}`);
      for (const [table, q] of chunkDeletes) {
        if (dialect === 'sqlite') {
          const plan = await planOf(database.db, dialect, q!);
          assert.doesNotMatch(plan, /^SCAN /m, `${q!.sql}\n${plan}`);
          continue;
        }
        for (const plan of [await planOf(database.db, dialect, q!), await genericPlanOf(database.db, q!)]) {
          assert.doesNotMatch(plan, /Seq Scan/, `${q!.sql}\n${plan}`);
          const single = table === 'events' || table === 'messages';
          assert.match(plan, single ? new RegExp(`Index Scan using ${table}_pkey on ${table}\\b`) : new RegExp(`Tid Scan on ${table}\\b`), `${q!.sql}\n${plan}`);
        }
      }
      // The chunks of a table others reference: their bounded read, and the deletes by the ids it read (of the rows
      // referencing them, then of them), whatever share of a table the ids are.
      const byIds = statements.filter((q) => / limit 100/.test(q.sql) || /" in \((\?|\$\d+), |= any\(array\(select unnest\(/.test(q.sql));
      assert.ok(byIds.some((q) => q.sql.startsWith('delete from "delivery_attempts"')), byIds.map((q) => q.sql).join('\n'));
      for (const q of byIds) {
        const plans = dialect === 'sqlite' ? [await planOf(database.db, dialect, q)] : [await planOf(database.db, dialect, q), await genericPlanOf(database.db, q)];
        for (const plan of plans) {
          if (dialect === 'sqlite') assert.doesNotMatch(plan, /^SCAN /m, `${q.sql}\n${plan}`);
          else for (const table of LARGE_TOO) assert.doesNotMatch(plan, new RegExp(`Seq Scan on ${table}\\b`), `${q.sql}\n${plan}`);
        }
      }
    });
  });
}
