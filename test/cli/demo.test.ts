import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { runDemo } from '../../src/cli/demo.js';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

// `parley demo` in process (the CLI suite runs the command itself): what a second run leaves in the database.
for (const dialect of DIALECTS) {
  describe(`demo knowledge base (${dialect})`, () => {
    const t = useTestApp(dialect);

    const count = async (table: 'documents' | 'faqs', accountId: string) =>
      Number((await t.ctx.db.selectFrom(table).select((eb) => eb.fn.countAll().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow()).n);

    test('a second run adds nothing; what the account already has (same title or question, any status) is skipped', async () => {
      const { accountId, key } = await t.account();
      // The owner already wrote one of the sample FAQs (as a draft) and one document: both are left alone.
      const faq = await t.request('POST', '/v1/faqs', { key, body: { question: 'How do I track my order?', answer: 'Ask us.', category: 'shipping', status: 'draft' } });
      assert.equal(faq.status, 201, faq.text);
      const doc = await t.request('POST', '/v1/documents', { key, body: { title: 'Warranty', content: 'Our own warranty text.' } });
      assert.equal(doc.status, 201, doc.text);
      assert.deepEqual(await runDemo(t.ctx, accountId), { accountId, documents: 4, faqs: 5, skipped: { documents: 1, faqs: 1 } });
      assert.deepEqual(await runDemo(t.ctx, accountId), { accountId, documents: 0, faqs: 0, skipped: { documents: 5, faqs: 6 } });
      assert.equal(await count('documents', accountId), 5);
      assert.equal(await count('faqs', accountId), 6);
      const own = await t.request('GET', `/v1/faqs/${faq.body.data.id}`, { key });
      assert.equal(own.body.data.answer, 'Ask us.', 'the owner\'s FAQ is not overwritten');
      // Another account gets its own copy.
      const other = await t.account();
      assert.deepEqual(await runDemo(t.ctx, other.accountId), { accountId: other.accountId, documents: 5, faqs: 6, skipped: { documents: 0, faqs: 0 } });
    });

    test('the sample shop answers the questions a new user tries first from the article that answers them', async () => {
      const { accountId, key } = await t.account();
      await runDemo(t.ctx, accountId);
      const publicKey = (await t.ctx.services.accounts.createKey({ accountId, type: 'public' })).key;
      const docs = await t.request('GET', '/v1/documents?limit=100', { key });
      const contact = docs.body.data.documents.find((d: { title: string }) => d.title === 'Contact us and opening hours');
      assert.ok(contact, docs.text);
      // Before the contact article, "when are you open?" was answered with the tracking FAQ ("open the order").
      for (const question of ['when are you open?', 'what are your opening hours?', 'where is your store?']) {
        const start = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
        const r = await t.request('POST', `/v1/chat/conversations/${start.body.data.conversation.id}/messages`, { key: publicKey, body: { content: question } });
        assert.equal(r.status, 200, r.text);
        const reply = r.body.data.messages.at(-1);
        assert.equal(reply.sources?.[0], contact.id, `${question}: ${reply.content}`);
      }
    });

    test('runs started together load the samples once: the check and the inserts share one locked transaction', async () => {
      const { accountId } = await t.account();
      // Open the pool's connections first: otherwise each run waits for a new connection and they run one by one.
      await Promise.all([1, 2, 3, 4, 5].map(() => sql`select 1`.execute(t.ctx.db)));
      const runs = await Promise.all([1, 2, 3, 4].map(() => runDemo(t.ctx, accountId)));
      assert.deepEqual(runs.map((r) => r.documents + r.faqs).sort(), [0, 0, 0, 11]);
      assert.equal(await count('documents', accountId), 5);
      assert.equal(await count('faqs', accountId), 6);
    });
  });
}
