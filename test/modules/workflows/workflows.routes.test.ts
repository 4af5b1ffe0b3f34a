import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

const DEMO = {
  slug: 'book-demo',
  name: 'Book a demo',
  triggers: ['book a demo', 'schedule a demo'],
  fields: [
    { key: 'email', type: 'email' },
    { key: 'orderRef', type: 'pattern', pattern: 'ORD-(\\d+)' },
  ],
  reply: 'Happy to set that up! Which email should the invite go to?',
};

for (const dialect of DIALECTS) {
  describe(`workflows API (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('create, get, list, update, delete', async () => {
      const c = await t.request('POST', '/v1/workflows', { key: t.key, body: DEMO });
      assert.equal(c.status, 201, c.text);
      const wf = c.body.data;
      assert.match(wf.id, /^wf_/);
      assert.deepEqual(
        { slug: wf.slug, name: wf.name, triggers: wf.triggers, fields: wf.fields, reply: wf.reply, enabled: wf.enabled },
        { ...DEMO, enabled: true },
      );
      assert.equal(wf.createdAt, wf.updatedAt);

      const g = await t.request('GET', `/v1/workflows/${wf.id}`, { key: t.key });
      assert.deepEqual(g.body.data, wf);

      const second = await t.request('POST', '/v1/workflows', { key: t.key, body: { slug: 'refund', name: 'Refund', triggers: ['refund'], enabled: false } });
      assert.equal(second.status, 201, second.text);
      assert.deepEqual(second.body.data.fields, []);
      assert.equal(second.body.data.reply, null);
      const list = await t.request('GET', '/v1/workflows', { key: t.key });
      assert.deepEqual(list.body.data.workflows.map((w: any) => w.slug), ['refund', 'book-demo'], 'newest first');
      assert.equal(list.body.data.total, 2);
      assert.equal(list.body.data.limit, 20);
      const enabled = await t.request('GET', '/v1/workflows?enabled=true&limit=1', { key: t.key });
      assert.deepEqual(enabled.body.data.workflows.map((w: any) => w.slug), ['book-demo']);
      assert.equal(enabled.body.data.total, 1);

      const u = await t.request('PUT', `/v1/workflows/${wf.id}`, { key: t.key, body: { reply: null, enabled: false, triggers: ['demo please'] } });
      assert.equal(u.status, 200, u.text);
      assert.equal(u.body.data.reply, null);
      assert.equal(u.body.data.enabled, false);
      assert.deepEqual(u.body.data.triggers, ['demo please']);
      assert.equal(u.body.data.slug, 'book-demo', 'fields not given are kept');
      assert.ok(u.body.data.updatedAt > wf.updatedAt);

      const d = await t.request('DELETE', `/v1/workflows/${wf.id}`, { key: t.key });
      assert.deepEqual(d.body, { success: true, data: { deleted: true } });
      assert.equal((await t.request('GET', `/v1/workflows/${wf.id}`, { key: t.key })).status, 404);
      assert.equal((await t.request('DELETE', `/v1/workflows/${wf.id}`, { key: t.key })).status, 404);
      await t.request('DELETE', `/v1/workflows/${second.body.data.id}`, { key: t.key });
    });

    test('bad input is a 400 naming the field and the rule, and changes nothing', async () => {
      const cases: [Record<string, unknown>, RegExp][] = [
        [{ ...DEMO, slug: 'Book Demo' }, /slug/],
        [{ ...DEMO, triggers: [] }, /triggers/],
        [{ ...DEMO, triggers: ['   '] }, /^body\.triggers\[0\] must not be blank$/],
        [{ ...DEMO, triggers: ['?!'] }, /^body\.triggers\[0\] must contain a word$/],
        [{ ...DEMO, name: ' ' }, /name must not be blank/],
        [{ ...DEMO, fields: [{ key: 'email', type: 'email' }, { key: 'email', type: 'text' }] }, /^body\.fields\[1\]\.key "email" is used twice$/],
        [{ ...DEMO, fields: [{ key: 'ref', type: 'pattern' }] }, /^body\.fields\[0\]\.pattern is required when type is pattern$/],
        [{ ...DEMO, fields: [{ key: 'ref', type: 'pattern', pattern: '(' }] }, /^body\.fields\[0\]\.pattern is not a valid regular expression/],
        [{ ...DEMO, fields: [{ key: 'ref', type: 'pattern', pattern: '(a)\\1' }] }, /^body\.fields\[0\]\.pattern must not use back-references or look-arounds/],
        [{ ...DEMO, fields: [{ key: 'ref', type: 'text', pattern: 'x' }] }, /^body\.fields\[0\]\.pattern is only allowed when type is pattern$/],
        [{ ...DEMO, fields: [{ key: '1st', type: 'text' }] }, /^body\.fields\[0\]\.key must start with a letter/],
        [{ ...DEMO, fields: [{ key: 'x', type: 'date' }] }, /type/],
        [{ ...DEMO, extra: 1 }, /extra/],
        [{ ...DEMO, reply: '' }, /reply/],
      ];
      for (const [body, re] of cases) {
        const r = await t.request('POST', '/v1/workflows', { key: t.key, body });
        assert.equal(r.status, 400, `${JSON.stringify(body)} → ${r.text}`);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, re);
      }
      assert.equal((await t.request('GET', '/v1/workflows', { key: t.key })).body.data.total, 0);

      const a = await t.request('POST', '/v1/workflows', { key: t.key, body: DEMO });
      const dup = await t.request('POST', '/v1/workflows', { key: t.key, body: { ...DEMO, name: 'Another' } });
      assert.equal(dup.status, 400);
      assert.match(dup.body.error.message, /slug "book-demo" is already used/);
      const b = await t.request('POST', '/v1/workflows', { key: t.key, body: { ...DEMO, slug: 'other' } });
      const clash = await t.request('PUT', `/v1/workflows/${b.body.data.id}`, { key: t.key, body: { slug: 'book-demo' } });
      assert.equal(clash.status, 400);
      assert.match(clash.body.error.message, /slug "book-demo" is already used/);
      const same = await t.request('PUT', `/v1/workflows/${a.body.data.id}`, { key: t.key, body: { slug: 'book-demo', name: 'Renamed' } });
      assert.equal(same.status, 200, 'keeping its own slug is fine');
      const empty = await t.request('PUT', `/v1/workflows/${a.body.data.id}`, { key: t.key, body: {} });
      assert.equal(empty.status, 400);
      assert.equal((await t.request('GET', `/v1/workflows/${b.body.data.id}`, { key: t.key })).body.data.slug, 'other');
      await t.request('DELETE', `/v1/workflows/${a.body.data.id}`, { key: t.key });
      await t.request('DELETE', `/v1/workflows/${b.body.data.id}`, { key: t.key });
    });

    test("another account's workflow is 404; scopes are enforced", async () => {
      const mine = await t.request('POST', '/v1/workflows', { key: t.key, body: DEMO });
      const other = await t.account();
      for (const [method, body] of [['GET', undefined], ['PUT', { name: 'x' }], ['DELETE', undefined]] as const) {
        const r = await t.request(method, `/v1/workflows/${mine.body.data.id}`, { key: other.key, body });
        assert.equal(r.status, 404, `${method} ${r.text}`);
      }
      assert.equal((await t.request('GET', '/v1/workflows', { key: other.key })).body.data.total, 0);
      // the same slug is free in another account
      assert.equal((await t.request('POST', '/v1/workflows', { key: other.key, body: DEMO })).status, 201);

      const reader = await t.account({ scopes: ['workflows:read'] });
      assert.equal((await t.request('GET', '/v1/workflows', { key: reader.key })).status, 200);
      const denied = await t.request('POST', '/v1/workflows', { key: reader.key, body: DEMO });
      assert.equal(denied.status, 403);
      assert.equal(denied.body.error.code, 'FORBIDDEN');
      const chatOnly = await t.account({ scopes: ['chat'] });
      assert.equal((await t.request('GET', '/v1/workflows', { key: chatOnly.key })).status, 403);
      await t.request('DELETE', `/v1/workflows/${mine.body.data.id}`, { key: t.key });
    });
  });
}
