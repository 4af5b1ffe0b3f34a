import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { precompile } from '../../src/db/precompiled.js';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/db.js';

const insertAccount = precompile((db, id: string, name: string, createdAt: number) =>
  db.insertInto('accounts').values({ id, name, plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: createdAt }),
);
const page = precompile((db, prefix: string, limit: number, offset: number) =>
  db
    .selectFrom('accounts')
    .select(['id', 'name', 'created_at'])
    .where('id', 'like', prefix)
    .where('plan', '=', 'pro') // a constant stays bound with its build-time value
    .orderBy('created_at', 'desc')
    .limit(limit)
    .offset(offset),
);
const bump = precompile((db, id: string) =>
  db
    .updateTable('accounts')
    .set((eb) => ({ created_at: eb('created_at', '+', 1) }))
    .where('id', '=', id),
);

for (const dialect of DIALECTS) {
  describe(`precompiled queries (${dialect})`, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
    });
    after(() => t.cleanup());

    test('answer exactly what the builder answers, with each call’s own parameters', async () => {
      for (let i = 0; i < 7; i++) await insertAccount(t.db, `acct_p${i}`, `name ${i}`, 1_000 + i);
      await insertAccount(t.db, 'other_1', 'other', 5_000);
      for (const [limit, offset] of [[3, 0], [3, 3], [10, 5], [2, 100]] as const) {
        const got = (await page(t.db, 'acct_p%', limit, offset)).rows;
        const want = await t.db
          .selectFrom('accounts')
          .select(['id', 'name', 'created_at'])
          .where('id', 'like', 'acct_p%')
          .where('plan', '=', 'pro')
          .orderBy('created_at', 'desc')
          .limit(limit)
          .offset(offset)
          .execute();
        assert.deepEqual(got, want, `limit ${limit} offset ${offset}`);
      }
      assert.deepEqual((await page(t.db, 'other%', 10, 0)).rows.map((r) => r.id), ['other_1']);
    });

    test('run inside a transaction, and roll back with it', async () => {
      const version = async () => (await t.db.selectFrom('accounts').select('created_at').where('id', '=', 'acct_p0').executeTakeFirstOrThrow()).created_at;
      const v0 = await version();
      await t.db.transaction().execute(async (trx) => {
        const r = await bump(trx, 'acct_p0');
        assert.equal(Number(r.numAffectedRows), 1);
      });
      assert.equal(await version(), v0 + 1);
      await assert.rejects(
        t.db.transaction().execute(async (trx) => {
          await bump(trx, 'acct_p0');
          throw new Error('boom');
        }),
        /boom/,
      );
      assert.equal(await version(), v0 + 1);
    });

    test('refuse an argument that shapes the query instead of being bound', async () => {
      const branching = precompile((db, id: string) => db.selectFrom('accounts').select('id').where(sql.raw(`id = '${String(id)}'`) as never));
      await assert.rejects(branching(t.db, 'x'), /every argument must be a bound value/);
      const unused = precompile((db, _id: string) => db.selectFrom('accounts').select('id'));
      await assert.rejects(unused(t.db, 'x'), /every argument must be a bound value/);
    });
  });
}
