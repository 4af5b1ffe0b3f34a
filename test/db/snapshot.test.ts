import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { openDatabase, type Database } from '../../src/db/database.js';
import { readSnapshot } from '../../src/db/snapshot.js';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/db.js';

for (const dialect of DIALECTS) {
  describe(`read snapshot (${dialect})`, () => {
    let t: TestDatabase;
    /** A second, independent connection (pool) that commits while the snapshot is open. */
    let other: Database;
    let dir = '';
    before(async () => {
      if (dialect === 'sqlite') {
        dir = mkdtempSync(join(tmpdir(), 'parley-snap-'));
        t = await createTestDatabase(dialect, { file: join(dir, 'db.sqlite') });
      } else t = await createTestDatabase(dialect);
      other = openDatabase(t.url);
    });
    after(async () => {
      await other.close();
      await t.cleanup();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    const account = (id: string) => ({ id, name: id, plan: 'pro' as const, rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 1 });
    const count = (db: Database['db']) =>
      db.selectFrom('accounts').select((eb) => eb.fn.countAll<number>().as('n')).where('id', 'like', 'snap_%').executeTakeFirstOrThrow();

    test('reads inside see one state: a commit made between them is not seen by the second', async () => {
      await t.db.insertInto('accounts').values(account('snap_1')).execute();
      const [first, second] = await readSnapshot(t.db, async (trx) => {
        const a = Number((await count(trx)).n);
        await other.db.insertInto('accounts').values(account('snap_2')).execute();
        const b = Number((await count(trx)).n);
        return [a, b];
      });
      assert.equal(first, 1);
      assert.equal(second, 1, 'the second read saw a commit made after the first');
      assert.equal(Number((await count(t.db)).n), 2, 'the commit did land');
    });
  });
}
