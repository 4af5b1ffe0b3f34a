import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

const N = 16;

/**
 * Concurrent PUTs of one record: each answers a distinct `updatedAt` (moving forward even within one millisecond),
 * and the record that stands is the one answered with the latest `updatedAt`. On PostgreSQL, writers run side by
 * side: an update that read the row before waiting for another's lock carried what it had read (an `updatedAt`
 * older than one already answered, fields another PUT had changed).
 */
for (const dialect of DIALECTS) {
  describe(`concurrent updates of one record (${dialect})`, () => {
    const t = useTestApp(dialect, { env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });

    async function race(path: string, body: (i: number) => Record<string, unknown>, field: string) {
      const answers = await Promise.all(Array.from({ length: N }, (_, i) => t.request('PUT', path, { key: t.key, body: body(i) })));
      for (const a of answers) assert.equal(a.status, 200, a.text);
      const stamps = answers.map((a) => a.body.data.updatedAt as string);
      assert.equal(new Set(stamps).size, N, `every update moved updatedAt: ${stamps.sort().join(' ')}`);
      const latest = answers.reduce((a, b) => (b.body.data.updatedAt > a.body.data.updatedAt ? b : a));
      const stored = await t.request('GET', path, { key: t.key });
      assert.equal(stored.body.data.updatedAt, latest.body.data.updatedAt, 'the stored record is the latest answered');
      assert.equal(stored.body.data[field], latest.body.data[field]);
    }

    test('documents', async () => {
      const d = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'T', content: 'c', status: 'active' } });
      await race(`/v1/documents/${d.body.data.id}`, (i) => ({ title: `v${i}` }), 'title');
    });

    test('FAQs', async () => {
      const f = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'Q?', answer: 'A', category: 'general', status: 'approved' } });
      await race(`/v1/faqs/${f.body.data.id}`, (i) => ({ answer: `a${i}` }), 'answer');
    });

    test('webhooks', async () => {
      const w = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: 'http://127.0.0.1:9/hook', events: ['escalation'], secret: 'whsec_concurrent' } });
      assert.equal(w.status, 201, w.text);
      await race(`/v1/webhooks/${w.body.data.id}`, (i) => ({ url: `http://127.0.0.1:9/hook/${i}` }), 'url');
    });

    test('workflows', async () => {
      const w = await t.request('POST', '/v1/workflows', { key: t.key, body: { slug: 'race', name: 'Race', triggers: ['race'] } });
      assert.equal(w.status, 201, w.text);
      await race(`/v1/workflows/${w.body.data.id}`, (i) => ({ name: `n${i}` }), 'name');
    });

    test('assistant settings: concurrent PUTs of different fields all stay', async () => {
      const fields = await Promise.all([
        t.request('PUT', '/v1/settings/assistant', { key: t.key, body: { name: 'Robin' } }),
        t.request('PUT', '/v1/settings/assistant', { key: t.key, body: { greeting: 'Hello from {name}!' } }),
        t.request('PUT', '/v1/settings/assistant', { key: t.key, body: { tone: 'friendly' } }),
      ]);
      for (const r of fields) assert.equal(r.status, 200, r.text);
      const s = await t.request('GET', '/v1/settings/assistant', { key: t.key });
      assert.equal(s.status, 200, s.text);
      assert.deepEqual([s.body.data.name, s.body.data.greeting, s.body.data.tone], ['Robin', 'Hello from {name}!', 'friendly']);
    });
  });
}
