import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { newId } from '../../../src/lib/ids.js';
import { DIALECTS } from '../../helpers/db.js';
import { DAY, HOUR, insertConversation, insertMessage, iso, MIN, seedScenario, T0 } from './fixtures.js';

const DAY_RANGE = `from=${iso(T0)}&to=${iso(T0 + DAY)}`;

for (const dialect of DIALECTS) {
  describe(`conversations API (${dialect})`, () => {
    let t: TestApp;
    let a: { accountId: string; key: string };
    let b: { accountId: string; key: string };
    let ids: Awaited<ReturnType<typeof seedScenario>>;

    before(async () => {
      t = await createTestApp(dialect);
      a = await t.account();
      b = await t.account();
      ids = await seedScenario(t.ctx.db, a.accountId, b.accountId);
    });
    after(() => t.close());

    const list = async (query: string, key = a.key) => {
      const r = await t.request('GET', `/v1/conversations${query ? `?${query}` : ''}`, { key });
      assert.equal(r.status, 200, r.text);
      return r.body.data as { conversations: any[]; total: number; limit: number; offset: number };
    };

    test('list items have the contract fields (plus outcome and topic), newest first', async () => {
      const d = await list('');
      assert.equal(d.total, 7);
      assert.equal(d.limit, 20);
      assert.equal(d.offset, 0);
      assert.deepEqual(
        d.conversations.map((c) => c.id),
        [ids.c6, ids.c5, ids.c4, ids.c3, ids.c2, ids.c1, ids.c0],
      );
      const c1 = d.conversations.find((c) => c.id === ids.c1);
      assert.deepEqual(c1, {
        id: ids.c1,
        customerId: 'cust_1',
        status: 'ended',
        tags: ['vip', 'card'],
        messageCount: 5,
        createdAt: '2026-03-01T00:00:00.000Z',
        endedAt: '2026-03-01T00:10:00.000Z',
        outcome: 'resolved',
        topic: 'billing',
      });
      const c5 = d.conversations.find((c) => c.id === ids.c5);
      assert.equal(c5.endedAt, null, 'endedAt is null while active');
      assert.equal(c5.outcome, null);
      assert.deepEqual(c5.tags, []);
      const c3 = d.conversations.find((c) => c.id === ids.c3);
      assert.equal(c3.status, 'escalated');
      assert.equal(c3.endedAt, null, 'escalated but not ended');
    });

    test('from is inclusive, to is exclusive, to the millisecond', async () => {
      const day = await list(DAY_RANGE);
      assert.deepEqual(day.conversations.map((c) => c.id), [ids.c5, ids.c4, ids.c3, ids.c2, ids.c1]);
      assert.equal(day.total, 5);
      const fromOnly = await list(`from=${iso(T0 + DAY)}`);
      assert.deepEqual(fromOnly.conversations.map((c) => c.id), [ids.c6]);
      const toOnly = await list(`to=${iso(T0)}`);
      assert.deepEqual(toOnly.conversations.map((c) => c.id), [ids.c0]);
      const oneMs = await list(`from=${iso(T0 - 1)}&to=${iso(T0)}`);
      assert.deepEqual(oneMs.conversations.map((c) => c.id), [ids.c0]);
      // Date-only and offset forms name the same instants.
      const dateOnly = await list('from=2026-03-01&to=2026-03-02');
      assert.deepEqual(dateOnly.conversations.map((c) => c.id), day.conversations.map((c) => c.id));
      const offset = await list(`from=${encodeURIComponent('2026-03-01T01:00:00+01:00')}&to=${encodeURIComponent('2026-03-01T19:00:00-05:00')}`);
      assert.equal(offset.total, 5);
      // An unencoded "+" arrives as a space and still means a positive offset.
      const plus = await list('from=2026-03-01T01:00:00+01:00&to=2026-03-02T01:00:00+01:00');
      assert.equal(plus.total, 5);
      // A sub-millisecond bound: 00:00:00.0000001 is after T0, so c1 (at T0 exactly) is excluded.
      const fine = await list(`from=2026-03-01T00:00:00.0000001Z&to=${iso(T0 + DAY)}`);
      assert.deepEqual(fine.conversations.map((c) => c.id), [ids.c5, ids.c4, ids.c3, ids.c2]);
    });

    test('each status filter', async () => {
      const by = async (status: string) => (await list(`status=${status}&${DAY_RANGE}`)).conversations.map((c) => c.id);
      assert.deepEqual(await by('active'), [ids.c5]);
      assert.deepEqual(await by('ended'), [ids.c4, ids.c1]);
      assert.deepEqual(await by('escalated'), [ids.c3, ids.c2], 'escalated includes escalated-and-ended');
      assert.deepEqual(await by('all'), [ids.c5, ids.c4, ids.c3, ids.c2, ids.c1]);
      const ended = await list('status=ended');
      assert.equal(ended.total, 4);
      assert.ok(ended.conversations.every((c) => c.status === 'ended'));
    });

    test('customerId filter, alone and combined', async () => {
      assert.deepEqual((await list('customerId=cust_1')).conversations.map((c) => c.id), [ids.c5, ids.c3, ids.c1]);
      assert.deepEqual((await list('customerId=cust_1&status=escalated')).conversations.map((c) => c.id), [ids.c3]);
      assert.deepEqual((await list(`customerId=cust_2&${DAY_RANGE}`)).conversations.map((c) => c.id), [ids.c2]);
      const none = await list('customerId=nobody');
      assert.equal(none.total, 0);
      assert.deepEqual(none.conversations, []);
    });

    test('pagination: no overlap, no gap, ties on createdAt broken by id', async () => {
      const p = await t.account();
      // Groups of three share a millisecond; rows are inserted in shuffled order so only the ORDER BY
      // (created_at desc, id desc) can produce the expected sequence. Ids order only by millisecond (their random
      // part is fresh), so within a group the id decides, not creation order.
      const rows = Array.from({ length: 23 }, (_, i) => ({ created_at: T0 + Math.floor(i / 3) * MIN, id: newId('conv', T0 + Math.floor(i / 3) * MIN) }));
      const expected = rows.map((r) => r.id).sort().reverse();
      for (const r of [...rows].sort(() => Math.random() - 0.5)) await insertConversation(t.ctx.db, p.accountId, r);
      const seen: string[] = [];
      for (let offset = 0; offset < 30; offset += 5) {
        const d = await list(`limit=5&offset=${offset}`, p.key);
        assert.equal(d.total, 23);
        assert.equal(d.limit, 5);
        assert.equal(d.offset, offset);
        seen.push(...d.conversations.map((c) => c.id));
      }
      assert.equal(new Set(seen).size, 23);
      assert.deepEqual(seen, expected);
      const beyond = await list('offset=500', p.key);
      assert.deepEqual(beyond.conversations, []);
      assert.equal(beyond.total, 23);
      const max = await list('limit=100', p.key);
      assert.equal(max.conversations.length, 23);
    });

    test('get answers the spec Conversation with ordered messages and sources on assistant messages only', async () => {
      const c = ids.c2;
      // Inserted out of order; two share a millisecond, so their position in the conversation (seq) decides:
      // m2b is inserted first, with an id that sorts first too, and still comes second.
      const m3 = await insertMessage(t.ctx.db, a.accountId, c, { created_at: T0 + HOUR + 2 * MIN, seq: 4, role: 'assistant', content: 'Refunds take 5 days.', sources: JSON.stringify(['doc_1', 'faq_2']) });
      const m1 = await insertMessage(t.ctx.db, a.accountId, c, { created_at: T0 + HOUR, seq: 1, role: 'assistant', content: 'Hi! How can I help?' });
      const m2b = await insertMessage(t.ctx.db, a.accountId, c, { id: 'msg_00000000000000000000000000', created_at: T0 + HOUR + MIN, seq: 3, role: 'customer', content: 'Order 42.' });
      const m2a = await insertMessage(t.ctx.db, a.accountId, c, { id: 'msg_zzzzzzzzzzzzzzzzzzzzzzzzzz', created_at: T0 + HOUR + MIN, seq: 2, role: 'customer', content: 'Where is my refund?' });
      const m4 = await insertMessage(t.ctx.db, a.accountId, c, { created_at: T0 + HOUR + 3 * MIN, seq: 5, role: 'assistant', content: 'Nothing found.', sources: '[]' });
      const r = await t.request('GET', `/v1/conversations/${c}`, { key: a.key });
      assert.equal(r.status, 200);
      const d = r.body.data;
      for (const k of ['id', 'customerId', 'status', 'messages', 'tags', 'createdAt', 'endedAt']) assert.ok(k in d, `spec field ${k}`);
      assert.equal(d.id, c);
      assert.equal(d.customerId, 'cust_2');
      assert.equal(d.status, 'escalated');
      assert.deepEqual(d.tags, []);
      assert.equal(d.createdAt, iso(T0 + HOUR));
      assert.equal(d.endedAt, iso(T0 + 2 * HOUR));
      assert.deepEqual(d.messages, [
        { id: m1, role: 'assistant', content: 'Hi! How can I help?', timestamp: iso(T0 + HOUR) },
        { id: m2a, role: 'customer', content: 'Where is my refund?', timestamp: iso(T0 + HOUR + MIN) },
        { id: m2b, role: 'customer', content: 'Order 42.', timestamp: iso(T0 + HOUR + MIN) },
        { id: m3, role: 'assistant', content: 'Refunds take 5 days.', timestamp: iso(T0 + HOUR + 2 * MIN), sources: ['doc_1', 'faq_2'] },
        { id: m4, role: 'assistant', content: 'Nothing found.', timestamp: iso(T0 + HOUR + 3 * MIN), sources: [] },
      ]);
      assert.equal(d.customerLabel, 'Ada');
      assert.equal(d.customerEmail, 'ada@example.com');
      assert.equal(d.persona, 'friendly');
      assert.deepEqual(d.metadata, { plan: 'gold', seats: 3 });
      assert.equal(d.outcome, 'escalated');
      assert.equal(d.escalationReason, 'customer_request');
      assert.equal(d.escalatedAt, iso(T0 + HOUR + 5 * MIN));
      assert.equal(d.topic, 'billing');
      assert.equal(d.messageCount, 8);
      assert.equal(d.lastMessageAt, iso(T0 + HOUR + 4 * MIN));
    });

    test('get of an active conversation: endedAt, outcome and escalation fields are null', async () => {
      const r = await t.request('GET', `/v1/conversations/${ids.c5}`, { key: a.key });
      assert.equal(r.status, 200);
      assert.equal(r.body.data.endedAt, null);
      assert.equal(r.body.data.outcome, null);
      assert.equal(r.body.data.escalatedAt, null);
      assert.equal(r.body.data.escalationReason, null);
      assert.deepEqual(r.body.data.messages, []);
      assert.deepEqual(r.body.data.metadata, {});
    });

    test('tenant isolation: another account’s conversation is 404 and never listed', async () => {
      const r = await t.request('GET', `/v1/conversations/${ids.other}`, { key: a.key });
      assert.equal(r.status, 404);
      assert.equal(r.body.error.code, 'NOT_FOUND');
      assert.ok(!r.text.includes('cust_1'));
      const all = await list('limit=100');
      assert.ok(!all.conversations.some((c) => c.id === ids.other));
      const mine = await list('', b.key);
      assert.deepEqual(mine.conversations.map((c) => c.id), [ids.other]);
      const back = await t.request('GET', `/v1/conversations/${ids.c1}`, { key: b.key });
      assert.equal(back.status, 404);
      // A message row pointing at the conversation but owned by another account never leaks into it.
      await insertMessage(t.ctx.db, b.accountId, ids.c4, { created_at: T0 + 3 * HOUR, content: 'not yours' });
      const c4 = await t.request('GET', `/v1/conversations/${ids.c4}`, { key: a.key });
      assert.ok(!c4.text.includes('not yours'));
      const missing = await t.request('GET', '/v1/conversations/conv_nope', { key: a.key });
      assert.equal(missing.status, 404);
    });

    test('query validation answers 400 naming the field', async () => {
      for (const [q, re] of [
        ['from=yesterday', /query\.from must be an ISO 8601/],
        ['from=2026-13-01', /query\.from must be an ISO 8601/],
        ['to=2026-02-30', /query\.to must be an ISO 8601/],
        ['to=2026-03-01T25:00:00Z', /query\.to must be an ISO 8601/],
        ['from=1772323200000', /query\.from must be an ISO 8601/],
        ['from=', /query\.from must be an ISO 8601/],
        ['from=2026-03-02&to=2026-03-01', /query\.from must be earlier than query\.to/],
        ['from=2026-03-01&to=2026-03-01', /query\.from must be earlier than query\.to/],
        // Earlier as written, but within the same millisecond: no stored time is in it, and the message says how they compare.
        ['from=2026-03-01T00:00:00.0001Z&to=2026-03-01T00:00:00.001Z', /^query\.from must be earlier than query\.to, counted in whole milliseconds/],
        ['status=resolved', /query\.status must be one of active, ended, escalated, all/],
        ['limit=0', /query\.limit must be at least 1/],
        ['limit=101', /query\.limit must be at most 100/],
        ['limit=ten', /query\.limit must be an integer/],
        ['offset=-1', /query\.offset must be at least 0/],
        ['customerId=', /query\.customerId must not be empty/],
        ['sort=oldest', /query\.sort is not a known field/],
      ] as const) {
        const r = await t.request('GET', `/v1/conversations?${q}`, { key: a.key });
        assert.equal(r.status, 400, q);
        assert.equal(r.body.success, false);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re, q);
      }
    });

    test('scopes: conversations:read is required; no key is 401', async () => {
      const k = await t.account({ scopes: ['analytics:read'] });
      const r = await t.request('GET', '/v1/conversations', { key: k.key });
      assert.equal(r.status, 403);
      assert.equal(r.body.error.code, 'FORBIDDEN');
      const g = await t.request('GET', `/v1/conversations/${ids.c1}`, { key: k.key });
      assert.equal(g.status, 403);
      const anon = await t.request('GET', '/v1/conversations');
      assert.equal(anon.status, 401);
    });
  });
}
