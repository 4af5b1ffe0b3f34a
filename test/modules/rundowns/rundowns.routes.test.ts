import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FakeClock } from '../../../src/lib/clock.js';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS, insertionOrder } from '../../helpers/db.js';
import { converse, DAY, HOUR, iso, loadKnowledge, T0 } from './helpers.js';

const RANGE = { from: iso(T0), to: iso(T0 + DAY) };

for (const dialect of DIALECTS) {
  describe(`rundowns API (${dialect})`, () => {
    let t: TestApp;
    let clock: FakeClock;
    let a: { accountId: string; key: string };
    let b: { accountId: string; key: string };
    let first: any;

    before(async () => {
      t = await createTestApp(dialect, { fakeClock: true });
      clock = t.clock as FakeClock;
      clock.set(T0 - 2 * DAY);
      a = await t.account();
      b = await t.account();
      await loadKnowledge(t, a.key);
      // Already an FAQ (a draft): never suggested again, whatever its status.
      const draft = await t.request('POST', '/v1/faqs', { key: a.key, body: { question: 'Do you deliver to Mars?', answer: 'Not yet.', category: 'shipping', status: 'draft' } });
      assert.equal(draft.status, 201);

      const answered = await converse(t, a.key, T0 + HOUR, ['How long should I brew green tea?'], { end: true });
      assert.ok(answered.sources[0]!.length > 0, 'precondition: the brewing FAQ answers');
      const c2 = await converse(t, a.key, T0 + 2 * HOUR, ['Do you sell coffee beans?', 'hello'], { end: true });
      const c3 = await converse(t, a.key, T0 + 3 * HOUR, ['do you sell   COFFEE BEANS??', 'I want to speak to a human', 'my email is ada@example.com'], { end: true });
      const c4 = await converse(t, a.key, T0 + 4 * HOUR, ['Do you deliver to Mars?', 'do you deliver to mars'], { end: true });
      const c5 = await converse(t, a.key, T0 + 5 * HOUR, ['Is there a student discount?']);
      for (const c of [c2, c3, c4, c5]) for (const s of c.sources) assert.deepEqual(s, [], 'precondition: nothing cited');
      // Outside [T0, T0 + DAY): not counted (from inclusive, to exclusive).
      await converse(t, a.key, T0 - HOUR, ['Do you sell coffee beans?'], { end: true });
      await converse(t, a.key, T0 + DAY, ['Do you sell coffee beans?'], { end: true });
      // Another account's unanswered questions never show up in a's rundown.
      await converse(t, b.key, T0 + HOUR, ['Do you sell coffee beans?', 'Do you sell coffee beans?'], { end: true });
      clock.set(T0 + 2 * DAY);
    });
    after(() => t.close());

    const count = async (table: 'rundowns' | 'faqs' | 'events') =>
      Number((await t.ctx.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()).n);

    test('POST builds the digest: figures equal the analytics overview, topics equal analytics topics', async () => {
      const r = await t.request('POST', '/v1/rundowns', { key: a.key, body: RANGE });
      assert.equal(r.status, 201, r.text);
      assert.equal(r.body.success, true);
      first = r.body.data;
      assert.match(first.id, /^rd_[0-9a-z]{26}$/);
      assert.equal(first.from, RANGE.from);
      assert.equal(first.to, RANGE.to);
      assert.equal(first.trigger, 'manual');
      assert.equal(first.createdAt, iso(T0 + 2 * DAY));

      const q = `from=${RANGE.from}&to=${RANGE.to}`;
      const overview = (await t.request('GET', `/v1/analytics/overview?${q}`, { key: a.key })).body.data;
      for (const [k, v] of Object.entries(overview)) assert.equal(first.figures[k], v, `figures.${k} = overview.${k}`);
      const topics = (await t.request('GET', `/v1/analytics/topics?${q}`, { key: a.key })).body.data.topics;
      assert.deepEqual(first.topTopics, topics);
      assert.ok(topics.length > 0);

      // Hand-computed: five conversations in range; 1 resolved, 1 unresolved, 2 escalated (one asked for a
      // person, one hit two unanswered questions in a row), one still open.
      assert.deepEqual(first.figures, {
        conversations: 5,
        messages: 3 + 5 + 7 + 5 + 3, // a greeting, then two messages per question
        resolved: 1,
        escalated: 2,
        unresolved: 1,
        resolutionRate: 1 / 4,
        escalationRate: 2 / 5,
        averageMessages: 23 / 5,
        unansweredQuestions: 5,
      });
    });

    test('unanswered questions: grouped by normalised text, most asked first; requests for a person, small talk and contact details left out', async () => {
      assert.deepEqual(first.unanswered, [
        { question: 'do you deliver to mars', count: 2, lastAskedAt: iso(T0 + 4 * HOUR + 2 * 60_000) },
        { question: 'do you sell COFFEE BEANS??', count: 2, lastAskedAt: iso(T0 + 3 * HOUR + 60_000) },
        { question: 'Is there a student discount?', count: 1, lastAskedAt: iso(T0 + 5 * HOUR + 60_000) },
      ]);
    });

    test('suggested FAQs: asked at least twice, filed pending in category suggested, never one that exists already', async () => {
      assert.equal(first.suggestedFaqs.length, 1, JSON.stringify(first.suggestedFaqs));
      const [s] = first.suggestedFaqs;
      assert.equal(s.question, 'do you sell COFFEE BEANS??');
      const faq = (await t.request('GET', `/v1/faqs/${s.id}`, { key: a.key })).body.data;
      assert.equal(faq.status, 'pending');
      assert.equal(faq.category, 'suggested');
      assert.equal(faq.question, 'do you sell COFFEE BEANS??');
      assert.equal(faq.answer, 'TBD');
      const pending = (await t.request('GET', '/v1/faqs?status=pending', { key: a.key })).body.data;
      assert.equal(pending.total, 1, 'the Mars question already exists as a draft FAQ');
      assert.equal((await t.request('GET', `/v1/faqs/${s.id}`, { key: b.key })).status, 404, 'filed in the rundown’s own account');
    });

    test('a second rundown of the same period lists the same questions and suggests nothing new', async () => {
      clock.advance(1000);
      const faqsBefore = await count('faqs');
      const r = await t.request('POST', '/v1/rundowns', { key: a.key, body: RANGE });
      assert.equal(r.status, 201, r.text);
      assert.deepEqual(r.body.data.unanswered, first.unanswered);
      assert.deepEqual(r.body.data.figures, first.figures);
      assert.deepEqual(r.body.data.suggestedFaqs, []);
      assert.equal(await count('faqs'), faqsBefore);
      assert.notEqual(r.body.data.id, first.id);
    });

    test('each POST emits rundown.generated in its transaction, with the documented data', async () => {
      const rows = await t.ctx.db.selectFrom('events').select('payload').where('account_id', '=', a.accountId).where('kind', '=', 'rundown.generated').orderBy('created_at').orderBy(insertionOrder(dialect)).execute();
      assert.equal(rows.length, 2);
      const body = JSON.parse(rows[0]!.payload);
      assert.equal(body.event, 'rundown.generated');
      assert.deepEqual(body.data, {
        rundownId: first.id,
        from: RANGE.from,
        to: RANGE.to,
        trigger: 'manual',
        conversations: 5,
        resolutionRate: 1 / 4,
        escalationRate: 2 / 5,
        unansweredQuestions: 5,
        suggestedFaqs: 1,
      });
      assert.equal(JSON.parse(rows[1]!.payload).data.suggestedFaqs, 0);
    });

    test('get and list: newest first, paginated, filtered by trigger, scoped to the account', async () => {
      const got = await t.request('GET', `/v1/rundowns/${first.id}`, { key: a.key });
      assert.equal(got.status, 200);
      assert.deepEqual(got.body.data, first);

      const list = (await t.request('GET', '/v1/rundowns', { key: a.key })).body.data;
      assert.equal(list.total, 2);
      assert.equal(list.limit, 20);
      assert.equal(list.offset, 0);
      assert.equal(list.rundowns[1].id, first.id, 'newest first');
      assert.ok(list.rundowns[0].createdAt > list.rundowns[1].createdAt);
      const page = (await t.request('GET', '/v1/rundowns?limit=1&offset=1', { key: a.key })).body.data;
      assert.deepEqual(page.rundowns.map((r: any) => r.id), [first.id]);
      assert.equal(page.total, 2);
      assert.equal((await t.request('GET', '/v1/rundowns?trigger=schedule', { key: a.key })).body.data.total, 0);
      assert.equal((await t.request('GET', '/v1/rundowns?trigger=manual', { key: a.key })).body.data.total, 2);

      assert.deepEqual((await t.request('GET', '/v1/rundowns', { key: b.key })).body.data, { rundowns: [], total: 0, limit: 20, offset: 0 });
      const other = await t.request('GET', `/v1/rundowns/${first.id}`, { key: b.key });
      assert.equal(other.status, 404);
      assert.deepEqual(other.body, { success: false, error: { code: 'NOT_FOUND', message: `rundown ${first.id} not found` } });
      assert.equal((await t.request('GET', '/v1/rundowns/rd_nope', { key: a.key })).body.error.code, 'NOT_FOUND');
    });

    test('bad input answers 400 naming the field and the rule, and changes nothing', async () => {
      const cases: [unknown, RegExp][] = [
        [{}, /^body\.from is required$/],
        [{ from: RANGE.from }, /^body\.to is required$/],
        [{ from: 5, to: RANGE.to }, /^body\.from must be of type string$/],
        [{ ...RANGE, extra: 1 }, /^body\.extra is not a known field$/],
        [{ from: 'yesterday', to: RANGE.to }, /^body\.from must be an ISO 8601/],
        [{ from: RANGE.from, to: '2026-02-30' }, /^body\.to must be an ISO 8601/],
        [{ from: RANGE.to, to: RANGE.from }, /^body\.from must be earlier than body\.to/],
        [{ from: RANGE.from, to: RANGE.from }, /^body\.from must be earlier than body\.to/],
        [{ from: '2025-01-01', to: '2026-01-03' }, /^body\.to must be at most 366 days after body\.from$/],
      ];
      const before = [await count('rundowns'), await count('faqs'), await count('events')];
      for (const [body, message] of cases) {
        const r = await t.request('POST', '/v1/rundowns', { key: a.key, body });
        assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, message);
      }
      const noBody = await t.request('POST', '/v1/rundowns', { key: a.key });
      assert.equal(noBody.status, 400);
      // No body at all is a missing JSON body (the app-wide rule for routes with required fields).
      assert.match(noBody.body.error.message, /^Content-Type must be application\/json/);
      for (const path of ['/v1/rundowns?limit=0', '/v1/rundowns?limit=101', '/v1/rundowns?offset=-1', '/v1/rundowns?trigger=weekly', '/v1/rundowns?from=2026-01-01']) {
        const r = await t.request('GET', path, { key: a.key });
        assert.equal(r.status, 400, path);
        assert.match(r.body.error.message, /^query\.(limit|offset|trigger|from) /, path);
      }
      assert.deepEqual([await count('rundowns'), await count('faqs'), await count('events')], before);

      // A span of exactly 366 days is allowed (2024 was a leap year: 2024-01-01 .. 2025-01-01).
      const year = await t.request('POST', '/v1/rundowns', { key: b.key, body: { from: '2024-01-01', to: '2025-01-01' } });
      assert.equal(year.status, 201, year.text);
      assert.equal(year.body.data.figures.conversations, 0);
      assert.equal(year.body.data.figures.resolutionRate, 0);
    });

    test('scopes: rundowns:read for GET, rundowns:write for POST', async () => {
      const reader = await t.ctx.services.accounts.createKey({ accountId: a.accountId, type: 'server', scopes: ['rundowns:read'] });
      const writer = await t.ctx.services.accounts.createKey({ accountId: a.accountId, type: 'server', scopes: ['rundowns:write'] });
      assert.equal((await t.request('GET', '/v1/rundowns', { key: reader.key })).status, 200);
      assert.equal((await t.request('GET', `/v1/rundowns/${first.id}`, { key: reader.key })).status, 200);
      const denied = await t.request('POST', '/v1/rundowns', { key: reader.key, body: RANGE });
      assert.equal(denied.status, 403);
      assert.deepEqual(denied.body.error, { code: 'FORBIDDEN', message: 'this API key lacks the rundowns:write scope' });
      assert.equal((await t.request('GET', '/v1/rundowns', { key: writer.key })).status, 403);
      assert.equal((await t.request('GET', `/v1/rundowns/${first.id}`, { key: writer.key })).status, 403);
      assert.equal((await t.request('POST', '/v1/rundowns', { key: writer.key, body: RANGE })).status, 201);
      assert.equal((await t.request('GET', '/v1/rundowns')).status, 401);
    });
  });
}
