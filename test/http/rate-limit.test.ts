import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { Redis } from 'ioredis';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { clientBlock, createRateLimiter } from '../../src/http/rate-limit.js';
import { createTestApp, useTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';
import { createFreezableRelay } from '../helpers/relay.js';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

/**
 * Minute 5, day 3: the 4th and 5th requests are refused by the day; the 6th passes the minute's limit too, and its
 * Retry-After must still point at the day's reset (a client waiting a minute would only get another 429).
 */
async function dayUsedUpThenMinute(app: TestApp) {
  const { key } = await app.account({ minute: 5, day: 3 });
  const statuses: number[] = [];
  let last: { status: number; headers: Headers; body: any } | undefined;
  for (let i = 0; i < 6; i++) {
    last = await app.request('GET', '/v1/documents', { key });
    statuses.push(last.status);
  }
  assert.deepEqual(statuses, [200, 200, 200, 429, 429, 429]);
  assert.match(last!.body.error.message, /3 requests per day/);
  const retryAfter = Number(last!.headers.get('retry-after'));
  assert.ok(retryAfter > 60 && retryAfter <= 86_400, `Retry-After ${retryAfter}`);
  assert.equal(last!.headers.get('x-ratelimit-remaining'), '0');
}

test('clientBlock: IPv4 as is (also IPv4-mapped), IPv6 by its /64', () => {
  assert.equal(clientBlock('203.0.113.7'), '203.0.113.7');
  assert.equal(clientBlock('::ffff:203.0.113.7'), '203.0.113.7');
  assert.equal(clientBlock('2001:db8:1:2::1'), '2001:db8:1:2::/64');
  assert.equal(clientBlock('2001:0db8:0001:0002:ffff:0:0:9'), '2001:db8:1:2::/64');
  assert.equal(clientBlock('2001:db8::5'), '2001:db8:0:0::/64');
  assert.equal(clientBlock('::1'), '0:0:0:0::/64');
  assert.notEqual(clientBlock('2001:db8:1:3::1'), clientBlock('2001:db8:1:2::1'));
});

test('TRUST_PROXY and PUBLIC_KEY_RATE_PER_CLIENT are read and checked', () => {
  assert.equal(loadConfig({}).trustProxy, false);
  assert.equal(loadConfig({}).publicKeyRatePerClient, 0);
  assert.equal(loadConfig({ TRUST_PROXY: 'true' }).trustProxy, true);
  assert.equal(loadConfig({ TRUST_PROXY: '2' }).trustProxy, 2);
  assert.deepEqual(loadConfig({ TRUST_PROXY: '10.0.0.0/8, 127.0.0.1,::1' }).trustProxy, ['10.0.0.0/8', '127.0.0.1', '::1']);
  assert.throws(() => loadConfig({ TRUST_PROXY: 'nginx' }), /TRUST_PROXY="nginx": must be true, false, a number of proxy hops, or addresses and CIDR blocks/);
  assert.throws(() => loadConfig({ TRUST_PROXY: '10.0.0.0/33' }), /TRUST_PROXY/);
  assert.equal(loadConfig({ PUBLIC_KEY_RATE_PER_CLIENT: '30' }).publicKeyRatePerClient, 30);
  assert.throws(() => loadConfig({ PUBLIC_KEY_RATE_PER_CLIENT: 'many' }), /PUBLIC_KEY_RATE_PER_CLIENT/);
});

test('PUBLIC_KEY_RATE_SHARE is a percentage (50 or 50%), 100 by default; REDIS_KEY_PREFIX defaults to parley:rl', () => {
  assert.equal(loadConfig({}).publicKeyRateShare, 100);
  assert.equal(loadConfig({ PUBLIC_KEY_RATE_SHARE: '50%' }).publicKeyRateShare, 50);
  assert.equal(loadConfig({ PUBLIC_KEY_RATE_SHARE: '25' }).publicKeyRateShare, 25);
  assert.throws(() => loadConfig({ PUBLIC_KEY_RATE_SHARE: '50.5%' }), /PUBLIC_KEY_RATE_SHARE="50.5%": must be a percentage from 1 to 100/);
  assert.equal(loadConfig({}).redisKeyPrefix, 'parley:rl');
  assert.equal(loadConfig({ REDIS_KEY_PREFIX: 'shop-a:rl' }).redisKeyPrefix, 'shop-a:rl');
  assert.throws(() => loadConfig({ REDIS_KEY_PREFIX: 'a\tb' }), /REDIS_KEY_PREFIX/);
});

for (const dialect of DIALECTS) {
  describe(`rate limits, in memory (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('minute window: headers on every response, remaining decreasing, reset in Unix seconds; then 429 with Retry-After', async () => {
      const { key } = await t.account({ minute: 3, day: 1000 });
      const startSec = Date.now() / 1000;
      const seen: { remaining: number; reset: number }[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await t.request('GET', '/v1/documents', { key });
        assert.equal(r.status, 200);
        assert.equal(r.headers.get('x-ratelimit-limit'), '3');
        seen.push({ remaining: Number(r.headers.get('x-ratelimit-remaining')), reset: Number(r.headers.get('x-ratelimit-reset')) });
      }
      assert.deepEqual(seen.map((s) => s.remaining), [2, 1, 0]);
      for (const { reset } of seen) {
        assert.ok(Number.isInteger(reset), 'reset is an integer');
        assert.ok(reset >= Math.floor(startSec), `reset ${reset} is not in the past`);
        assert.ok(reset <= Math.ceil(startSec) + 61, `reset ${reset} is within the minute`);
      }
      // One fixed window: every response names the same reset time (±1 s rounding).
      assert.ok(Math.abs(seen[0]!.reset - seen[2]!.reset) <= 1);

      const limited = await t.request('GET', '/v1/faqs', { key });
      assert.equal(limited.status, 429);
      assert.deepEqual(limited.body, { success: false, error: { code: 'RATE_LIMITED', message: limited.body.error.message } });
      assert.match(limited.body.error.message, /3 requests per minute/);
      const retryAfter = Number(limited.headers.get('retry-after'));
      assert.ok(Number.isInteger(retryAfter) && retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
      assert.equal(limited.headers.get('x-ratelimit-limit'), '3');
      assert.equal(limited.headers.get('x-ratelimit-remaining'), '0');
      // a limited request is refused before its body is read or its write is made
      const write = await t.request('POST', '/v1/documents', { key, body: { title: 'x', content: 'y' } });
      assert.equal(write.status, 429);
      const { accountId } = (await t.ctx.services.accounts.authenticate(key))!;
      const docs = await t.ctx.db.selectFrom('documents').select('id').where('account_id', '=', accountId).execute();
      assert.equal(docs.length, 0);
    });

    test('accounts have separate quotas', async () => {
      const a = await t.account({ minute: 1, day: 1000 });
      const b = await t.account({ minute: 1, day: 1000 });
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 200);
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 429);
      assert.equal((await t.request('GET', '/v1/documents', { key: b.key })).status, 200);
    });

    test('two keys of one account share its quota', async () => {
      const { accountId, key } = await t.account({ minute: 2, day: 1000 });
      const other = await t.ctx.services.accounts.createKey({ accountId });
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      assert.equal((await t.request('GET', '/v1/documents', { key: other.key })).status, 200);
      assert.equal((await t.request('GET', '/v1/documents', { key: other.key })).status, 429);
    });

    test('day used up, then the minute too: Retry-After still points at the day', () => dayUsedUpThenMinute(t));

    test('day window: past the daily limit 429 with a Retry-After longer than a minute', async () => {
      const { key } = await t.account({ minute: 100, day: 2 });
      for (let i = 0; i < 2; i++) assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      const r = await t.request('GET', '/v1/documents', { key });
      assert.equal(r.status, 429);
      assert.equal(r.body.error.code, 'RATE_LIMITED');
      assert.match(r.body.error.message, /2 requests per day/);
      const retryAfter = Number(r.headers.get('retry-after'));
      assert.ok(retryAfter > 60 && retryAfter <= 86_400, `Retry-After ${retryAfter}`);
      // the minute headers still describe the minute window
      assert.equal(r.headers.get('x-ratelimit-limit'), '100');
    });

    test('plan limits apply to non-enterprise accounts', async () => {
      for (const [plan, minute] of [['pro', '300'], ['business', '1000']] as const) {
        const { key } = await t.account({ plan });
        const r = await t.request('GET', '/v1/documents', { key });
        assert.equal(r.headers.get('x-ratelimit-limit'), minute);
        assert.equal(r.headers.get('x-ratelimit-remaining'), String(Number(minute) - 1));
      }
    });

    test('an unknown path with a valid key is counted and carries the headers; with a bad key it stays a plain 404', async () => {
      const { key } = await t.account({ minute: 2, day: 1000 });
      const first = await t.request('GET', '/v1/nope', { key });
      assert.equal(first.status, 404);
      assert.equal(first.headers.get('x-ratelimit-limit'), '2');
      assert.equal(first.headers.get('x-ratelimit-remaining'), '1');
      assert.equal((await t.request('GET', '/v1/documents', { key })).headers.get('x-ratelimit-remaining'), '0');
      const limited = await t.request('GET', '/v1/also-nope', { key });
      assert.equal(limited.status, 429);
      assert.equal(limited.body.error.code, 'RATE_LIMITED');
      assert.ok(Number(limited.headers.get('retry-after')) >= 1);
      const bad = await t.request('GET', '/v1/nope', { key: 'sk_not_a_key' });
      assert.equal(bad.status, 404);
      assert.equal(bad.headers.get('x-ratelimit-limit'), null);
    });

    test('an unknown path is counted also when its body cannot be parsed (malformed JSON, wrong charset, too large)', async () => {
      const { key } = await t.account({ minute: 4, day: 1000 });
      const post = (raw: string, type = 'application/json') => t.request('POST', '/v1/nothing', { key, raw, headers: { 'content-type': type } });
      const remaining: Array<string | null> = [];
      for (const r of [await post('{bad'), await post('{}', 'application/json; charset=latin1'), await post(`{"a":"${'x'.repeat(1024 * 1024)}"}`)]) {
        assert.equal(r.status, 404, r.text);
        assert.equal(r.body.error.code, 'NOT_FOUND');
        remaining.push(r.headers.get('x-ratelimit-remaining'));
      }
      assert.deepEqual(remaining, ['3', '2', '1']);
      assert.equal((await post('{}')).headers.get('x-ratelimit-remaining'), '0', 'a parsable body is counted once, not twice');
      const limited = await post('{bad');
      assert.equal(limited.status, 429, limited.text);
      assert.equal(limited.body.error.code, 'RATE_LIMITED');
    });

    test('public routes carry no rate-limit headers', async () => {
      const r = await t.request('GET', '/v1/health');
      assert.equal(r.headers.get('x-ratelimit-limit'), null);
    });

    test('without PUBLIC_KEY_RATE_SHARE a public key draws on the whole account window, as a server key does', async () => {
      const { accountId, key } = await t.account({ minute: 4, day: 1000 });
      const pk = (await t.ctx.services.accounts.createKey({ accountId, type: 'public' })).key;
      const r = await t.request('GET', '/v1/chat/conversations/conv_nope', { key: pk });
      assert.equal(r.status, 404);
      assert.equal(r.headers.get('x-ratelimit-limit'), '4');
      assert.equal(r.headers.get('x-ratelimit-remaining'), '3');
      assert.equal((await t.request('GET', '/v1/documents', { key })).headers.get('x-ratelimit-remaining'), '2');
    });
  });

  describe(`rate limits with PUBLIC_KEY_RATE_PER_CLIENT=2 behind a trusted proxy (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { PUBLIC_KEY_RATE_PER_CLIENT: '2', TRUST_PROXY: 'true' } });
    const from = (pk: string, ip: string) => t.request('GET', '/v1/chat/conversations/conv_nope', { key: pk, headers: { 'x-forwarded-for': ip } });

    test("one client address gets 2 a minute with the account's public keys; another address has its own; refusals count nowhere else", async () => {
      const { accountId, key } = await t.account({ minute: 10, day: 1000 });
      const pk = (await t.ctx.services.accounts.createKey({ accountId, type: 'public' })).key;
      const seen = [];
      for (let i = 0; i < 4; i++) {
        const r = await from(pk, '203.0.113.1');
        seen.push([r.status, r.headers.get('x-ratelimit-limit'), r.headers.get('x-ratelimit-remaining')]);
        if (r.status === 429) assert.match(r.body.error.message, /^rate limit of 2 requests per minute exceeded for one client of public keys$/);
      }
      assert.deepEqual(seen, [
        [404, '2', '1'],
        [404, '2', '0'],
        [429, '2', '0'],
        [429, '2', '0'],
      ]);
      assert.equal((await from(pk, '203.0.113.2')).status, 404, 'another address has its own allowance');
      // IPv6: one /64 is one client.
      assert.equal((await from(pk, '2001:db8:1:2::1')).status, 404);
      assert.equal((await from(pk, '2001:db8:1:2::9')).status, 404);
      assert.equal((await from(pk, '2001:db8:1:2::ffff')).status, 429);
      // The account counted the 5 admitted ones only, and server keys have no per-client allowance.
      const server = await t.request('GET', '/v1/documents', { key, headers: { 'x-forwarded-for': '203.0.113.1' } });
      assert.equal(server.status, 200);
      assert.equal(server.headers.get('x-ratelimit-limit'), '10');
      assert.equal(server.headers.get('x-ratelimit-remaining'), '4');
    });
  });

  describe(`PUBLIC_KEY_RATE_PER_CLIENT without TRUST_PROXY (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { PUBLIC_KEY_RATE_PER_CLIENT: '2' } });

    test('X-Forwarded-For is not believed: a client cannot give itself a fresh address per request', async () => {
      const { accountId } = await t.account({ minute: 10, day: 1000 });
      const pk = (await t.ctx.services.accounts.createKey({ accountId, type: 'public' })).key;
      const statuses = [];
      for (let i = 0; i < 3; i++) {
        statuses.push((await t.request('GET', '/v1/chat/conversations/conv_nope', { key: pk, headers: { 'x-forwarded-for': `198.51.100.${i}` } })).status);
      }
      assert.deepEqual(statuses, [404, 404, 429]);
    });
  });

  describe(`rate limits with PUBLIC_KEY_RATE_SHARE=50% (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { PUBLIC_KEY_RATE_SHARE: '50%' } });
    const publicKey = async (accountId: string) => (await t.ctx.services.accounts.createKey({ accountId, type: 'public' })).key;
    const chat = (pk: string) => t.request('GET', '/v1/chat/conversations/conv_nope', { key: pk });

    test("public keys get half of each window; what their budget refuses is not counted in the account's, so server keys keep the rest", async () => {
      const { accountId, key } = await t.account({ minute: 4, day: 1000 });
      const pk = await publicKey(accountId);
      const seen = [];
      for (let i = 0; i < 5; i++) {
        const r = await chat(pk);
        seen.push([r.status, r.headers.get('x-ratelimit-limit'), r.headers.get('x-ratelimit-remaining')]);
        if (r.status === 429) {
          assert.equal(r.body.error.code, 'RATE_LIMITED');
          assert.match(r.body.error.message, /public-key rate limit of 2 requests per minute exceeded \(public keys may use 50% of the account's 4 per minute and 1000 per day\)/);
          const retryAfter = Number(r.headers.get('retry-after'));
          assert.ok(retryAfter >= 1 && retryAfter <= 60, `Retry-After ${retryAfter}`);
        }
      }
      assert.deepEqual(seen, [
        [404, '2', '1'],
        [404, '2', '0'],
        [429, '2', '0'],
        [429, '2', '0'],
        [429, '2', '0'],
      ]);
      // The account counted the two admitted public requests only: two left for the server key.
      const server = [];
      for (let i = 0; i < 3; i++) {
        const r = await t.request('GET', '/v1/documents', { key });
        server.push([r.status, r.headers.get('x-ratelimit-limit'), r.headers.get('x-ratelimit-remaining')]);
      }
      assert.deepEqual(server, [
        [200, '4', '1'],
        [200, '4', '0'],
        [429, '4', '0'],
      ]);
    });

    test("a public request the account's own window refuses is a 429 whose headers still describe the public budget", async () => {
      const { accountId, key } = await t.account({ minute: 4, day: 1000 });
      const pk = await publicKey(accountId);
      for (let i = 0; i < 3; i++) assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      // Public budget 2, account 1 left: the public request sees the account's remainder.
      const first = await chat(pk);
      assert.equal(first.status, 404);
      assert.equal(first.headers.get('x-ratelimit-limit'), '2');
      assert.equal(first.headers.get('x-ratelimit-remaining'), '0');
      const refused = await chat(pk);
      assert.equal(refused.status, 429);
      assert.match(refused.body.error.message, /^rate limit of 4 requests per minute exceeded$/);
      assert.equal(refused.headers.get('x-ratelimit-limit'), '2');
      assert.equal(refused.headers.get('x-ratelimit-remaining'), '0');
      assert.ok(Number(refused.headers.get('retry-after')) >= 1);
    });

    test('the day window is shared out the same way', async () => {
      const { accountId, key } = await t.account({ minute: 100, day: 5 });
      const pk = await publicKey(accountId);
      const statuses = [];
      for (let i = 0; i < 3; i++) statuses.push((await chat(pk)).status);
      assert.deepEqual(statuses, [404, 404, 429]);
      const last = await chat(pk);
      assert.match(last.body.error.message, /public-key rate limit of 2 requests per day exceeded/);
      assert.ok(Number(last.headers.get('retry-after')) > 60);
      for (let i = 0; i < 3; i++) assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 429);
    });

    test('server keys are not limited by the public budget', async () => {
      const { key } = await t.account({ minute: 4, day: 1000 });
      const statuses = [];
      for (let i = 0; i < 5; i++) statuses.push((await t.request('GET', '/v1/documents', { key })).status);
      assert.deepEqual(statuses, [200, 200, 200, 200, 429]);
    });
  });
}

