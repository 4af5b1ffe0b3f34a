import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../../helpers/app.js';
import { assertListQueriesRefused, assertTenantIsolation } from '../../helpers/collections.js';
import { DIALECTS } from '../../helpers/db.js';

for (const dialect of DIALECTS) {
  describe(`documents API (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('create answers 201 with id, title, status, createdAt only', async () => {
      const r = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Shipping', content: 'We ship fast.', status: 'active' } });
      assert.equal(r.status, 201);
      assert.equal(r.body.success, true);
      assert.deepEqual(Object.keys(r.body.data).sort(), ['createdAt', 'id', 'status', 'title']);
      assert.match(r.body.data.id, /^doc_[0-9a-z]{26}$/);
      assert.equal(r.body.data.title, 'Shipping');
      assert.equal(r.body.data.status, 'active');
      assert.equal(new Date(r.body.data.createdAt).toISOString(), r.body.data.createdAt);
    });

    test('status defaults to active', async () => {
      const r = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'x', content: 'y' } });
      assert.equal(r.body.data.status, 'active');
    });

    test('get answers the whole document', async () => {
      const c = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Returns', content: '30 days.', status: 'draft' } });
      const r = await t.request('GET', `/v1/documents/${c.body.data.id}`, { key: t.key });
      assert.equal(r.status, 200);
      assert.deepEqual(Object.keys(r.body.data).sort(), ['content', 'createdAt', 'id', 'status', 'title', 'updatedAt']);
      assert.equal(r.body.data.content, '30 days.');
      assert.equal(r.body.data.status, 'draft');
      assert.equal(r.body.data.createdAt, c.body.data.createdAt);
    });

    test('PUT merges the given fields, moves updatedAt and answers the whole record', async () => {
      const c = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Old', content: 'body', status: 'draft' } });
      const id = c.body.data.id;
      const before = await t.request('GET', `/v1/documents/${id}`, { key: t.key });
      const r = await t.request('PUT', `/v1/documents/${id}`, { key: t.key, body: { title: 'New' } });
      assert.equal(r.status, 200);
      assert.equal(r.body.data.title, 'New');
      assert.equal(r.body.data.content, 'body');
      assert.equal(r.body.data.status, 'draft');
      assert.ok(r.body.data.updatedAt > before.body.data.updatedAt, 'updatedAt moved');
      assert.equal(r.body.data.createdAt, before.body.data.createdAt);
      const s = await t.request('PUT', `/v1/documents/${id}`, { key: t.key, body: { status: 'active' } });
      assert.equal(s.body.data.status, 'active');
      const g = await t.request('GET', `/v1/documents/${id}`, { key: t.key });
      assert.deepEqual(g.body.data, s.body.data);
    });

    test('PUT with no field, an unknown field or a bad status is 400 and changes nothing', async () => {
      const c = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Keep', content: 'c' } });
      const id = c.body.data.id;
      for (const [body, field] of [
        [{}, 'body'],
        [{ nope: 1 }, 'nope'],
        [{ status: 'published' }, 'status'],
        [{ title: 5 }, 'title'],
        [{ title: '   ' }, 'title'],
        [{ title: 'x'.repeat(1001) }, 'title'],
      ] as const) {
        const r = await t.request('PUT', `/v1/documents/${id}`, { key: t.key, body });
        assert.equal(r.status, 400, JSON.stringify(body));
        assert.equal(r.body.success, false);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, new RegExp(field));
      }
      const g = await t.request('GET', `/v1/documents/${id}`, { key: t.key });
      assert.equal(g.body.data.title, 'Keep');
    });

    test('create validation names the field and the rule', async () => {
      const cases: [unknown, RegExp][] = [
        [{ content: 'c' }, /body\.title is required/],
        [{ title: 't' }, /body\.content is required/],
        [{ title: 't', content: 'c', status: 'live' }, /body\.status must be one of active, draft/],
        [{ title: 't', content: 'c', extra: true }, /body\.extra is not a known field/],
        [{ title: 't', content: 'x'.repeat(500_001) }, /body\.content must be at most 500000 characters/],
        [{ title: 123, content: 'c' }, /body\.title must be of type string/],
        [[], /body must be of type object/],
      ];
      for (const [body, re] of cases) {
        const r = await t.request('POST', '/v1/documents', { key: t.key, body });
        assert.equal(r.status, 400);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re);
      }
    });

    test('delete answers {deleted: true}; the document is then 404', async () => {
      const c = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Gone', content: 'soon' } });
      const d = await t.request('DELETE', `/v1/documents/${c.body.data.id}`, { key: t.key });
      assert.equal(d.status, 200);
      assert.deepEqual(d.body, { success: true, data: { deleted: true } });
      const g = await t.request('GET', `/v1/documents/${c.body.data.id}`, { key: t.key });
      assert.equal(g.status, 404);
      assert.equal(g.body.error.code, 'NOT_FOUND');
      const again = await t.request('DELETE', `/v1/documents/${c.body.data.id}`, { key: t.key });
      assert.equal(again.status, 404);
    });

    test('list: newest first, no content, status filter, pagination without overlap', async () => {
      const { key: k } = await t.account();
      const ids: string[] = [];
      for (let i = 0; i < 25; i++) {
        const r = await t.request('POST', '/v1/documents', { key: k, body: { title: `doc ${i}`, content: `c${i}`, status: i % 5 === 0 ? 'draft' : 'active' } });
        ids.push(r.body.data.id);
      }
      const first = await t.request('GET', '/v1/documents', { key: k });
      assert.equal(first.status, 200);
      assert.equal(first.body.data.total, 25);
      assert.equal(first.body.data.limit, 20);
      assert.equal(first.body.data.offset, 0);
      assert.equal(first.body.data.documents.length, 20);
      assert.deepEqual(Object.keys(first.body.data.documents[0]).sort(), ['createdAt', 'id', 'status', 'title', 'updatedAt']);
      assert.equal(first.body.data.documents[0].id, ids[24]);
      const seen = new Set<string>();
      for (let offset = 0; offset < 25; offset += 7) {
        const p = await t.request('GET', `/v1/documents?limit=7&offset=${offset}`, { key: k });
        for (const d of p.body.data.documents) {
          assert.ok(!seen.has(d.id), 'no overlap between pages');
          seen.add(d.id);
        }
      }
      assert.equal(seen.size, 25);
      assert.deepEqual([...seen], [...ids].reverse());
      const drafts = await t.request('GET', '/v1/documents?status=draft', { key: k });
      assert.equal(drafts.body.data.total, 5);
      assert.ok(drafts.body.data.documents.every((d: any) => d.status === 'draft'));
      const all = await t.request('GET', '/v1/documents?status=all&limit=100', { key: k });
      assert.equal(all.body.data.documents.length, 25);
      const beyond = await t.request('GET', '/v1/documents?offset=100', { key: k });
      assert.equal(beyond.body.data.documents.length, 0);
      assert.equal(beyond.body.data.total, 25);
    });

    test('list query validation', async () => {
      await assertListQueriesRefused(t, t.key, '/v1/documents', [
        ['limit=0', /query\.limit must be at least 1/],
        ['limit=101', /query\.limit must be at most 100/],
        ['limit=abc', /query\.limit must be an integer/],
        ['offset=-1', /query\.offset must be at least 0/],
        ['status=published', /query\.status must be one of active, draft, all/],
        ['sort=title', /query\.sort is not a known field/],
      ]);
    });

    test('tenant isolation: another account cannot read, change, delete or list', async () => {
      await assertTenantIsolation(t, {
        path: '/v1/documents',
        body: { title: 'A secret', content: 'only A' },
        change: { title: 'hijack' },
        secret: { field: 'title', value: 'A secret' },
        list: '/v1/documents',
      });
    });
  });
}
