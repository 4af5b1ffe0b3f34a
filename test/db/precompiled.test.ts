import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { Kysely, sql, SqliteDialect } from 'kysely';
import { migrateToLatest } from '../../src/db/database.js';
import { precompile, precompileRows, precompileShapes, ROWS_AS_ARRAYS } from '../../src/db/precompiled.js';
import type { AccountsTable, DB } from '../../src/db/schema.js';
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

const COLUMNS = ['name', 'id', 'created_at'] as const; // not the table's order: the select list's
const pageRows = precompileRows(COLUMNS, (db, prefix: string, limit: number, offset: number) =>
  db.selectFrom('accounts').select(COLUMNS).where('id', 'like', prefix).orderBy('created_at', 'desc').orderBy('id').limit(limit).offset(offset),
);
const countRows = precompileRows(['n'] as const, (db, prefix: string) =>
  db.selectFrom('accounts').select(sql<number>`count(*)`.as('n')).where('id', 'like', prefix),
);
/** The builder's answer for pageRows, as tuples in the order of COLUMNS. */
async function builderPage(db: Kysely<DB>, prefix: string, limit: number, offset: number) {
  const rows = await db.selectFrom('accounts').select(COLUMNS).where('id', 'like', prefix).orderBy('created_at', 'desc').orderBy('id').limit(limit).offset(offset).execute();
  return rows.map((r) => [r.name, r.id, r.created_at]);
}

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

    test('shapes: one statement per key, each call with its own values (records walked)', async () => {
      const compiledKeys: string[] = [];
      const byPlan = precompileShapes(
        (s: { plan: AccountsTable['plan'] | null }) => (s.plan === null ? 'no plan' : 'plan'),
        (db, s, a: { range: { from: number; to: number }; plan?: AccountsTable['plan'] }) => {
          compiledKeys.push(s.plan === null ? 'no plan' : 'plan');
          const q = db.selectFrom('accounts').select('id').where('created_at', '>=', a.range.from).where('created_at', '<=', a.range.to).orderBy('id');
          return a.plan === undefined ? q.where('rate_limit_day', 'is', null) : q.where('plan', '=', a.plan);
        },
      );
      const ids = async (plan: AccountsTable['plan'] | null, from: number, to: number) =>
        (await byPlan(t.db, { plan }, { range: { from, to }, ...(plan === null ? {} : { plan }) })).rows.map((r) => r.id);
      assert.deepEqual(await ids('pro', 1_000, 1_002), ['acct_p0', 'acct_p1', 'acct_p2']);
      assert.deepEqual(await ids(null, 1_003, 1_004), ['acct_p3', 'acct_p4']);
      assert.deepEqual(await ids('enterprise', 1_000, 1_006), []);
      assert.deepEqual(await ids('pro', 1_005, 6_000), ['acct_p5', 'acct_p6', 'other_1']);
      assert.deepEqual(await ids(null, 0, 999), []);
      assert.deepEqual(compiledKeys, ['plan', 'no plan'], 'each shape compiled once');
    });

    test('shapes: an argument a shape does not bind is refused, and so is a key made of values', async () => {
      const unbound = precompileShapes(
        (s: { byName: boolean }) => String(s.byName),
        (db, s, a: { id: string; name: string }) => {
          const q = db.selectFrom('accounts').select('id').where('id', '=', a.id);
          return s.byName ? q.where('name', '=', a.name) : q;
        },
      );
      assert.equal((await unbound(t.db, { byName: true }, { id: 'acct_p1', name: 'name 1' })).rows.length, 1);
      await assert.rejects(unbound(t.db, { byName: false }, { id: 'acct_p1', name: 'name 1' }), /every argument must be a bound value/);
      const byValue = precompileShapes(
        (id: string) => id,
        (db, _id, a: { id: string }) => db.selectFrom('accounts').select('id').where('id', '=', a.id),
      );
      for (let i = 0; i < 64; i++) await byValue(t.db, `acct_${i}`, { id: `acct_${i}` });
      await assert.rejects(byValue(t.db, 'acct_64', { id: 'acct_64' }), /more than 64 shapes/);
    });

    test('rows as tuples: the builder’s rows in the order of the columns, each call with its own parameters', async () => {
      for (const [limit, offset] of [[3, 0], [3, 3], [10, 5], [2, 100]] as const) {
        assert.deepEqual(await pageRows(t.db, 'acct_p%', limit, offset), await builderPage(t.db, 'acct_p%', limit, offset), `limit ${limit} offset ${offset}`);
      }
      assert.deepEqual(await pageRows(t.db, 'nothing%', 10, 0), []);
      // count(*) is a number on both dialects (pg's int8 parser, database.ts)
      assert.deepEqual(await countRows(t.db, 'acct_p%'), [[7]]);
      assert.deepEqual(await countRows(t.db, 'nothing%'), [[0]]);
    });

    test('rows as tuples inside a transaction: its own uncommitted writes, gone after a rollback', async () => {
      await assert.rejects(
        t.db.transaction().execute(async (trx) => {
          await insertAccount(trx, 'acct_pt', 'in trx', 9_000);
          assert.deepEqual(await pageRows(trx, 'acct_p%', 1, 0), [['in trx', 'acct_pt', 9_000]]);
          assert.deepEqual(await pageRows(trx, 'acct_p%', 20, 0), await builderPage(trx, 'acct_p%', 20, 0));
          assert.deepEqual(await countRows(trx, 'acct_p%'), [[8]]);
          throw new Error('roll back');
        }),
        /roll back/,
      );
      assert.deepEqual(await countRows(t.db, 'acct_p%'), [[7]]);
      assert.equal((await pageRows(t.db, 'acct_p%', 1, 0))[0]![1], 'acct_p6');
    });

    test('rows as tuples: a select list other than the columns is refused', async () => {
      const swapped = precompileRows(['id', 'name'] as const, (db, id: string) => db.selectFrom('accounts').select(['name', 'id']).where('id', '=', id));
      await assert.rejects(swapped(t.db, 'x'), /select list must be exactly id, name/);
      const all = precompileRows(['id'] as const, (db, id: string) => db.selectFrom('accounts').selectAll().where('id', '=', id));
      await assert.rejects(all(t.db, 'x'), /select list must be exactly id/);
    });

    test('rows as tuples on the database while another transaction is open: only committed rows, once it ends', async () => {
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let inserted!: () => void;
      const didInsert = new Promise<void>((r) => (inserted = r));
      const trx = t.db.transaction().execute(async (tx) => {
        await insertAccount(tx, 'acct_pu', 'uncommitted', 9_500);
        inserted();
        await held;
      });
      await didInsert;
      const read = pageRows(t.db, 'acct_p%', 1, 0);
      const count = countRows(t.db, 'acct_p%');
      if (dialect === 'postgres') {
        // another connection: it answers at once, without the uncommitted row
        assert.deepEqual(await count, [[7]]);
        assert.equal((await read)[0]![1], 'acct_p6');
        release();
        await trx;
      } else {
        // the single connection is in the transaction: the read waits for it (never reads its uncommitted row)
        let settled = false;
        void read.then(() => (settled = true));
        await new Promise((r) => setTimeout(r, 20));
        assert.equal(settled, false, 'a read on the database must not run inside another request’s transaction');
        release();
        await trx;
        assert.deepEqual(await read, [['uncommitted', 'acct_pu', 9_500]]);
        assert.deepEqual(await count, [[8]]);
      }
      assert.deepEqual(await pageRows(t.db, 'acct_p%', 20, 0), await builderPage(t.db, 'acct_p%', 20, 0));
      await t.db.deleteFrom('accounts').where('id', '=', 'acct_pu').execute();
    });

    test('rows at once (now): the rows execute answers on SQLite with no transaction open; none inside or beside a transaction, nor on PostgreSQL', async () => {
      const expected = await pageRows(t.db, 'acct_p%', 3, 1);
      assert.deepEqual(pageRows.now(t.db, 'acct_p%', 3, 1), dialect === 'sqlite' ? expected : undefined);
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let inserted!: () => void;
      const didInsert = new Promise<void>((r) => (inserted = r));
      const trx = t.db.transaction().execute(async (tx) => {
        await insertAccount(tx, 'acct_pv', 'uncommitted', 9_600);
        inserted();
        // inside the transaction: through Kysely (its own writes), never straight on the handle
        assert.equal(countRows.now(tx, 'acct_p%'), undefined);
        await held;
      });
      await didInsert;
      // on SQLite the one connection is in that transaction: reading the handle now would see its uncommitted row
      assert.equal(countRows.now(t.db, 'acct_p%'), undefined);
      release();
      await trx;
      assert.deepEqual(countRows.now(t.db, 'acct_p%'), dialect === 'sqlite' ? await countRows(t.db, 'acct_p%') : undefined);
      await t.db.deleteFrom('accounts').where('id', '=', 'acct_pv').execute();
    });

    if (dialect === 'sqlite') {
      test('on SQLite the statement itself answers arrays (better-sqlite3 raw mode), not objects converted after', async () => {
        const { rows } = await t.db.executeQuery(sql`${sql.raw(ROWS_AS_ARRAYS)}select id, name from accounts where id = ${'acct_p1'}`.compile(t.db));
        assert.deepEqual(rows, [['acct_p1', 'name 1']]);
        const { rows: objects } = await t.db.executeQuery(sql`select id, name from accounts where id = ${'acct_p1'}`.compile(t.db));
        assert.deepEqual(objects, [{ id: 'acct_p1', name: 'name 1' }]);
      });

      test('on a SQLite handle opened without the statement cache, rows as tuples still come out right', async () => {
        const plain = new Kysely<DB>({ dialect: new SqliteDialect({ database: new SQLite(':memory:') }) });
        try {
          await migrateToLatest(plain);
          for (let i = 0; i < 3; i++) await insertAccount(plain, `acct_q${i}`, `q ${i}`, 10 + i);
          assert.deepEqual(await pageRows(plain, 'acct_q%', 2, 0), [['q 2', 'acct_q2', 12], ['q 1', 'acct_q1', 11]]);
          assert.deepEqual(await countRows(plain, 'acct_q%'), [[3]]);
        } finally {
          await plain.destroy();
        }
      });
    }
  });
}
