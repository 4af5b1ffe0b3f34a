import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { afterCommit, transactionRetries, writeTransaction } from '../../src/db/unit-of-work.js';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';

// SQLite has one writer and cannot deadlock: PostgreSQL only.
describe('write transactions that lose a deadlock are run again (postgres)', () => {
  let t: TestDatabase;
  before(async () => {
    t = await createTestDatabase('postgres');
  });
  after(() => t.cleanup());

  const account = (id: string) => ({ id, name: id, plan: 'pro' as const, rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 1 });
  const nameOf = async (id: string) => (await t.db.selectFrom('accounts').select('name').where('id', '=', id).executeTakeFirstOrThrow()).name;

  test('two transactions locking two rows in opposite orders both commit; the victim ran twice, its hooks once', async () => {
    await t.db.insertInto('accounts').values([account('ac_dl1'), account('ac_dl2')]).execute();
    const before = transactionRetries.deadlock;
    // Each side takes its first row, then waits until the other has taken its own: the second lock of each then
    // waits for the other, which PostgreSQL detects (deadlock_timeout, 1 s by default) and breaks by failing one.
    let arrived = 0;
    let release!: () => void;
    const bothHoldOne = new Promise<void>((r) => (release = r));
    const runs = { a: 0, b: 0 };
    const hooks: string[] = [];
    const side = (me: 'a' | 'b', first: string, second: string) =>
      writeTransaction(t.db, async (trx) => {
        runs[me]++;
        afterCommit(trx, () => hooks.push(me));
        await trx.updateTable('accounts').set({ name: `${me}-first` }).where('id', '=', first).execute();
        if (++arrived === 2) release();
        await bothHoldOne;
        await trx.updateTable('accounts').set({ name: `${me}-second` }).where('id', '=', second).execute();
        return me;
      });
    const outcomes = await Promise.allSettled([side('a', 'ac_dl1', 'ac_dl2'), side('b', 'ac_dl2', 'ac_dl1')]);
    assert.deepEqual(
      outcomes.map((o) => (o.status === 'fulfilled' ? o.value : String(o.reason))),
      ['a', 'b'],
    );
    // One of them was the victim and ran again (after the other committed, so its second run wrote last).
    assert.deepEqual([runs.a, runs.b].sort(), [1, 2]);
    assert.equal(transactionRetries.deadlock, before + 1);
    assert.deepEqual(hooks.sort(), ['a', 'b']);
    const victim = runs.a === 2 ? 'a' : 'b';
    const [n1, n2] = [await nameOf('ac_dl1'), await nameOf('ac_dl2')];
    assert.deepEqual(victim === 'a' ? [n1, n2] : [n2, n1], [`${victim}-first`, `${victim}-second`]);
  });

  test('another failure is not run again', async () => {
    await t.db.insertInto('accounts').values(account('ac_dup')).execute();
    let runs = 0;
    await assert.rejects(
      writeTransaction(t.db, async (trx) => {
        runs++;
        await trx.insertInto('accounts').values(account('ac_dup')).execute();
      }),
      (err: { code?: string }) => err.code === '23505',
    );
    assert.equal(runs, 1);
  });
});
