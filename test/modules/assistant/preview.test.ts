import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.js';
import { DEFAULT_MIN_CONFIDENCE } from '../../../src/modules/assistant/answerer.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

/** Rows that a preview must not write: conversations, messages, events (so no webhook either). */
async function written(t: ReturnType<typeof useTestApp>) {
  const count = async (table: 'conversations' | 'messages' | 'events') =>
    Number((await t.ctx.db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).executeTakeFirstOrThrow()).n);
  return { conversations: await count('conversations'), messages: await count('messages'), events: await count('events') };
}

for (const dialect of DIALECTS) {
  describe(`POST /v1/assistant/preview (${dialect})`, () => {
    const t = useTestApp(dialect);
    let draftId: string;
    let pendingId: string;
    before(async () => {
      await runDemo(t.ctx, t.accountId);
      draftId = (await t.ctx.services.documents.create(t.accountId, { title: 'Race wheel rental', content: 'Rent a set of carbon race wheels for a weekend.', status: 'draft' })).id;
      pendingId = (await t.ctx.services.faqs.create(t.accountId, { question: 'Do you rent race wheels?', answer: 'Yes, for a weekend.', category: 'rental', status: 'pending' })).id;
    });

    const preview = (body: unknown, key = t.key) => t.request('POST', '/v1/assistant/preview', { key, body });

    test('an answered question: the reply, its sources, the confidence over the bar, and the best matches; nothing is written', async () => {
      const before = await written(t);
      const r = await preview({ content: 'how long do refunds take?' });
      assert.equal(r.status, 200, r.text);
      const d = r.body.data;
      assert.equal(d.outcome, 'answer');
      assert.equal(d.provider, 'default');
      assert.match(d.reply, /5 to 10 business days/);
      assert.ok(d.sources.length >= 1);
      assert.ok(d.confidence >= d.minConfidence, JSON.stringify(d));
      assert.equal(d.minConfidence, DEFAULT_MIN_CONFIDENCE);
      assert.equal(d.matches[0].id, d.sources[0]);
      assert.equal(d.matches[0].type, 'faq');
      assert.equal(d.matches[0].title, 'How long do refunds take?');
      assert.match(d.matches[0].passage, /business days/);
      assert.ok(d.matches[0].coverage > 0 && d.matches[0].coverage <= 1);
      assert.ok(d.matches.length <= 5);
      assert.deepEqual(await written(t), before);
    });

    test('a question it does not answer: no_answer, nothing cited, and the matches it nearly used (published only)', async () => {
      const r = await preview({ content: 'can I rent race wheels for the weekend?' });
      assert.equal(r.status, 200, r.text);
      const d = r.body.data;
      assert.equal(d.outcome, 'no_answer');
      assert.deepEqual(d.sources, []);
      assert.match(d.reply, /don't know/);
      assert.ok(d.confidence < d.minConfidence, JSON.stringify(d));
      // The draft and the pending FAQ match it best, and are never shown: they are not published.
      const ids = d.matches.map((m: { id: string }) => m.id);
      assert.ok(!ids.includes(draftId) && !ids.includes(pendingId), JSON.stringify(ids));
    });

    test('a follow-up is read with the history, as in a conversation', async () => {
      const alone = (await preview({ content: 'how long does that take?' })).body.data;
      const r = await preview({
        content: 'how long does that take?',
        history: [
          { role: 'customer', content: 'can I return a helmet?' },
          { role: 'assistant', content: 'Yes, within 30 days.' },
        ],
      });
      assert.equal(r.status, 200, r.text);
      const titles = r.body.data.matches.map((m: { title: string }) => m.title);
      assert.ok(titles.slice(0, 2).some((x: string) => /refund|return/i.test(x)), JSON.stringify(titles));
      assert.notDeepEqual(r.body.data.matches, alone.matches);
    });

    test('a request for a person and small talk: their outcome, no confidence, no matches', async () => {
      const h = (await preview({ content: 'can I talk to a human please' })).body.data;
      assert.equal(h.outcome, 'handoff');
      assert.equal(h.confidence, null);
      assert.deepEqual(h.matches, []);
      assert.deepEqual(h.sources, []);
      const s = (await preview({ content: 'thanks!' })).body.data;
      assert.equal(s.outcome, 'smalltalk');
      assert.equal(s.confidence, null);
    });

    test("another account's knowledge is never matched", async () => {
      const other = await t.account();
      const r = await preview({ content: 'how long do refunds take?' }, other.key);
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.data.outcome, 'no_answer');
      assert.deepEqual(r.body.data.matches, []);
    });

    test('bad input is a 400 naming the field; a key without documents:read or without faqs:read is a 403 naming it', async () => {
      for (const [body, field] of [
        [{}, 'content'],
        [{ content: '   ' }, 'body.content'],
        [{ content: 'x'.repeat(4_001) }, 'body.content'],
        [{ content: 'hi', history: [{ role: 'agent', content: 'x' }] }, 'body.history[0].role must be one of customer, assistant'],
        [{ content: 'hi', history: Array.from({ length: 21 }, () => ({ role: 'customer', content: 'x' })) }, 'body.history'],
        [{ content: 'hi', extra: 1 }, 'extra'],
      ] as const) {
        const r = await preview(body);
        assert.equal(r.status, 400, `${JSON.stringify(body).slice(0, 80)}: ${r.text}`);
        assert.equal(r.body.success, false);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.ok(r.body.error.message.includes(field), r.body.error.message);
      }
      for (const [scopes, lacking] of [
        [['faqs:read'], 'documents:read'],
        [['documents:read', 'documents:write'], 'faqs:read'],
      ] as const) {
        const narrow = await t.account({ scopes: [...scopes] });
        const refused = await preview({ content: 'how long do refunds take?' }, narrow.key);
        assert.equal(refused.status, 403, refused.text);
        assert.equal(refused.body.error.message, `this API key lacks the ${lacking} scope`);
      }
    });
  });
}
