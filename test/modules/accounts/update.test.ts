import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { createAccountsService } from '../../../src/modules/accounts/accounts.service.js';
import { useTestApp, type SuiteApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

for (const dialect of DIALECTS) {
  describe(`accounts: updateAccount (${dialect})`, () => {
    // The key cache on, with the app's clock: its TTL passes when the test says so.
    const t = useTestApp(dialect, { fakeClock: true, env: { AUTH_CACHE_TTL: '1s' } });
    const accounts = () => t.ctx.services.accounts;

    test("changes the name, the plan and an enterprise account's limits with createAccount's rules; leaving enterprise drops them", async () => {
      const a = await accounts().createAccount({ name: 'Acme', plan: 'free' });
      assert.deepEqual(await accounts().updateAccount(a.id, { name: '  Acme Inc  ' }), { ...a, name: 'Acme Inc' });
      assert.deepEqual(await accounts().updateAccount(a.id, { plan: 'pro' }), { ...a, name: 'Acme Inc', plan: 'pro' });
      const refusals: Array<[Parameters<ReturnType<typeof accounts>['updateAccount']>[1], RegExp]> = [
        [{}, /nothing to change/],
        [{ name: ' \t' }, /--name must not be blank$/],
        [{ name: 'x'.repeat(201) }, /--name must be at most 200 characters$/],
        [{ plan: 'gold' }, /--plan must be one of free, pro, business, enterprise$/],
        [{ plan: 'enterprise' }, /--rate-limit-minute is required for the enterprise plan$/],
        [{ plan: 'enterprise', rateLimitMinute: 10 }, /--rate-limit-day is required for the enterprise plan$/],
        [{ plan: 'enterprise', rateLimitMinute: 0, rateLimitDay: 10 }, /--rate-limit-minute must be a positive integer$/],
        [{ plan: 'enterprise', rateLimitMinute: 10, rateLimitDay: 2_147_483_648 }, /--rate-limit-day must be at most 2147483647$/],
        [{ rateLimitMinute: 10 }, /--rate-limit-minute and --rate-limit-day are only accepted for the enterprise plan$/],
        [{ plan: 'business', rateLimitDay: 10 }, /only accepted for the enterprise plan/],
      ];
      for (const [input, re] of refusals) await assert.rejects(accounts().updateAccount(a.id, input), re, JSON.stringify(input));
      await assert.rejects(accounts().updateAccount('acct_nope', { name: 'x' }), /^Error: account acct_nope not found$/);
      assert.equal((await accounts().listAccounts()).find((x) => x.id === a.id)?.plan, 'pro', 'nothing changed by the refusals');

      const ent = await accounts().updateAccount(a.id, { plan: 'enterprise', rateLimitMinute: 50, rateLimitDay: 5_000 });
      assert.deepEqual([ent.plan, ent.rateLimitMinute, ent.rateLimitDay], ['enterprise', 50, 5_000]);
      // Already enterprise: one limit alone changes that one and keeps the other.
      const minuteOnly = await accounts().updateAccount(a.id, { rateLimitMinute: 70 });
      assert.deepEqual([minuteOnly.rateLimitMinute, minuteOnly.rateLimitDay], [70, 5_000]);
      const left = await accounts().updateAccount(a.id, { plan: 'business' });
      assert.deepEqual(left, { ...a, name: 'Acme Inc', plan: 'business' }, 'no limits shown off enterprise');
      const row = await t.ctx.db.selectFrom('accounts').selectAll().where('id', '=', a.id).executeTakeFirstOrThrow();
      assert.deepEqual([row.rate_limit_minute, row.rate_limit_day], [null, null], 'its own limits are dropped');
      // Back to enterprise, its old limits are gone: both are asked for again.
      await assert.rejects(accounts().updateAccount(a.id, { plan: 'enterprise', rateLimitDay: 10 }), /--rate-limit-minute is required/);
    });

    test('a plan change applies at once in this process, and elsewhere once the key cache forgets the key (AUTH_CACHE_TTL)', async () => {
      const { accountId, key } = await t.account({ plan: 'pro' });
      const docs = async () => (await t.request('GET', '/v1/documents', { key })).status;
      assert.equal(await docs(), 200);
      // Another process (the CLI) moves it to free: this node trusts what it cached until the TTL has passed.
      const cli = createAccountsService(t.ctx.db, t.fakeClock, { dialect });
      await cli.updateAccount(accountId, { plan: 'free' });
      assert.equal(await docs(), 200, 'within AUTH_CACHE_TTL the cached plan still applies');
      t.fakeClock.advance(1_000);
      assert.equal(await docs(), 403, 'a server key of a free account');
      // Through this process: at once.
      await accounts().updateAccount(accountId, { plan: 'pro' });
      assert.equal(await docs(), 200);
      // Its limits reach the rate-limit headers the same way.
      await accounts().updateAccount(accountId, { plan: 'enterprise', rateLimitMinute: 7, rateLimitDay: 70 });
      assert.equal((await t.request('GET', '/v1/documents', { key })).headers.get('x-ratelimit-limit'), '7');
    });
  });
}

/** `n` requests with the key, answering the last one's status and X-RateLimit-Remaining. */
async function spend(t: SuiteApp, key: string, n: number) {
  let last: { status: number; remaining: string | null } = { status: 0, remaining: null };
  for (let i = 0; i < n; i++) {
    const r = await t.request('GET', '/v1/documents', { key });
    last = { status: r.status, remaining: r.headers.get('x-ratelimit-remaining') };
  }
  return last;
}

describe('accounts: a changed rate limit and the current window (in memory)', () => {
  const t = useTestApp('sqlite');
  test("in memory a new limit starts new counters (the window's count starts over); back to the old limit, its counters resume", async () => {
    const { accountId, key } = await t.account({ minute: 5, day: 100 });
    assert.deepEqual(await spend(t, key, 4), { status: 200, remaining: '1' });
    await t.ctx.services.accounts.updateAccount(accountId, { rateLimitMinute: 10 });
    assert.deepEqual(await spend(t, key, 1), { status: 200, remaining: '9' }, 'counted from zero under the new minute limit');
    await t.ctx.services.accounts.updateAccount(accountId, { rateLimitMinute: 5 });
    assert.deepEqual(await spend(t, key, 1), { status: 200, remaining: '0' }, 'the count kept under the old limit resumes');
    assert.equal((await spend(t, key, 1)).status, 429);
  });
});

describe('accounts: a changed rate limit and the current window (Redis)', () => {
  const keyPrefix = `test:acct:${randomBytes(4).toString('hex')}`;
  const t = useTestApp('sqlite', { redisUrl: REDIS_URL, keyPrefix });
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS_URL);
  });
  after(async () => {
    const keys = await redis.keys(`${keyPrefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });
  test("with Redis the window's count carries over: the new limit applies to what was already counted", async () => {
    await t.limiter.ready();
    const { accountId, key } = await t.account({ minute: 5, day: 100 });
    assert.deepEqual(await spend(t, key, 4), { status: 200, remaining: '1' });
    await t.ctx.services.accounts.updateAccount(accountId, { rateLimitMinute: 10 });
    assert.deepEqual(await spend(t, key, 1), { status: 200, remaining: '5' }, '5 requests counted of 10');
    await t.ctx.services.accounts.updateAccount(accountId, { rateLimitMinute: 3 });
    const refused = await t.request('GET', '/v1/documents', { key });
    assert.equal(refused.status, 429, 'already past the lowered limit');
    assert.equal(refused.headers.get('x-ratelimit-limit'), '3');
  });
});
