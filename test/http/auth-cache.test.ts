import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

for (const dialect of DIALECTS) {
  describe(`API key cache (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: true, env: { AUTH_CACHE_TTL: '1s' } });

    test('a revocation through the service takes effect at once', async () => {
      const { accountId, key } = await t.account();
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      const [k] = await t.ctx.services.accounts.listKeys(accountId);
      await t.ctx.services.accounts.revokeKey(k!.id);
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 401);
    });

    test('a revocation made elsewhere (the CLI, another node) takes effect within the TTL', async () => {
      const { accountId, key } = await t.account();
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      await t.ctx.db.updateTable('api_keys').set({ revoked_at: t.fakeClock.now() }).where('account_id', '=', accountId).execute();
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200, 'still remembered inside the TTL');
      t.fakeClock.advance(1000);
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 401, 'refused once the TTL passed');
    });

    test('a plan change made elsewhere applies within the TTL; unknown keys are not remembered', async () => {
      const { accountId, key } = await t.account({ plan: 'pro' });
      assert.equal((await t.request('GET', '/v1/faqs', { key })).status, 200);
      await t.ctx.db.updateTable('accounts').set({ plan: 'free' }).where('id', '=', accountId).execute();
      t.fakeClock.advance(1001);
      assert.equal((await t.request('GET', '/v1/faqs', { key })).status, 403);
      assert.equal((await t.request('GET', '/v1/faqs', { key: 'sk_nope' })).status, 401);
    });
  });
}
