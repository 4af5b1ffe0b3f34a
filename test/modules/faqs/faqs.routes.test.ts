import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../../helpers/app.js';
import { assertListQueriesRefused, assertTenantIsolation } from '../../helpers/collections.js';
import { DIALECTS } from '../../helpers/db.js';

const RECORD_KEYS = ['answer', 'category', 'createdAt', 'id', 'question', 'status', 'updatedAt'];

for (const dialect of DIALECTS) {
  describe(`FAQs API (${dialect})`, () => {
    const t = useTestApp(dialect);

    const create = (body: unknown, k = t.key) => t.request('POST', '/v1/faqs', { key: k, body });

    test('create answers 201 with the whole record; status defaults to approved', async () => {
      const r = await create({ question: 'How do I reset?', answer: 'Click forgot password.', category: 'account' });
      assert.equal(r.status, 201);
      assert.equal(r.body.success, true);
      assert.deepEqual(Object.keys(r.body.data).sort(), RECORD_KEYS);
      assert.match(r.body.data.id, /^faq_[0-9a-z]{26}$/);
      assert.equal(r.body.data.question, 'How do I reset?');
      assert.equal(r.body.data.answer, 'Click forgot password.');
      assert.equal(r.body.data.category, 'account');
      assert.equal(r.body.data.status, 'approved');
      assert.equal(new Date(r.body.data.createdAt).toISOString(), r.body.data.createdAt);
      assert.equal(r.body.data.updatedAt, r.body.data.createdAt);
      for (const status of ['pending', 'draft', 'approved']) {
        const s = await create({ question: 'q', answer: 'a', category: 'c', status });
        assert.equal(s.status, 201);
        assert.equal(s.body.data.status, status);
      }
    });

    test('get answers the same record as create', async () => {
      const c = await create({ question: 'Ship abroad?', answer: 'EU and UK.', category: 'shipping', status: 'pending' });
      const g = await t.request('GET', `/v1/faqs/${c.body.data.id}`, { key: t.key });
      assert.equal(g.status, 200);
      assert.deepEqual(g.body, { success: true, data: c.body.data });
    });

    test('category must be a slug', async () => {
      for (const category of ['shipping', 'a', 'returns-and-refunds', 'v2', '2fa-setup']) {
        const r = await create({ question: 'q', answer: 'a', category });
        assert.equal(r.status, 201, category);
      }
      for (const category of ['Shipping', 'with space', '-lead', 'trail-', 'dou--ble', 'under_score', 'é', '', 'a/b']) {
        const r = await create({ question: 'q', answer: 'a', category });
        assert.equal(r.status, 400, JSON.stringify(category));
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, /body\.category/);
      }
    });

    test('size limits: question 1,000, answer 20,000, category 100', async () => {
      const ok = await create({ question: 'q'.repeat(1000), answer: 'a'.repeat(20_000), category: 'c'.repeat(100) });
      assert.equal(ok.status, 201);
      for (const [body, re] of [
        [{ question: 'q'.repeat(1001), answer: 'a', category: 'c' }, /body\.question must be at most 1000 characters/],
        [{ question: 'q', answer: 'a'.repeat(20_001), category: 'c' }, /body\.answer must be at most 20000 characters/],
        [{ question: 'q', answer: 'a', category: 'c'.repeat(101) }, /body\.category must be at most 100 characters/],
      ] as const) {
        const r = await create(body);
        assert.equal(r.status, 400);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re);
      }
    });

    test('create validation names the field and the rule', async () => {
      const cases: [unknown, RegExp][] = [
        [{ answer: 'a', category: 'c' }, /body\.question is required/],
        [{ question: 'q', category: 'c' }, /body\.answer is required/],
        [{ question: 'q', answer: 'a' }, /body\.category is required/],
        [{ question: 'q', answer: 'a', category: 'c', status: 'published' }, /body\.status must be one of approved, pending, draft/],
        [{ question: 'q', answer: 'a', category: 'c', id: 'faq_x' }, /body\.id is not a known field/],
        [{ question: ['q'], answer: 'a', category: 'c' }, /body\.question must be of type string/],
        [{ question: '  ', answer: 'a', category: 'c' }, /body\.question must not be blank/],
        [{ question: 'q', answer: '\n\t', category: 'c' }, /body\.answer must not be blank/],
        ['just a string', /body must be of type object/],
      ];
      for (const [body, re] of cases) {
        const r = await create(body);
        assert.equal(r.status, 400, JSON.stringify(body));
        assert.equal(r.body.success, false);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re);
      }
    });

    test('PUT merges the given fields, moves updatedAt and answers the whole record', async () => {
      const c = await create({ question: 'Old?', answer: 'Old.', category: 'general', status: 'pending' });
      const id = c.body.data.id;
      const r = await t.request('PUT', `/v1/faqs/${id}`, { key: t.key, body: { answer: 'New.' } });
      assert.equal(r.status, 200);
      assert.deepEqual(Object.keys(r.body.data).sort(), RECORD_KEYS);
      assert.equal(r.body.data.question, 'Old?');
      assert.equal(r.body.data.answer, 'New.');
      assert.equal(r.body.data.category, 'general');
      assert.equal(r.body.data.status, 'pending');
      assert.equal(r.body.data.createdAt, c.body.data.createdAt);
      assert.ok(r.body.data.updatedAt > c.body.data.updatedAt, 'updatedAt moved');
      const s = await t.request('PUT', `/v1/faqs/${id}`, { key: t.key, body: { status: 'approved', category: 'billing', question: 'New?' } });
      assert.equal(s.body.data.status, 'approved');
      assert.equal(s.body.data.category, 'billing');
      assert.equal(s.body.data.question, 'New?');
      assert.equal(s.body.data.answer, 'New.');
      const g = await t.request('GET', `/v1/faqs/${id}`, { key: t.key });
      assert.deepEqual(g.body.data, s.body.data);
    });

    test('PUT with no field, an unknown field or a bad value is 400 and changes nothing', async () => {
      const c = await create({ question: 'Keep?', answer: 'Keep.', category: 'keep' });
      const id = c.body.data.id;
      for (const [body, re] of [
        [{}, /body must contain at least one field/],
        [{ nope: 1 }, /body\.nope is not a known field/],
        [{ status: 'live' }, /body\.status/],
        [{ category: 'Not A Slug' }, /body\.category must be a slug: lowercase letters and digits in groups joined by single hyphens/],
        [{ question: '' }, /body\.question must not be empty/],
        [{ answer: 'x'.repeat(20_001) }, /body\.answer must be at most 20000/],
        [{ answer: ' ' }, /body\.answer must not be blank/],
      ] as const) {
        const r = await t.request('PUT', `/v1/faqs/${id}`, { key: t.key, body });
        assert.equal(r.status, 400, JSON.stringify(body));
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re);
      }
      const g = await t.request('GET', `/v1/faqs/${id}`, { key: t.key });
      assert.deepEqual(g.body.data, c.body.data);
    });

    test('delete answers {deleted: true}; then get, put and delete are 404', async () => {
      const c = await create({ question: 'Gone?', answer: 'Soon.', category: 'misc' });
      const id = c.body.data.id;
      const d = await t.request('DELETE', `/v1/faqs/${id}`, { key: t.key });
      assert.equal(d.status, 200);
      assert.deepEqual(d.body, { success: true, data: { deleted: true } });
      for (const [method, body] of [['GET'], ['PUT', { answer: 'x' }], ['DELETE']] as const) {
        const r = await t.request(method, `/v1/faqs/${id}`, { key: t.key, body });
        assert.equal(r.status, 404, method);
        assert.deepEqual(Object.keys(r.body.error).sort(), ['code', 'message']);
        assert.equal(r.body.error.code, 'NOT_FOUND');
      }
    });

    test('list: whole records, newest first, status and category filters, pagination without overlap', async () => {
      const { key: k } = await t.account();
      const ids: string[] = [];
      const statuses = ['approved', 'pending', 'draft'] as const;
      for (let i = 0; i < 24; i++) {
        const r = await create(
          { question: `q${i}`, answer: `a${i}`, category: i % 2 ? 'shipping' : 'returns', status: statuses[i % 3] },
          k,
        );
        ids.push(r.body.data.id);
      }
      const first = await t.request('GET', '/v1/faqs', { key: k });
      assert.equal(first.status, 200);
      assert.deepEqual(Object.keys(first.body.data).sort(), ['faqs', 'limit', 'offset', 'total']);
      assert.equal(first.body.data.total, 24);
      assert.equal(first.body.data.limit, 20);
      assert.equal(first.body.data.offset, 0);
      assert.equal(first.body.data.faqs.length, 20);
      assert.deepEqual(Object.keys(first.body.data.faqs[0]).sort(), RECORD_KEYS);
      assert.equal(first.body.data.faqs[0].id, ids[23]);

      const seen: string[] = [];
      for (let offset = 0; offset < 24; offset += 5) {
        const p = await t.request('GET', `/v1/faqs?limit=5&offset=${offset}`, { key: k });
        assert.equal(p.body.data.limit, 5);
        assert.equal(p.body.data.offset, offset);
        seen.push(...p.body.data.faqs.map((f: any) => f.id));
      }
      assert.deepEqual(seen, [...ids].reverse(), 'pages cover every FAQ once, newest first');

      const pending = await t.request('GET', '/v1/faqs?status=pending&limit=100', { key: k });
      assert.equal(pending.body.data.total, 8);
      assert.ok(pending.body.data.faqs.every((f: any) => f.status === 'pending'));
      const shipping = await t.request('GET', '/v1/faqs?category=shipping&limit=100', { key: k });
      assert.equal(shipping.body.data.total, 12);
      assert.ok(shipping.body.data.faqs.every((f: any) => f.category === 'shipping'));
      const both = await t.request('GET', '/v1/faqs?category=returns&status=approved&limit=100', { key: k });
      // i even (returns) and i % 3 === 0 (approved): i = 0, 6, 12, 18
      assert.equal(both.body.data.total, 4);
      assert.deepEqual(
        both.body.data.faqs.map((f: any) => f.id),
        [18, 12, 6, 0].map((i) => ids[i]),
      );
      const all = await t.request('GET', '/v1/faqs?status=all&limit=100', { key: k });
      assert.equal(all.body.data.faqs.length, 24);
      const none = await t.request('GET', '/v1/faqs?category=nothing-here', { key: k });
      assert.equal(none.body.data.total, 0);
      assert.deepEqual(none.body.data.faqs, []);
      const beyond = await t.request('GET', '/v1/faqs?offset=50', { key: k });
      assert.equal(beyond.body.data.faqs.length, 0);
      assert.equal(beyond.body.data.total, 24);
    });

    test('list query validation', async () => {
      await assertListQueriesRefused(t, t.key, '/v1/faqs', [
        ['limit=0', /query\.limit must be at least 1/],
        ['limit=101', /query\.limit must be at most 100/],
        ['limit=ten', /query\.limit must be an integer/],
        ['offset=-3', /query\.offset must be at least 0/],
        ['status=published', /query\.status must be one of approved, pending, draft, all/],
        ['category=Bad%20Cat', /query\.category must be a slug/],
        ['category=' + 'c'.repeat(101), /query\.category must be at most 100 characters/],
        ['q=shipping', /query\.q is not a known field/],
      ]);
    });

    test('tenant isolation: another account cannot read, change, delete or list', async () => {
      await assertTenantIsolation(t, {
        path: '/v1/faqs',
        body: { question: 'A secret?', answer: 'only A knows', category: 'secret' },
        change: { answer: 'hijack' },
        secret: { field: 'answer', value: 'only A knows' },
        list: '/v1/faqs?category=secret',
      });
    });

    test('scopes: faqs:read cannot write, documents scopes do not reach FAQs', async () => {
      const ro = await t.account({ scopes: ['faqs:read'] });
      const w = await create({ question: 'q', answer: 'a', category: 'c' }, ro.key);
      assert.equal(w.status, 403);
      assert.equal(w.body.error.code, 'FORBIDDEN');
      assert.equal((await t.request('GET', '/v1/faqs', { key: ro.key })).status, 200);
      const docs = await t.account({ scopes: ['documents:read', 'documents:write'] });
      const r = await t.request('GET', '/v1/faqs', { key: docs.key });
      assert.equal(r.status, 403);
      assert.match(r.body.error.message, /faqs:read/);
    });
  });
}
