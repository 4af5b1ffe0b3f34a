import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS, insertionOrder } from '../../helpers/db.js';

/** Edge cases of the chat channel found by the chat audit (invisible text, blanks, bodies, labels, contact). */
for (const dialect of DIALECTS) {
  describe(`chat channel edges (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: true });
    before(async () => {
      await runDemo(t.ctx, t.accountId);
    });

    const start = async (body: Record<string, unknown> = {}) => {
      const r = await t.request('POST', '/v1/chat/conversations', { key: t.key, body });
      assert.equal(r.status, 201, r.text);
      return r.body.data as { conversation: any; messages: any[] };
    };
    const send = (id: string, content: string) => t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content } });
    const events = async (kind: string, conversationId: string) =>
      (await t.ctx.db.selectFrom('events').select('payload').where('account_id', '=', t.accountId).where('kind', '=', kind).orderBy(insertionOrder(t.database.dialect)).execute())
        .map((e) => JSON.parse(e.payload).data)
        .filter((d) => d.conversationId === conversationId);
    const refused = (r: { status: number; text: string; body: any }, message: string) => {
      assert.equal(r.status, 400, r.text);
      assert.equal(r.body.error.code, 'INVALID_REQUEST');
      assert.equal(r.body.error.message, message);
    };

    test('a message of only zero-width or invisible characters is refused like a blank one, and counts for nothing', async () => {
      const { conversation } = await start();
      for (const content of ['\u200b', '\u200b\u200b\u2060\ufeff', '\u200c\u200d', ' \u200b\n\t\u00a0\u3000', '\u00ad', '\ufe0f']) {
        refused(await send(conversation.id, content), 'body.content must not be blank');
      }
      const g = await t.request('GET', `/v1/chat/conversations/${conversation.id}`, { key: t.key });
      assert.equal(g.body.data.conversation.status, 'active');
      assert.equal(g.body.data.conversation.messageCount, 1);
      // Visible text with a zero-width character in it is a message.
      const ok = await send(conversation.id, 'hello\u200b');
      assert.equal(ok.status, 200, ok.text);
    });

    test('every "must not be blank" field refuses zero-width-only text (documents, FAQs, workflows)', async () => {
      refused(await t.request('POST', '/v1/documents', { key: t.key, body: { title: '\u200b', content: 'Some content.' } }), 'body.title must not be blank');
      refused(await t.request('POST', '/v1/faqs', { key: t.key, body: { question: '\u2060\ufeff', answer: 'a', category: 'c' } }), 'body.question must not be blank');
      const w = await t.request('POST', '/v1/workflows', { key: t.key, body: { slug: 'zw', name: '\u200d', triggers: ['book a demo'], fields: [] } });
      refused(w, 'body.name must not be blank');
    });

    test('an email address in the message that asks for a person is the contact address: the escalation carries it, no email is asked for', async () => {
      const { conversation } = await start({ customerId: 'cus_e' });
      const r = await send(conversation.id, 'I want to speak to a human, my email is jo@acme.test');
      assert.equal(r.status, 200, r.text);
      const reply = r.body.data.messages[1].content as string;
      assert.equal(reply, "Of course. I'm passing this conversation to a person from our team. They will reply to jo@acme.test.");
      const [esc, ...more] = await events('escalation', conversation.id);
      assert.equal(more.length, 0);
      assert.equal(esc.customerEmail, 'jo@acme.test');
      assert.equal(esc.reason, 'customer_request');
      const g = await t.request('GET', `/v1/chat/conversations/${conversation.id}`, { key: t.key });
      assert.equal(g.body.data.conversation.customerEmail, 'jo@acme.test');
    });

    test('"a person please, jo@acme.test" (docs/chat.md) escalates with that address; "are you still there?" after it is not an unanswered question', async () => {
      const { conversation } = await start({ customerId: 'cus_p' });
      const id = conversation.id;
      const r = await send(id, 'a person please, jo@acme.test');
      assert.equal(r.body.data.messages[1].content, "Of course. I'm passing this conversation to a person from our team. They will reply to jo@acme.test.");
      const [esc] = await events('escalation', id);
      assert.equal(esc.customerEmail, 'jo@acme.test');
      assert.equal(esc.reason, 'customer_request');
      const still = await send(id, 'are you still there?');
      assert.equal(still.body.data.messages[1].content, 'A person from our team has already been asked to take over this conversation. They will reply to jo@acme.test.');
      const ended = await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: t.key });
      assert.deepEqual(ended.body.data.conversation.tags, ['escalated'], ended.text);
    });

    test('after escalating: no offer of a person, and an email (a correction too) is the contact address, not a question', async () => {
      const { conversation } = await start();
      const id = conversation.id;
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key: t.key })).status, 200);
      const unknown = await send(id, 'do you deliver to mars?');
      const text = unknown.body.data.messages[1].content as string;
      assert.doesNotMatch(text, /Would you like me to connect you/);
      assert.match(text, /already been asked to take over this conversation\. What's the best email address to reach you\?$/);
      // Not a question: no "I don't know the answer to that".
      for (const m of ['yes', 'are you still there?']) {
        const r = await send(id, m);
        assert.equal(r.body.data.messages[1].content, "A person from our team has already been asked to take over this conversation. What's the best email address to reach you?", m);
      }

      const first = await send(id, 'it is jo@acme.test');
      assert.equal(first.body.data.messages[1].content, 'Thank you — a person from our team will reach you at jo@acme.test.');
      const corrected = await send(id, 'actually use other@acme.test');
      assert.equal(corrected.body.data.messages[1].content, 'Thank you — a person from our team will reach you at other@acme.test.');
      const again = await send(id, 'other@acme.test');
      assert.equal(again.body.data.messages[1].content, 'Thank you — a person from our team will reach you at other@acme.test.');
      const subs = await events('escalation.submitted', id);
      assert.deepEqual(subs.map((e) => e.customerEmail), ['jo@acme.test', 'other@acme.test'], 'the same address again emits nothing');
      assert.ok(subs.every((e) => e.escalated === true));

      const later = await send(id, 'do you deliver to the moon?');
      assert.match(later.body.data.messages[1].content, /already been asked to take over this conversation\. They will reply to other@acme\.test\.$/);
      const row = await t.ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(row.customer_email, 'other@acme.test');
      assert.equal(row.unanswered_streak, 3, 'the three messages without an answer count; "are you still there?" (small talk) and the three email messages do not');
      assert.equal((await events('escalation', id)).length, 1);
    });

    test("an email address is never looked up: its domain (the demo shop's own, in its contact article) cites nothing", async () => {
      // Escalated, then the address alone: thanked for, no article (the contact article gives support@example.com).
      const { conversation } = await start();
      const id = conversation.id;
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key: t.key })).status, 200);
      for (const content of ['jo@example.com', 'my email is jo@example.com']) {
        const r = await send(id, content);
        assert.equal(r.body.data.messages[1].content, 'Thank you — a person from our team will reach you at jo@example.com.', content);
        assert.deepEqual(r.body.data.messages[1].sources ?? [], [], content);
      }
      // An address with a question: the question is answered (from the shipping article), the address only thanked for.
      const both = await send(id, 'jo2@example.com - how long does shipping take?');
      const reply = both.body.data.messages[1];
      assert.match(reply.content, /^Thank you — a person from our team will reach you at jo2@example\.com\.\n\nFrom our article "Shipping options and delivery times"/);
      const titles = await t.ctx.db.selectFrom('documents').select(['id', 'title']).where('account_id', '=', t.accountId).execute();
      assert.equal(titles.find((d) => d.id === reply.sources[0])?.title, 'Shipping options and delivery times');
      assert.ok(reply.sources.every((s: string) => titles.find((d) => d.id === s)?.title !== 'Contact us and opening hours'), JSON.stringify(reply.sources));

      // Not escalated: a message that only gives an address asks to be reached there, a request for a person.
      const other = (await start({ customerId: 'cus_addr' })).conversation.id;
      const r = await send(other, 'my email is jo@example.com');
      assert.equal(r.body.data.messages[1].content, "Of course. I'm passing this conversation to a person from our team. They will reply to jo@example.com.");
      const [esc] = await events('escalation', other);
      assert.equal(esc.reason, 'customer_request');
      assert.equal(esc.customerEmail, 'jo@example.com');
    });

    test('the same reply twice in a row is quoted from or pointed to, not repeated; "this is useless" is apologised for with a person offered, twice escalates', async () => {
      const { conversation } = await start();
      const id = conversation.id;
      const first = (await send(id, 'where is my order')).body.data.messages[1];
      assert.match(first.content, /^Use the tracking link in your shipping confirmation email, or open the order in your account\./);
      // Read with the previous question, it finds the same FAQ: pointed to, with the same source, a person offered.
      const again = (await send(id, "it says delivered but I don't have it")).body.data.messages[1];
      assert.deepEqual(again.sources, first.sources);
      assert.match(again.content, /^What I have on this is in my answer above, from our FAQ "[^"]+"\. If that doesn't answer your question, would you like me to connect you with a person from our team\?$/);
      // Not "you're welcome" or the same FAQ a third time.
      const useless = (await send(id, 'ugh this is useless')).body.data.messages[1];
      assert.equal(useless.content, "I'm sorry that didn't help. Would you like me to connect you with a person from our team?");
      assert.deepEqual(useless.sources ?? [], []);
      const accepted = await send(id, 'yes');
      assert.match(accepted.body.data.messages[1].content, /^Of course\. I'm passing this conversation to a person from our team\./);
      assert.equal((await events('escalation', id))[0]?.reason, 'customer_request');

      // The same passage again: the sentence of it the follow-up asks about.
      const shipping = (await start()).conversation.id;
      assert.match((await send(shipping, 'how much is shipping?')).body.data.messages[1].content, /^From our article "Shipping options and delivery times"/);
      const express = (await send(shipping, 'and express?')).body.data.messages[1];
      assert.equal(express.content, 'As in my answer above: Expedited shipping costs $14.95 and takes 2 business days.');
      assert.equal(express.sources.length, 1);

      // Two in a row without a yes: the unanswered streak escalates, and neither is a question for the rundowns.
      const other = (await start()).conversation.id;
      await send(other, 'how long does shipping take?');
      await send(other, "that's not what I asked");
      const second = (await send(other, 'still wrong')).body.data.messages[1];
      assert.match(second.content, /^I'm sorry I couldn't answer your questions\. I'm passing this conversation to a person from our team\./);
      assert.equal((await events('escalation', other))[0]?.reason, 'no_answer');
      const ended = await t.request('POST', `/v1/chat/conversations/${other}/end`, { key: t.key });
      const tags = ended.body.data.conversation.tags as string[];
      assert.ok(tags.includes('escalated') && !tags.includes('unanswered'), `no question went unanswered: ${tags.join(', ')}`);
    });

    test('blank customerId, customerLabel, persona and contact name, phone, message are refused naming the field', async () => {
      for (const [body, field] of [
        [{ customerId: '   ' }, 'customerId'],
        [{ customerLabel: ' \u00a0 ' }, 'customerLabel'],
        [{ persona: ' ' }, 'persona'],
        [{ customerId: 'cus_ok', persona: '\u200b' }, 'persona'],
      ] as const) {
        refused(await t.request('POST', '/v1/chat/conversations', { key: t.key, body }), `body.${field} must not be blank`);
      }
      const { conversation } = await start({ customerLabel: 'Ada' });
      for (const [extra, field] of [
        [{ name: '   ' }, 'name'],
        [{ phone: ' ' }, 'phone'],
        [{ message: '  \n' }, 'message'],
      ] as const) {
        refused(await t.request('POST', `/v1/chat/conversations/${conversation.id}/contact`, { key: t.key, body: { email: 'a@b.co', ...extra } }), `body.${field} must not be blank`);
      }
      const g = await t.request('GET', `/v1/chat/conversations/${conversation.id}`, { key: t.key });
      assert.equal(g.body.data.conversation.customerLabel, 'Ada', 'the label was not overwritten');
      assert.equal(g.body.data.conversation.customerEmail, null);
      assert.equal((await events('escalation.submitted', conversation.id)).length, 0);
      const ok = await t.request('POST', `/v1/chat/conversations/${conversation.id}/contact`, { key: t.key, body: { email: 'a@b.co', name: 'Ada L.', phone: '+1 555 0100', message: 'call me' } });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.body.data.conversation.customerLabel, 'Ada', 'a label given at start stays (docs/chat.md)');
    });

    test('end takes no fields: unknown ones are refused by name; no body, an empty body or {} end it', async () => {
      const { conversation } = await start();
      const path = `/v1/chat/conversations/${conversation.id}/end`;
      refused(await t.request('POST', path, { key: t.key, body: { foo: 1 } }), 'body.foo is not a known field');
      refused(await t.request('POST', path, { key: t.key, body: { reason: 'done' } }), 'body.reason is not a known field');
      refused(await t.request('POST', path, { key: t.key, body: [] }), 'body must be of type object');
      assert.equal((await t.request('GET', `/v1/chat/conversations/${conversation.id}`, { key: t.key })).body.data.conversation.endedAt, null, 'still open');
      const bare = await t.request('POST', path, { key: t.key });
      assert.equal(bare.status, 200, bare.text);
      assert.notEqual(bare.body.data.conversation.endedAt, null);
      for (const opts of [{ body: {} }, { raw: '', headers: { 'content-type': 'application/json' } }]) {
        const { conversation: c } = await start();
        const r = await t.request('POST', `/v1/chat/conversations/${c.id}/end`, { key: t.key, ...opts });
        assert.equal(r.status, 200, r.text);
        assert.notEqual(r.body.data.conversation.endedAt, null);
      }
    });

    test('a document titled in another script gives a tag and topic in that script; a title without letters gives the document id; "" never reaches /analytics/topics', async () => {
      const from = new Date(t.clock.now() - 1000).toISOString();
      const doc = async (title: string, content: string) => {
        const r = await t.request('POST', '/v1/documents', { key: t.key, body: { title, content, status: 'active' } });
        assert.equal(r.status, 201, r.text);
        return r.body.data.id as string;
      };
      await doc('Доставка в Нарнию', 'Unicorn courier delivery to Narnia takes twelve days and costs nothing for wardrobe members.');
      const emojiId = await doc('🚚 → 📦', 'Zeppelin freight to Atlantis departs every other Thursday from the harbour.');
      const cited = async (question: string) => {
        const { conversation } = await start();
        const r = await send(conversation.id, question);
        assert.ok(r.body.data.messages[1].sources.length > 0, r.text);
        const end = await t.request('POST', `/v1/chat/conversations/${conversation.id}/end`, { key: t.key });
        return end.body.data.conversation as { id: string; tags: string[]; topic: string };
      };
      const narnia = await cited('How long does unicorn courier delivery to Narnia take?');
      assert.deepEqual(narnia.tags, ['доставка-в-нарнию']);
      assert.equal(narnia.topic, 'доставка-в-нарнию');
      const [ended] = await events('conversation.ended', narnia.id);
      assert.deepEqual(ended.tags, ['доставка-в-нарнию']);
      const atlantis = await cited('When does the zeppelin freight to Atlantis depart?');
      assert.deepEqual(atlantis.tags, [emojiId]);
      assert.equal(atlantis.topic, emojiId);

      // A conversation stored with topic "" (ended before this fix) is left out of the topics.
      await t.ctx.db.updateTable('conversations').set({ topic: '' }).where('id', '=', atlantis.id).execute();
      const topics = await t.request('GET', `/v1/analytics/topics?from=${encodeURIComponent(from)}`, { key: t.key });
      assert.equal(topics.status, 200, topics.text);
      const names = topics.body.data.topics.map((x: { name: string }) => x.name);
      assert.ok(names.includes('доставка-в-нарнию'), names.join(','));
      assert.ok(!names.includes(''), names.join(','));
    });

    test('the unanswered tag is the rundown rule (no hand-off, small talk or contact details); topics skip them and markup', async () => {
      // Its own account, so its rundown holds only these conversations.
      const own = await t.account();
      await runDemo(t.ctx, own.accountId);
      const from = new Date(t.clock.now() - 1000).toISOString();
      const converse = async (...contents: string[]) => {
        const r0 = await t.request('POST', '/v1/chat/conversations', { key: own.key, body: {} });
        const id = r0.body.data.conversation.id as string;
        const sources: string[][] = [];
        for (const content of contents) {
          const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: own.key, body: { content } });
          assert.equal(r.status, 200, r.text);
          sources.push(r.body.data.messages[1].sources);
        }
        const end = await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: own.key });
        const c = end.body.data.conversation as { id: string; tags: string[]; topic: string | null; outcome: string };
        return { tags: c.tags, topic: c.topic, outcome: c.outcome, sources };
      };
      const human = await converse('I want to talk to a human');
      assert.deepEqual([human.tags, human.topic], [['escalated'], null]);
      // What a request for a person is about gives the topic; the request's own words never do.
      const aboutRefund = await converse('can I talk to a human about my refund please');
      assert.deepEqual([aboutRefund.tags, aboutRefund.topic], [['escalated'], 'refund']);
      const agentNow = await converse('AGENT!!! get me a real person now');
      assert.deepEqual([agentNow.tags, agentNow.topic], [['escalated'], null]);
      const smallTalk = await converse('hello', 'thanks');
      assert.deepEqual([smallTalk.tags, smallTalk.topic, smallTalk.outcome], [[], null, 'unresolved']);
      // Only an address: a request to be reached there (a person), never a question.
      const email = await converse('my email is jo@acme.test');
      assert.deepEqual([email.tags, email.topic], [['escalated'], null]);
      // Unstripped, "script" would be the most frequent word (four tags) and "alert" the next.
      const markup = await converse('<script>alert(1)</script><script>alert(2)</script> <b>saxophone</b>: saxophone reeds?');
      assert.deepEqual(markup.sources, [[]], 'precondition: nothing cited');
      assert.deepEqual([markup.tags, markup.topic], [['unanswered'], 'saxophone']);
      // One question answered and one not: the conversation has an unanswered question, as the rundown says.
      const mixed = await converse('How long do refunds take?', 'Do you sell saxophone reeds?');
      assert.ok(mixed.sources[0]!.length > 0 && mixed.sources[1]!.length === 0, 'precondition: first cited, second not');
      assert.deepEqual([mixed.tags, mixed.topic, mixed.outcome], [['returns', 'unanswered'], 'returns', 'resolved']);

      const rd = await t.request('POST', '/v1/rundowns', { key: own.key, body: { from, to: new Date(t.clock.now() + 1000).toISOString() } });
      assert.equal(rd.status, 201, rd.text);
      assert.equal(rd.body.data.figures.unansweredQuestions, 2);
      assert.deepEqual(rd.body.data.unanswered.map((u: { question: string }) => u.question).sort(), [
        '<script>alert(1)</script><script>alert(2)</script> <b>saxophone</b>: saxophone reeds?',
        'Do you sell saxophone reeds?',
      ]);
    });

    test('"yes please" to the offer of a person is a request for one; a yes without the offer is not', async () => {
      const { conversation } = await start({ customerId: 'cus_yes' });
      const q = await send(conversation.id, 'can I pay for my order with bitcoin or dogecoin from my hardware wallet?');
      assert.equal(q.status, 200, q.text);
      assert.match(q.body.data.messages[1].content, /Would you like me to connect you with a person/);
      const yes = await send(conversation.id, 'Yes please!');
      assert.equal(yes.status, 200, yes.text);
      assert.match(yes.body.data.messages[1].content, /^Of course\. I'm passing this conversation to a person/);
      const escalations = await events('escalation', conversation.id);
      assert.equal(escalations.length, 1);
      assert.equal(escalations[0].reason, 'customer_request');
      // The yes is not an unanswered question: not in the tags' count, nor a rundown's list.
      const ended = await t.request('POST', `/v1/chat/conversations/${conversation.id}/end`, { key: t.key });
      assert.equal(ended.status, 200, ended.text);

      // Without the offer just before it, a yes is an ordinary message.
      const other = await start({ customerId: 'cus_yes2' });
      const plain = await send(other.conversation.id, 'yes');
      assert.equal(plain.status, 200, plain.text);
      assert.equal((await events('escalation', other.conversation.id)).length, 0);
    });

    test('the reply reads the end of a long transcript: "yes please" after many answered turns still takes up the offer', async () => {
      const { conversation } = await start({ customerId: 'cus_long' });
      // Five answered exchanges (eleven messages with the greeting) before the offer: more than the turns the
      // reply reads, so reading the start of the transcript instead of its end would miss the offer.
      for (const q of ['How long do refunds take?', 'how do I track my order?', 'How long do refunds take?', 'how do I track my order?', 'How long do refunds take?']) {
        const r = await send(conversation.id, q);
        assert.equal(r.status, 200, r.text);
        assert.ok(r.body.data.messages[1].sources.length > 0, `precondition: "${q}" answered`);
      }
      const q = await send(conversation.id, 'can I pay for my order with bitcoin or dogecoin from my hardware wallet?');
      assert.match(q.body.data.messages[1].content, /Would you like me to connect you with a person/);
      const yes = await send(conversation.id, 'Yes please!');
      assert.match(yes.body.data.messages[1].content, /^Of course\. I'm passing this conversation to a person/);
      assert.equal((await events('escalation', conversation.id)).length, 1);
    });

    test('"no thanks" to the offer of a person declines it: no escalation, and it is not an unanswered question', async () => {
      const { conversation } = await start({ customerId: 'cus_no' });
      const id = conversation.id;
      const q = await send(id, 'can I pay for my order with bitcoin or dogecoin from my hardware wallet?');
      assert.match(q.body.data.messages[1].content, /Would you like me to connect you with a person/);
      const no = await send(id, "nope, I'm fine");
      assert.equal(no.status, 200, no.text);
      assert.equal(no.body.data.messages[1].content, 'No problem. Is there anything else I can help with?');
      assert.deepEqual(no.body.data.messages[1].sources, []);
      assert.equal((await events('escalation', id)).length, 0, 'declining is not a second unanswered question');
      const row = await t.ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(row.unanswered_streak, 1);
      // The next question the knowledge base cannot answer is the second in a row: a person is asked to take over.
      const again = await send(id, 'do you sell saxophone reeds?');
      assert.match(again.body.data.messages[1].content, /^I'm sorry I couldn't answer your questions/);
      assert.equal((await events('escalation', id))[0].reason, 'no_answer');
      // Without the offer just before it, "no" is an ordinary message.
      const other = await start({ customerId: 'cus_no2' });
      assert.notEqual((await send(other.conversation.id, 'no')).body.data.messages[1].content, 'No problem. Is there anything else I can help with?');
    });

    test('a message of only emoji or punctuation is asked about, and two of them do not escalate', async () => {
      const { conversation } = await start({ customerId: 'cus_emoji' });
      for (const m of ['😡😡😡', '???']) {
        const r = await send(conversation.id, m);
        assert.equal(r.status, 200, r.text);
        assert.equal(r.body.data.messages[1].content, 'Could you tell me a little more about what you need help with?');
      }
      assert.equal((await events('escalation', conversation.id)).length, 0);
      assert.equal((await send(conversation.id, '👍')).body.data.messages[1].content, "You're welcome! Is there anything else I can help with?");
    });

    test('a persona named at start speaks the greeting and the small talk of that conversation', async () => {
      const p = await t.request('PUT', '/v1/settings/assistant', { key: t.key, body: { name: 'Robin', greeting: 'Hey, {name} here.' } });
      assert.equal(p.status, 200, p.text);
      try {
        const zed = await start({ persona: 'Zed' });
        assert.equal(zed.conversation.persona, 'Zed');
        assert.equal(zed.messages[0].content, 'Hey, Zed here.');
        const hi = await send(zed.conversation.id, 'hello');
        assert.match(hi.body.data.messages[1].content, /I'm Zed\b/);
        assert.doesNotMatch(hi.body.data.messages[1].content, /Robin/);
        // A name is text: `$$` and `$&` are not replacement patterns ("Ca$h" greeted as "Ca$h", not "Cah").
        assert.equal((await start({ persona: 'Ca$$h $& Co' })).messages[0].content, 'Hey, Ca$$h $& Co here.');
        const plain = await start();
        assert.equal(plain.conversation.persona, 'Robin');
        assert.equal(plain.messages[0].content, 'Hey, Robin here.');
        assert.match((await send(plain.conversation.id, 'hello')).body.data.messages[1].content, /I'm Robin\b/);
      } finally {
        await t.request('PUT', '/v1/settings/assistant', { key: t.key, body: { name: 'Assistant', greeting: "Hi! I'm {name}, the virtual assistant. How can I help you today?" } });
      }
    });
  });
}