describe('rate limits with Redis', () => {
  const keyPrefix = `test:rl:${randomBytes(4).toString('hex')}`;
  const t = useTestApp('sqlite', { redisUrl: REDIS_URL, keyPrefix });
  let redis: Redis;
  before(() => {
    redis = new Redis(REDIS_URL);
  });
  // Runs once the app has closed, so no counter is written after the sweep.
  after(async () => {
    const keys = await redis.keys(`${keyPrefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
  });

  test('day used up, then the minute too: Retry-After still points at the day (counters in Redis)', async () => {
    // Until connected, the node answers from its in-memory insurance limiter.
    await t.limiter.ready();
    await dayUsedUpThenMinute(t);
  });

  test('counters live in Redis: two API nodes with the same keyPrefix share one quota', async () => {
    // A second node: same database, its own limiter and Redis connection, its own HTTP server.
    const limiter2 = createRateLimiter({ redisUrl: REDIS_URL, keyPrefix });
    const app2 = await buildApp(t.ctx, { limiter: limiter2 });
    await app2.listen({ port: 0, host: '127.0.0.1' });
    try {
      // Until a node has connected it answers from its in-memory insurance limiter, which would not share.
      await Promise.all([t.limiter.ready(), limiter2.ready()]);
      const base2 = `http://127.0.0.1:${(app2.server.address() as AddressInfo).port}`;
      const { accountId, key } = await t.account({ minute: 4, day: 1000 });
      const call = async (node: 1 | 2) => {
        if (node === 1) return t.request('GET', '/v1/documents', { key });
        const res = await fetch(`${base2}/v1/documents`, { headers: { authorization: `Bearer ${key}` } });
        await res.arrayBuffer();
        return { status: res.status, headers: res.headers };
      };
      const results = [];
      for (const node of [1, 2, 1, 2, 1, 2] as const) {
        const r = await call(node);
        results.push([r.status, r.headers.get('x-ratelimit-remaining')]);
      }
      assert.deepEqual(results, [
        [200, '3'],
        [200, '2'],
        [200, '1'],
        [200, '0'],
        [429, '0'],
        [429, '0'],
      ]);
      const stored = await redis.keys(`${keyPrefix}*${accountId}`);
      assert.ok(stored.length >= 1, 'the counter is a Redis key');
    } finally {
      await app2.close();
      await limiter2.close();
    }
  });

  test('Redis that stops answering (frozen, partitioned): requests fall back to this node within a moment, and the operator is told', async () => {
    // A relay to the real Redis that can stop passing bytes: the connection stays open, nothing answers.
    const relay = await createFreezableRelay({ host: new URL(REDIS_URL).hostname, port: Number(new URL(REDIS_URL).port || 6379) });
    const warnings: string[] = [];
    const log = { info() {}, error() {}, warn: (_o: object, msg?: string) => void warnings.push(msg ?? '') };
    const url = `redis://127.0.0.1:${relay.port}`;
    const node = await createTestApp('sqlite', { redisUrl: url, keyPrefix: `${keyPrefix}:frozen`, log });
    try {
      await node.limiter.ready();
      const { key } = await node.account({ minute: 3, day: 1000 });
      const a = await node.request('GET', '/v1/documents', { key });
      assert.equal(a.headers.get('x-ratelimit-remaining'), '2');
      relay.freeze(true);
      const started = Date.now();
      const b = await node.request('GET', '/v1/documents', { key });
      assert.equal(b.status, 200);
      assert.ok(Date.now() - started < 3_000, `answered after ${Date.now() - started} ms`);
      assert.equal(b.headers.get('x-ratelimit-limit'), '3');
      assert.ok(warnings.some((w) => /Redis unavailable/.test(w)), `warned: ${JSON.stringify(warnings)}`);
      // Still limited while Redis is away, by this node's counters.
      await node.request('GET', '/v1/documents', { key });
      await node.request('GET', '/v1/documents', { key });
      assert.equal((await node.request('GET', '/v1/documents', { key })).status, 429);
    } finally {
      relay.freeze(false);
      await node.close();
      await relay.close();
    }
  });

  test('after Redis stalls, the node stops asking it for a pause (no request waits for it), then one request finds it back', async () => {
    const relay = await createFreezableRelay({ host: new URL(REDIS_URL).hostname, port: Number(new URL(REDIS_URL).port || 6379) });
    const logged: string[] = [];
    const log = { error() {}, warn: (_o: object, msg?: string) => void logged.push(`warn ${msg}`), info: (_o: object, msg?: string) => void logged.push(`info ${msg}`) };
    let now = Date.now();
    const node = await createTestApp('sqlite', {
      redisUrl: `redis://127.0.0.1:${relay.port}`,
      keyPrefix: `${keyPrefix}:stalled`,
      log,
      limiter: { now: () => now, pauseMs: { first: 10_000, max: 40_000 } },
    });
    try {
      await node.limiter.ready();
      const { key } = await node.account({ minute: 100, day: 1000 });
      const get = () => node.request('GET', '/v1/documents', { key });
      assert.equal((await get()).headers.get('x-ratelimit-remaining'), '99');
      relay.freeze(true);
      // The first request waits for the command timeout, then is counted here; the pause starts.
      assert.equal((await get()).status, 200);
      const asked = relay.held;
      assert.ok(asked >= 1, 'it asked the stalled Redis');
      assert.ok(logged.some((l) => /^warn Redis unavailable/.test(l)), JSON.stringify(logged));
      // During the pause nothing is sent to Redis: these requests did not wait for it.
      for (let i = 0; i < 5; i++) assert.equal((await get()).status, 200);
      now += 9_000;
      assert.equal((await get()).status, 200);
      assert.equal(relay.held, asked, 'no command sent during the pause');
      // The pause over, one request asks again; Redis still stalled, so the next pause is twice as long.
      now += 2_000;
      assert.equal((await get()).status, 200);
      assert.equal(relay.held, asked + 1, 'one request asked after the pause');
      now += 15_000;
      assert.equal((await get()).status, 200);
      assert.equal(relay.held, asked + 1, 'the second pause is longer (20 s)');
      // Redis answers again: after the pause, one request finds it, and the counters are Redis's again.
      relay.freeze(false);
      now += 6_000;
      const back = await get();
      assert.equal(back.status, 200);
      assert.ok(logged.some((l) => l === 'info Redis is back: rate limits are shared again'), JSON.stringify(logged));
      // Redis's count, not this node's: here 9 requests were counted meanwhile (91 left); Redis got the first, the
      // two held commands once they passed, and this one.
      const remaining = Number(back.headers.get('x-ratelimit-remaining'));
      assert.ok(remaining >= 95 && remaining <= 97, String(remaining));
      assert.equal(Number((await get()).headers.get('x-ratelimit-remaining')), remaining - 1);
    } finally {
      relay.freeze(false);
      await node.close();
      await relay.close();
    }
  });

  test("REDIS_KEY_PREFIX names the counters' keys, so two deployments can share one Redis", async () => {
    const prefix = `${keyPrefix}:own`;
    const config = { ...t.ctx.config, ...loadConfig({ REDIS_URL, REDIS_KEY_PREFIX: prefix }) };
    // The app makes its limiter from the configuration (no limiter handed in).
    const app2 = await buildApp({ ...t.ctx, config, limiter: undefined });
    await app2.listen({ port: 0, host: '127.0.0.1' });
    try {
      const { accountId, key } = await t.account({ minute: 50, day: 1000 });
      const base2 = `http://127.0.0.1:${(app2.server.address() as AddressInfo).port}`;
      // Until its limiter has connected, the node counts in memory: ask until a counter shows up in Redis.
      let stored: string[] = [];
      for (let i = 0; i < 40 && stored.length === 0; i++) {
        const res = await fetch(`${base2}/v1/documents`, { headers: { authorization: `Bearer ${key}` } });
        assert.equal(res.status, 200);
        await res.arrayBuffer();
        stored = await redis.keys(`${prefix}:*${accountId}`);
        if (stored.length === 0) await new Promise((r) => setTimeout(r, 25));
      }
      assert.ok(stored.length >= 1, 'the counter is kept under REDIS_KEY_PREFIX');
      assert.deepEqual(await redis.keys(`parley:rl:*${accountId}`), [], 'nothing under the default prefix');
    } finally {
      await app2.close();
    }
  });

  test('PUBLIC_KEY_RATE_SHARE with Redis: the public budget is kept in Redis too, so every node shares it', async () => {
    const nodes = [0, 1].map(() => createRateLimiter({ redisUrl: REDIS_URL, keyPrefix, publicSharePercent: 50 }));
    try {
      await Promise.all(nodes.map((n) => n.ready()));
      const accountId = `acct_pub${randomBytes(4).toString('hex')}`;
      const auth = (keyType: 'server' | 'public') => ({ accountId, plan: 'enterprise' as const, limits: { minute: 6, day: 1000 }, keyId: 'key_x', keyType, scopes: new Set<string>() });
      const take = async (node: number, keyType: 'server' | 'public') => {
        try {
          return (await nodes[node]!.consume(auth(keyType))).headers['x-ratelimit-remaining'];
        } catch (err) {
          return (err as { code: string }).code;
        }
      };
      const seen = [await take(0, 'public'), await take(1, 'public'), await take(0, 'public'), await take(1, 'public')];
      assert.deepEqual(seen, ['2', '1', '0', 'RATE_LIMITED']);
      // Three public requests counted in the account's window of 6: three left for server keys, on either node.
      assert.deepEqual([await take(1, 'server'), await take(0, 'server'), await take(1, 'server'), await take(0, 'server')], ['2', '1', '0', 'RATE_LIMITED']);
      assert.ok((await redis.keys(`${keyPrefix}:minute*public:${accountId}`)).length === 1, 'the public budget is a Redis key');
    } finally {
      await Promise.all(nodes.map((n) => n.close()));
    }
  });

  test('a client allowance, the public share and the account, in that order, through Redis on two nodes', async () => {
    const nodes = [0, 1].map(() => createRateLimiter({ redisUrl: REDIS_URL, keyPrefix, publicSharePercent: 50, publicPerClient: 2 }));
    try {
      await Promise.all(nodes.map((n) => n.ready()));
      const accountId = `acct_chain${randomBytes(4).toString('hex')}`;
      const auth = (keyType: 'server' | 'public') => ({ accountId, plan: 'enterprise' as const, limits: { minute: 6, day: 1000 }, keyId: 'key_x', keyType, scopes: new Set<string>() });
      const take = async (node: number, keyType: 'server' | 'public', client?: string) => {
        try {
          const o = await nodes[node]!.consume(auth(keyType), client);
          return `${o.headers['x-ratelimit-limit']}/${o.headers['x-ratelimit-remaining']}`;
        } catch (err) {
          return (err as Error).message;
        }
      };
      assert.deepEqual(
        [await take(0, 'public', '203.0.113.1'), await take(1, 'public', '203.0.113.1'), await take(0, 'public', '203.0.113.1')],
        ['2/1', '2/0', 'rate limit of 2 requests per minute exceeded for one client of public keys'],
      );
      // Another client: its own allowance, but the public share (3 of 6) has one left.
      assert.deepEqual([await take(1, 'public', '203.0.113.2'), await take(0, 'public', '203.0.113.2')], ['2/0', 'public-key rate limit of 3 requests per minute exceeded (public keys may use 50% of the account\'s 6 per minute and 1000 per day)']);
      assert.deepEqual([await take(0, 'server'), await take(1, 'server'), await take(0, 'server'), await take(1, 'server')], ['6/2', '6/1', '6/0', 'rate limit of 6 requests per minute exceeded']);
      // A client allowance is a minute window only: no day counter (one Redis round trip per request) is kept for it.
      assert.equal((await redis.keys(`${keyPrefix}:minute*client:${accountId}:*`)).length, 2);
      assert.deepEqual(await redis.keys(`${keyPrefix}:day*client:${accountId}:*`), []);
    } finally {
      await Promise.all(nodes.map((n) => n.close()));
    }
  });

  test('counters are the keys and windows the earlier versions used, so nodes of both share them during an upgrade', async () => {
    const node = createRateLimiter({ redisUrl: REDIS_URL, keyPrefix });
    try {
      await node.ready();
      const accountId = `acct_keys${randomBytes(4).toString('hex')}`;
      // As an earlier version's node left them (rate-limiter-flexible: "<prefix>:<window>:<key>", a count with an expiry).
      await redis.set(`${keyPrefix}:minute:${accountId}`, 3, 'EX', 60);
      await redis.set(`${keyPrefix}:day:${accountId}`, 7, 'EX', 86_400);
      const o = await node.consume({ accountId, plan: 'enterprise', limits: { minute: 10, day: 100 }, keyId: 'key_x', keyType: 'server', scopes: new Set<string>() });
      assert.equal(o.headers['x-ratelimit-remaining'], '6');
      assert.equal(await redis.get(`${keyPrefix}:minute:${accountId}`), '4');
      assert.equal(await redis.get(`${keyPrefix}:day:${accountId}`), '8');
      // A new window starts with the first request and lasts the window.
      const fresh = `acct_fresh${randomBytes(4).toString('hex')}`;
      await node.consume({ accountId: fresh, plan: 'enterprise', limits: { minute: 10, day: 100 }, keyId: 'key_x', keyType: 'server', scopes: new Set<string>() });
      const [minuteTtl, dayTtl] = [await redis.pttl(`${keyPrefix}:minute:${fresh}`), await redis.pttl(`${keyPrefix}:day:${fresh}`)];
      assert.ok(minuteTtl > 55_000 && minuteTtl <= 60_000, String(minuteTtl));
      assert.ok(dayTtl > 86_395_000 && dayTtl <= 86_400_000, String(dayTtl));
    } finally {
      await node.close();
    }
  });

  test("X-RateLimit-Reset is the same second on every node, whatever each node's clock says", async () => {
    // Two nodes whose clocks are 3 s apart (and both wrong): the window's end is Redis's.
    const nodes = [-4_000, -1_000].map((skew) => createRateLimiter({ redisUrl: REDIS_URL, keyPrefix, now: () => Date.now() + skew }));
    try {
      await Promise.all(nodes.map((n) => n.ready()));
      const accountId = `acct_reset${randomBytes(4).toString('hex')}`;
      const auth = { accountId, plan: 'enterprise' as const, limits: { minute: 10, day: 100 }, keyId: 'key_x', keyType: 'server' as const, scopes: new Set<string>() };
      const resets = [];
      for (const n of [...nodes, ...nodes]) resets.push((await n.consume(auth)).headers['x-ratelimit-reset']);
      assert.equal(new Set(resets).size, 1, resets.join(', '));
      const redisNow = Number((await redis.time())[0]);
      const reset = Number(resets[0]);
      assert.ok(reset > redisNow && reset <= redisNow + 61, `${reset} vs Redis ${redisNow}`);
    } finally {
      await Promise.all(nodes.map((n) => n.close()));
    }
  });

  test("Redis unreachable: requests are still served and limited by this node's counters", async () => {
    const down = await createTestApp('sqlite', { redisUrl: 'redis://127.0.0.1:1', keyPrefix: `${keyPrefix}:down` });
    try {
      const { key } = await down.account({ minute: 2, day: 1000 });
      const a = await down.request('GET', '/v1/documents', { key });
      assert.equal(a.status, 200);
      assert.equal(a.headers.get('x-ratelimit-limit'), '2');
      assert.equal(a.headers.get('x-ratelimit-remaining'), '1');
      assert.equal((await down.request('GET', '/v1/documents', { key })).status, 200);
      assert.equal((await down.request('GET', '/v1/documents', { key })).status, 429);
    } finally {
      await down.close();
    }
  });
});
