import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createGroupCommit } from '../../src/db/group-commit.js';
import { resourceError } from '../../src/db/resource-errors.js';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/db.js';
import { fillDatabase } from '../helpers/full.js';

for (const dialect of DIALECTS) {
  describe(`group commit (${dialect})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(() => t.cleanup());

    const account = (id: string) => ({ id, name: id, plan: 'pro' as const, rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 1 });
    const ids = async (prefix: string) =>
      (await t.db.selectFrom('accounts').select('id').where('id', 'like', `${prefix}%`).orderBy('id').execute()).map((r) => r.id);

    test('jobs arriving together each answer their own result, all committed; on SQLite they share one transaction', async () => {
      const transact = createGroupCommit(t.db, t.dialect);
      const seen = new Set<unknown>();
      const results = await Promise.all(
        Array.from({ length: 10 }, (_, i) =>
          transact(async (trx) => {
            seen.add(trx);
            await trx.insertInto('accounts').values(account(`gc_a${i}`)).execute();
            return i * 2;
          }),
        ),
      );
      assert.deepEqual(results, Array.from({ length: 10 }, (_, i) => i * 2));
      assert.equal((await ids('gc_a')).length, 10);
      assert.equal(seen.size, dialect === 'sqlite' ? 1 : 10);
    });

    test('a failing job is rolled back alone, including its writes before the failure; the others commit', async () => {
      const transact = createGroupCommit(t.db, t.dialect);
      // The duplicate key is one committed before the jobs start: on PostgreSQL the jobs run concurrently, so a key
      // that job 0 also writes would make "which of 0 and 2 fails" a race.
      await t.db.insertInto('accounts').values(account('gc_bx')).execute();
      const outcomes = await Promise.allSettled(
        [0, 1, 2, 3].map((i) =>
          transact(async (trx) => {
            await trx.insertInto('accounts').values(account(`gc_b${i}`)).execute();
            if (i === 1) throw new Error('job 1 fails after writing');
            if (i === 2) await trx.insertInto('accounts').values(account('gc_bx')).execute(); // duplicate key
            return i;
          }),
        ),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'rejected', 'rejected', 'fulfilled'],
      );
      assert.match(String((outcomes[1] as PromiseRejectedResult).reason), /job 1 fails/);
      assert.deepEqual(await ids('gc_b'), ['gc_b0', 'gc_b3', 'gc_bx']);
    });

    test('more jobs than one batch holds all complete, in order', async () => {
      const transact = createGroupCommit(t.db, t.dialect, { maxBatch: 4 });
      const order: number[] = [];
      await Promise.all(
        Array.from({ length: 11 }, (_, i) =>
          transact(async (trx) => {
            order.push(i);
            await trx.insertInto('accounts').values(account(`gc_c${String(i).padStart(2, '0')}`)).execute();
          }),
        ),
      );
      assert.equal((await ids('gc_c')).length, 11);
      if (dialect === 'sqlite') assert.deepEqual(order, Array.from({ length: 11 }, (_, i) => i));
    });

    test('a job that finds the database full: no job is told it committed what was not, each failure says "full", and the next batch after space is back commits', async () => {
      const transact = createGroupCommit(t.db, t.dialect);
      // Pages to spare inside the file, as a database that has deleted rows has: small writes still fit, a large one does not.
      await t.db.insertInto('accounts').values({ ...account('gc_dspace'), name: 'x'.repeat(40_000) }).execute();
      await t.db.deleteFrom('accounts').where('id', '=', 'gc_dspace').execute();
      const lift = await fillDatabase(t, { pgRowsOver: 10_000 });
      let outcomes: PromiseSettledResult<number>[];
      try {
        outcomes = await Promise.allSettled(
          [0, 1, 2, 3].map((i) =>
            transact(async (trx) => {
              await trx.insertInto('accounts').values(account(`gc_d${i}`)).execute();
              // Job 2's second row needs more pages than the file has free.
              if (i === 2) await trx.insertInto('accounts').values({ ...account('gc_d2big'), name: 'y'.repeat(200_000) }).execute();
              return i;
            }),
          ),
        );
      } finally {
        await lift();
      }
      const failure = (o: PromiseSettledResult<number>) => (o.status === 'rejected' ? resourceError(o.reason)?.problem : 'committed');
      // SQLite rolls back the whole shared transaction on SQLITE_FULL (the old code told jobs 0, 1 and 3 "no such
      // savepoint", a plain error); PostgreSQL runs each job in its own transaction, so only job 2 is refused there.
      assert.deepEqual(outcomes.map(failure), dialect === 'sqlite' ? ['full', 'full', 'full', 'full'] : ['committed', 'committed', 'full', 'committed']);
      // What was answered as committed is there, and nothing of a refused job is.
      const committed = outcomes.flatMap((o, i) => (o.status === 'fulfilled' ? [`gc_d${i}`] : []));
      assert.deepEqual(await ids('gc_d'), committed);
      // Space is back: the same group commit goes on, no restart.
      assert.deepEqual(await Promise.all([5, 6].map((i) => transact(async (trx) => (await trx.insertInto('accounts').values(account(`gc_d${i}`)).execute(), i)))), [5, 6]);
      assert.deepEqual(await ids('gc_d'), [...committed, 'gc_d5', 'gc_d6']);
    });

    test('a transaction outside the group commit that finds the database full fails with that error, not with its failed rollback', async () => {
      const lift = await fillDatabase(t);
      try {
        const err = await t.db
          .transaction()
          .execute(async (trx) => trx.insertInto('accounts').values({ ...account('gc_e'), name: 'z'.repeat(200_000) }).execute())
          .then(
            () => assert.fail('the insert went through'),
            (e: unknown) => e,
          );
        // Before: SQLITE_ERROR "cannot rollback - no transaction is active" (SQLite had rolled it back already).
        assert.equal(resourceError(err)?.problem, 'full', String(err));
      } finally {
        await lift();
      }
      assert.deepEqual(await ids('gc_e'), []);
    });
  });
}
