import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.js';
import { DEFAULT_SETTINGS } from '../../../src/modules/assistant/assistant.schemas.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

for (const dialect of DIALECTS) {
  describe(`the answer threshold, minConfidence of /v1/settings/assistant (${dialect})`, () => {
    const t = useTestApp(dialect);
    before(() => runDemo(t.ctx, t.accountId));

    const settings = async () => (await t.request('GET', '/v1/settings/assistant', { key: t.key })).body.data;
    const put = (body: unknown) => t.request('PUT', '/v1/settings/assistant', { key: t.key, body });
    const stored = async () => {
      const row = await t.ctx.db.selectFrom('accounts').select('assistant_settings').where('id', '=', t.accountId).executeTakeFirstOrThrow();
      return row.assistant_settings === null ? null : (JSON.parse(row.assistant_settings) as Record<string, unknown>);
    };
    /** A customer's message in a new conversation: the assistant's reply. */
    const chat = async (content: string) => {
      const c = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: {} });
      const r = await t.request('POST', `/v1/chat/conversations/${c.body.data.conversation.id}/messages`, { key: t.key, body: { content } });
      assert.equal(r.status, 200, r.text);
      return r.body.data.messages[1] as { content: string; sources?: string[] };
    };
    const question = 'how long do refunds take?';

    test('defaults to the calibrated bar; raised above a question\'s confidence, the chat and the preview no longer answer it; null takes it back', async () => {
      assert.equal((await settings()).minConfidence, DEFAULT_SETTINGS.minConfidence);
      const tried = (await t.request('POST', '/v1/assistant/preview', { key: t.key, body: { content: question } })).body.data;
      assert.equal(tried.outcome, 'answer');
      assert.ok(tried.confidence < 0.95, `confidence ${tried.confidence}`);
      assert.ok((await chat(question)).sources!.length > 0);

      const r = await put({ minConfidence: 0.95 });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.data.minConfidence, 0.95);
      const strict = (await t.request('POST', '/v1/assistant/preview', { key: t.key, body: { content: question } })).body.data;
      assert.equal(strict.outcome, 'no_answer');
      assert.equal(strict.minConfidence, 0.95);
      assert.deepEqual(strict.sources, []);
      assert.equal(strict.matches[0].id, tried.matches[0].id, 'what it nearly used is still shown');
      const reply = await chat(question);
      assert.match(reply.content, /don't know/);
      assert.deepEqual(reply.sources ?? [], []);

      const back = await put({ minConfidence: null });
      assert.equal(back.status, 200, back.text);
      assert.equal(back.body.data.minConfidence, DEFAULT_SETTINGS.minConfidence);
      assert.ok((await chat(question)).sources!.length > 0);
    });

    test('only what the owner set is stored, so a field left at its default follows the default', async () => {
      await put({ name: 'Robin' });
      assert.deepEqual(await stored(), { name: 'Robin' });
      await put({ minConfidence: 0.6 });
      assert.deepEqual(await stored(), { name: 'Robin', minConfidence: 0.6 });
      await put({ minConfidence: null });
      assert.deepEqual(await stored(), { name: 'Robin' });
      assert.deepEqual(await settings(), { ...DEFAULT_SETTINGS, name: 'Robin' });
      // null is for the threshold only: a text field is given its default text.
      assert.equal((await put({ name: null })).status, 400);
      await put({ name: DEFAULT_SETTINGS.name });
    });

    test('outside 0.05–0.95, or not a number: a 400 naming the field, and nothing changes', async () => {
      await put({ minConfidence: 0.7 });
      for (const value of [0, 0.01, 0.96, 1, -0.5, '0.6', true]) {
        const r = await put({ minConfidence: value });
        assert.equal(r.status, 400, `${JSON.stringify(value)}: ${r.text}`);
        assert.match(r.body.error.message, /^body\.minConfidence/);
      }
      assert.equal((await settings()).minConfidence, 0.7);
      // Blank texts are still refused, and null is not a way round that for them.
      assert.equal((await put({ name: '   ' })).status, 400);
      await put({ minConfidence: null });
    });
  });
}
