import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createGroupCommit } from '../../src/db/group-commit.js';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/db.js';

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
  });
}
