import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

// A value that fails a schema pattern is refused with the rule in words, not "has an invalid format".
for (const dialect of DIALECTS) {
  describe(`pattern refusals name the rule (${dialect})`, () => {
    const t = useTestApp(dialect);

    const refused = async (method: 'POST', path: string, body: unknown, message: RegExp) => {
      const r = await t.request(method, path, { key: t.key, body });
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.error.code, 'INVALID_REQUEST');
      assert.match(r.body.error.message, message);
      assert.doesNotMatch(r.body.error.message, /invalid format/);
    };

    test('slug, field key and escalation reason', async () => {
      await refused('POST', '/v1/faqs', { question: 'q?', answer: 'a', category: 'Bad Cat' }, /^body\.category must be a slug: lowercase letters and digits in groups joined by single hyphens/);
      await refused(
        'POST',
        '/v1/workflows',
        { slug: 'demo', name: 'Demo', triggers: ['book a demo'], fields: [{ key: '1st', type: 'text' }] },
        /key must start with a letter and contain only letters, digits and underscores/,
      );
      const start = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: {} });
      assert.equal(start.status, 201, start.text);
      await refused('POST', `/v1/chat/conversations/${start.body.data.conversation.id}/escalate`, { reason: 'Too Slow!' }, /^body\.reason must contain only lowercase letters, digits, "_", "\." and "-"/);
    });

    test('identity fields refuse control characters, and nothing is created', async () => {
      const before = await t.request('GET', '/v1/conversations?limit=1', { key: t.key });
      for (const [field, value] of [
        ['customerId', 'cus_1\nadmin'],
        ['customerId', 'cus\u0000'],
        ['customerLabel', 'Ann\tLee'],
        ['persona', 'Sam\r'],
      ] as const) {
        await refused('POST', '/v1/chat/conversations', { [field]: value }, new RegExp(`^body\\.${field} must not contain (control characters|NUL)`));
      }
      const after = await t.request('GET', '/v1/conversations?limit=1', { key: t.key });
      assert.equal(after.body.data.total, before.body.data.total);

      const start = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: { customerId: 'cus_ünï €', customerLabel: 'Zoë 李' } });
      assert.equal(start.status, 201, start.text);
      const id = start.body.data.conversation.id;
      await refused('POST', `/v1/chat/conversations/${id}/contact`, { email: 'a@example.com', phone: '555\n0100' }, /^body\.phone must not contain control characters/);
      await refused('POST', `/v1/chat/conversations/${id}/contact`, { email: 'a@example.com', name: 'A\u007f' }, /^body\.name must not contain control characters/);
      // The free-text message may span lines.
      const ok = await t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: t.key, body: { email: 'a@example.com', name: 'Ann', message: 'line one\nline two' } });
      assert.equal(ok.status, 200, ok.text);
    });
  });
}
