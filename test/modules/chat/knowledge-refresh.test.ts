import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { DOCS, FAQS, GIFT_WRAP_DRAFT } from '../assistant/fixtures.js';

for (const dialect of DIALECTS) {
  describe(`assistant sees knowledge changes on the next message (${dialect})`, () => {
    const t = useTestApp(dialect);

    const ask = async (content: string) => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: {} });
      const r = await t.request('POST', `/v1/chat/conversations/${s.body.data.conversation.id}/messages`, { key: t.key, body: { content } });
      return r.body.data.messages[1] as { content: string; sources: string[] };
    };

    test('created, drafted, re-activated, edited and deleted documents and FAQs', async () => {
      const question = 'How do I descale the espresso machine?';
      const before = await ask(question);
      assert.deepEqual(before.sources, []);

      const doc = await t.request('POST', '/v1/documents', {
        key: t.key,
        body: { title: 'Descaling your espresso machine', content: 'Descale the espresso machine every two months with citric acid: fill the tank, run half, wait 20 minutes, run the rest, then rinse twice.' },
      });
      const docId = doc.body.data.id;
      assert.deepEqual((await ask(question)).sources, [docId]);

      await t.request('PUT', `/v1/documents/${docId}`, { key: t.key, body: { status: 'draft' } });
      assert.deepEqual((await ask(question)).sources, [], 'a draft is never cited');

      await t.request('PUT', `/v1/documents/${docId}`, { key: t.key, body: { status: 'active', content: 'Descale the espresso machine every three weeks with the blue descaling tablets.' } });
      const edited = await ask(question);
      assert.deepEqual(edited.sources, [docId]);
      assert.match(edited.content, /three weeks/);

      const faq = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'Can I use vinegar to descale the espresso machine?', answer: 'No, vinegar damages the seals.', category: 'care' } });
      const faqId = faq.body.data.id;
      assert.ok((await ask('can I descale the espresso machine with vinegar')).sources.includes(faqId));

      await t.request('DELETE', `/v1/faqs/${faqId}`, { key: t.key });
      await t.request('DELETE', `/v1/documents/${docId}`, { key: t.key });
      const gone = await ask('can I descale the espresso machine with vinegar');
      assert.ok(!gone.sources.includes(faqId) && !gone.sources.includes(docId), 'deleted sources are never cited');
    });

    test('a draft on the topic of a question keeps the assistant from answering it from another article', async () => {
      for (const d of DOCS) await t.request('POST', '/v1/documents', { key: t.key, body: { title: d.title, content: d.content } });
      for (const f of FAQS) await t.request('POST', '/v1/faqs', { key: t.key, body: { question: f.question, answer: f.answer, category: f.category } });
      const question = 'can you gift wrap my order and add a card?';
      assert.ok((await ask(question)).sources.length > 0, 'answered from the nearest published source without the draft');

      const draft = await t.request('POST', '/v1/documents', {
        key: t.key,
        body: { title: GIFT_WRAP_DRAFT.title, content: GIFT_WRAP_DRAFT.content, status: 'draft' },
      });
      const abstained = await ask(question);
      assert.deepEqual(abstained.sources, []);
      assert.match(abstained.content, /don't know/);

      await t.request('PUT', `/v1/documents/${draft.body.data.id}`, { key: t.key, body: { status: 'active' } });
      assert.deepEqual((await ask(question)).sources.slice(0, 1), [draft.body.data.id], 'published, it is the answer');
    });
  });
}
