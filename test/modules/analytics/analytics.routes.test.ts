import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { DAY, HOUR, insertConversation, iso, MIN, seedScenario, T0 } from '../conversations/fixtures.js';

const DAY_RANGE = `from=${iso(T0)}&to=${iso(T0 + DAY)}`;

for (const dialect of DIALECTS) {
  describe(`analytics API (${dialect})`, () => {
    let t: TestApp;
    let a: { accountId: string; key: string };
    let b: { accountId: string; key: string };

    before(async () => {
      t = await createTestApp(dialect);
      a = await t.account();
      b = await t.account();
      await seedScenario(t.ctx.db, a.accountId, b.accountId);
    });
    after(() => t.close());

    const get = async (path: string, key = a.key) => {
      const r = await t.request('GET', path, { key });
      assert.equal(r.status, 200, r.text);
      return r.body.data;
    };

    test('overview over one day matches the hand-computed figures', async () => {
      const d = await get(`/v1/analytics/overview?${DAY_RANGE}`);
      assert.deepEqual(Object.keys(d).sort(), ['averageMessages', 'conversations', 'escalationRate', 'messages', 'resolutionRate']);
      assert.equal(d.conversations, 5);
      assert.equal(d.messages, 22);
      assert.equal(d.resolutionRate, 1 / 3); // c1 resolved of c1, c2, c4 ended; unrounded
      assert.equal(d.escalationRate, 2 / 5); // c2 (ended) and c3 (still open) were escalated
      assert.equal(d.averageMessages, 22 / 5);
    });

    test('overview without a range covers all time; another account is never counted', async () => {
      const d = await get('/v1/analytics/overview');
      assert.deepEqual(d, { conversations: 7, messages: 38, resolutionRate: 3 / 5, escalationRate: 2 / 7, averageMessages: 38 / 7 });
      const other = await get('/v1/analytics/overview', b.key);
      assert.deepEqual(other, { conversations: 1, messages: 100, resolutionRate: 1, escalationRate: 0, averageMessages: 100 });
    });

    test('range edges: from inclusive, to exclusive', async () => {
      const justBefore = await get(`/v1/analytics/overview?from=${iso(T0 - 1)}&to=${iso(T0)}`);
      assert.deepEqual(justBefore, { conversations: 1, messages: 10, resolutionRate: 1, escalationRate: 0, averageMessages: 10 });
      const atEnd = await get(`/v1/analytics/overview?from=${iso(T0 + DAY)}&to=${iso(T0 + DAY + 1)}`);
      assert.equal(atEnd.conversations, 1);
      assert.equal(atEnd.messages, 6);
      const firstMs = await get(`/v1/analytics/overview?from=${iso(T0)}&to=${iso(T0 + 1)}`);
      assert.equal(firstMs.conversations, 1);
      assert.equal(firstMs.messages, 5);
    });

    test('empty range: every figure is 0, never NaN or null', async () => {
      const d = await get('/v1/analytics/overview?from=2025-01-01&to=2025-02-01');
      assert.deepEqual(d, { conversations: 0, messages: 0, resolutionRate: 0, escalationRate: 0, averageMessages: 0 });
      const fresh = await t.account();
      assert.deepEqual(await get('/v1/analytics/overview', fresh.key), d);
      assert.deepEqual(await get('/v1/analytics/topics', fresh.key), { topics: [] });
    });

    test('resolution rate is 0 when conversations exist but none has ended', async () => {
      const c = await t.account();
      await insertConversation(t.ctx.db, c.accountId, { created_at: T0, status: 'active', message_count: 3 });
      await insertConversation(t.ctx.db, c.accountId, { created_at: T0 + 1, status: 'escalated', escalated_at: T0 + 2, message_count: 4 });
      const d = await get('/v1/analytics/overview', c.key);
      assert.deepEqual(d, { conversations: 2, messages: 7, resolutionRate: 0, escalationRate: 0.5, averageMessages: 3.5 });
    });

    test('topics: count desc then name, percentage of all conversations in range, null topics not listed', async () => {
      const day = await get(`/v1/analytics/topics?${DAY_RANGE}`);
      assert.deepEqual(day, {
        topics: [
          { name: 'billing', count: 2, percentage: 2 / 5 },
          { name: 'shipping', count: 1, percentage: 1 / 5 },
        ],
      });
      const all = await get('/v1/analytics/topics');
      assert.deepEqual(all.topics, [
        { name: 'billing', count: 2, percentage: 2 / 7 },
        { name: 'shipping', count: 2, percentage: 2 / 7 },
        { name: 'returns', count: 1, percentage: 1 / 7 },
      ]);
      const top1 = await get('/v1/analytics/topics?limit=1');
      assert.deepEqual(top1.topics.map((x: any) => x.name), ['billing']);
      const none = await get('/v1/analytics/topics?from=2025-01-01&to=2025-02-01');
      assert.deepEqual(none, { topics: [] });
      const other = await get('/v1/analytics/topics', b.key);
      assert.deepEqual(other.topics, [{ name: 'billing', count: 1, percentage: 1 }]);
    });

    test('topics: ties ordered by code point on both dialects; limit defaults to 10', async () => {
      const c = await t.account();
      const names = ['b', 'B', 'a', 'A', '_x', 'é', 'z1', 'z10', 'z2', 'Zed', 'apple', 'Apple'];
      let i = 0;
      for (const name of names) await insertConversation(t.ctx.db, c.accountId, { created_at: T0 + i++, topic: name });
      await insertConversation(t.ctx.db, c.accountId, { created_at: T0 + i++, topic: 'zz' });
      await insertConversation(t.ctx.db, c.accountId, { created_at: T0 + i++, topic: 'zz' });
      const d = await get('/v1/analytics/topics?limit=100', c.key);
      const codePoint = [...names].sort((x, y) => (x < y ? -1 : x > y ? 1 : 0));
      assert.deepEqual(d.topics.map((x: any) => x.name), ['zz', ...codePoint]);
      assert.equal(d.topics[0].percentage, 2 / 14);
      const dflt = await get('/v1/analytics/topics', c.key);
      assert.equal(dflt.topics.length, 10);
    });

    test('every overview and topics figure is reproducible from the list endpoint with the same range', async () => {
      const c = await t.account();
      // A varied data set: statuses, outcomes, escalations, topics and counts drawn from a fixed sequence.
      let seed = 7;
      const rnd = (n: number) => {
        seed = (seed * 1103515245 + 12345) % 2 ** 31;
        return seed % n;
      };
      for (let i = 0; i < 137; i++) {
        const created = T0 + rnd(10) * DAY + rnd(24) * HOUR + rnd(60) * MIN;
        const kind = rnd(5);
        const topic = ['billing', 'shipping', 'returns', null][rnd(4)] ?? null;
        const base = { created_at: created, message_count: 1 + rnd(15), topic, customer_id: `cust_${rnd(9)}` };
        if (kind === 0) await insertConversation(t.ctx.db, c.accountId, { ...base, status: 'active' });
        else if (kind === 1) await insertConversation(t.ctx.db, c.accountId, { ...base, status: 'escalated', escalated_at: created + MIN });
        else if (kind === 2)
          await insertConversation(t.ctx.db, c.accountId, { ...base, status: 'escalated', outcome: 'escalated', escalated_at: created + MIN, ended_at: created + HOUR });
        else await insertConversation(t.ctx.db, c.accountId, { ...base, status: 'ended', outcome: kind === 3 ? 'resolved' : 'unresolved', ended_at: created + HOUR });
      }
      for (const range of ['', `from=${iso(T0 + 2 * DAY)}&to=${iso(T0 + 5 * DAY)}`, `from=${iso(T0 + 3 * DAY + 7 * HOUR)}`, `to=${iso(T0 + DAY)}`]) {
        const items: any[] = [];
        let total = -1;
        for (let offset = 0; total < 0 || offset < total; offset += 100) {
          const page = await get(`/v1/conversations?limit=100&offset=${offset}${range ? `&${range}` : ''}`, c.key);
          total = page.total;
          items.push(...page.conversations);
        }
        assert.equal(items.length, total);
        const ended = items.filter((x) => x.endedAt !== null);
        const messages = items.reduce((s, x) => s + x.messageCount, 0);
        const expected = {
          conversations: items.length,
          messages,
          resolutionRate: ended.length ? ended.filter((x) => x.outcome === 'resolved').length / ended.length : 0,
          escalationRate: items.length ? items.filter((x) => x.status === 'escalated').length / items.length : 0,
          averageMessages: items.length ? messages / items.length : 0,
        };
        const overview = await get(`/v1/analytics/overview${range ? `?${range}` : ''}`, c.key);
        assert.deepEqual(overview, expected, range);
        assert.ok(expected.conversations > 0 && expected.resolutionRate > 0 && expected.escalationRate > 0, 'the range is not trivially empty');

        const counts = new Map<string, number>();
        for (const x of items) if (x.topic !== null) counts.set(x.topic, (counts.get(x.topic) ?? 0) + 1);
        const topics = [...counts]
          .sort((p, q) => q[1] - p[1] || (p[0] < q[0] ? -1 : 1))
          .map(([name, count]) => ({ name, count, percentage: count / items.length }));
        assert.deepEqual(await get(`/v1/analytics/topics${range ? `?${range}` : ''}`, c.key), { topics }, range);
      }
    });

    test('query validation answers 400 naming the field', async () => {
      for (const [path, re] of [
        ['/v1/analytics/overview?from=not-a-date', /query\.from must be an ISO 8601/],
        ['/v1/analytics/overview?to=2026-02-29', /query\.to must be an ISO 8601/],
        ['/v1/analytics/overview?from=2026-03-02&to=2026-03-01', /query\.from must be earlier than query\.to/],
        ['/v1/analytics/overview?limit=5', /query\.limit is not a known field/],
        ['/v1/analytics/topics?limit=0', /query\.limit must be at least 1/],
        ['/v1/analytics/topics?limit=101', /query\.limit must be at most 100/],
        ['/v1/analytics/topics?limit=1.5', /query\.limit must be an integer/],
        ['/v1/analytics/topics?to=soon', /query\.to must be an ISO 8601/],
      ] as const) {
        const r = await t.request('GET', path, { key: a.key });
        assert.equal(r.status, 400, path);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re, path);
      }
    });

    test('scopes: analytics:read is required', async () => {
      const k = await t.account({ scopes: ['conversations:read'] });
      for (const path of ['/v1/analytics/overview', '/v1/analytics/topics']) {
        const r = await t.request('GET', path, { key: k.key });
        assert.equal(r.status, 403, path);
        assert.equal(r.body.error.code, 'FORBIDDEN');
      }
    });
  });
}
