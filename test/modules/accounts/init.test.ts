import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { AccountsExistError } from '../../../src/modules/accounts/accounts.service.js';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

// `parley init` checks that the database has no account, then creates one: the check and the write share one
// locked transaction, so concurrent inits (setup scripts started together) make one account.
for (const dialect of DIALECTS) {
  describe(`initFirstAccount (${dialect})`, () => {
    let t: TestApp;
    before(async () => {
      t = await createTestApp(dialect);
    });
    after(() => t.close());

    test('concurrent calls on an empty database create one account and one key; the others refuse naming it', async () => {
      // Open the pool's connections first: otherwise each call waits for a new connection and they run one by one.
      await Promise.all([1, 2, 3, 4, 5].map(() => sql`select 1`.execute(t.ctx.db)));
      const results = await Promise.allSettled([1, 2, 3, 4].map((i) => t.ctx.services.accounts.initFirstAccount({ name: `Co ${i}`, plan: 'pro' }, false)));
      const made = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
      assert.equal(made.length, 1);
      const refused = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
      assert.equal(refused.length, 3);
      for (const err of refused) {
        assert.ok(err instanceof AccountsExistError, String(err));
        assert.deepEqual(err.existing, [{ id: made[0]!.account.id, name: made[0]!.account.name }]);
      }
      assert.equal((await t.ctx.db.selectFrom('accounts').select('id').execute()).length, 1);
      assert.equal((await t.ctx.db.selectFrom('api_keys').select('id').execute()).length, 1);
    });

    test('an account being deleted does not count: init makes the first usable one, then refuses naming only that', async () => {
      const before = await t.ctx.db.selectFrom('accounts').select('id').execute();
      assert.ok(before.length > 0);
      // The deletion's first step (accounts delete, cut short or still running) on every account there is.
      await t.ctx.db.updateTable('accounts').set({ deletion_started_at: Date.now() }).execute();
      const made = await t.ctx.services.accounts.initFirstAccount({ name: 'Afresh', plan: 'pro' }, false);
      assert.match(made.key.key, /^sk_/);
      await assert.rejects(t.ctx.services.accounts.initFirstAccount({ name: 'Again', plan: 'pro' }, false), (err: unknown) => {
        assert.ok(err instanceof AccountsExistError);
        assert.deepEqual(err.existing, [{ id: made.account.id, name: 'Afresh' }]);
        return true;
      });
      assert.equal((await t.ctx.db.selectFrom('accounts').select('id').execute()).length, before.length + 1);
      await t.ctx.db.updateTable('accounts').set({ deletion_started_at: null }).where('id', 'in', before.map((a) => a.id)).execute();
    });

    test('force makes another account even when one exists', async () => {
      const again = await t.ctx.services.accounts.initFirstAccount({ name: 'Second', plan: 'pro' }, true);
      assert.match(again.key.key, /^sk_/);
      assert.equal((await t.ctx.db.selectFrom('accounts').select('id').execute()).length, 3);
    });
  });
}
