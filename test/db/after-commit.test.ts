import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { afterCommit, writeTransaction } from '../../src/db/unit-of-work.js';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/db.js';

for (const dialect of DIALECTS) {
  describe(`afterCommit hooks of write transactions (${dialect})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(() => t.cleanup());

    const account = (id: string) => ({ id, name: id, plan: 'pro' as const, rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 1 });
    const exists = async (id: string) => (await t.db.selectFrom('accounts').select('id').where('id', '=', id).execute()).length === 1;

    test('a hook runs once the transaction has committed: not during its body, and its writes are visible to it', async () => {
      const ran: boolean[] = [];
      let duringBody = false;
      await writeTransaction(t.db, async (trx) => {
        await trx.insertInto('accounts').values(account('ac_a')).execute();
        assert.equal(
          afterCommit(trx, () => ran.push(true)),
          true,
        );
        await new Promise((r) => setTimeout(r, 20));
        duringBody = ran.length > 0;
      });
      assert.equal(duringBody, false);
      assert.deepEqual(ran, [true]);
      assert.equal(await exists('ac_a'), true);
    });

    test('a transaction that fails runs none of its hooks; concurrent ones that commit run only their own', async () => {
      await t.db.insertInto('accounts').values(account('ac_dup')).execute();
      const ran: string[] = [];
      // Arriving together: on SQLite the three share one group commit, the failing one rolled back to its savepoint.
      const outcomes = await Promise.allSettled(
        ['ac_b1', 'ac_dup', 'ac_b2'].map((id) =>
          writeTransaction(t.db, async (trx) => {
            afterCommit(trx, () => ran.push(id));
            await trx.insertInto('accounts').values(account(id)).execute();
          }),
        ),
      );
      assert.deepEqual(
        outcomes.map((o) => o.status),
        ['fulfilled', 'rejected', 'fulfilled'],
      );
      assert.deepEqual(ran.sort(), ['ac_b1', 'ac_b2']);
    });

    test('a transaction not started by writeTransaction keeps no hook and says so', async () => {
      let ran = false;
      const kept = await t.db.transaction().execute(async (trx) => afterCommit(trx, () => (ran = true)));
      assert.equal(kept, false);
      assert.equal(ran, false);
    });
  });
}
