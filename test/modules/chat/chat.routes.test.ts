import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.js';
import type { FakeClock } from '../../../src/lib/clock.js';
import { chatRepository } from '../../../src/modules/chat/chat.repository.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS, insertionOrder } from '../../helpers/db.js';

async function eventsOf(t: TestApp, accountId: string) {
  const rows = await t.ctx.db.selectFrom('events').selectAll().where('account_id', '=', accountId).orderBy(insertionOrder(t.database.dialect)).execute();
  return rows.map((r) => JSON.parse(r.payload) as { event: string; timestamp: string; data: any });
}

for (const dialect of DIALECTS) {
  describe(`chat channel (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: true, env: { CONVERSATION_IDLE_TIMEOUT: '30m' } });
    let publicKey: string;
    before(async () => {
      await runDemo(t.ctx, t.accountId);
      publicKey = (await t.ctx.services.accounts.createKey({ accountId: t.accountId, type: 'public' })).key;
      // A draft document and a pending FAQ the assistant must never use.
      await t.ctx.services.documents.create(t.accountId, { title: 'Secret loyalty program', content: 'Members of the Platinum Pedal club get 40% off.', status: 'draft' });
      await t.ctx.services.faqs.create(t.accountId, { question: 'Is there a Platinum Pedal club?', answer: 'Yes, 40% off.', category: 'loyalty', status: 'pending' });
    });

    test('start answers 201 with the conversation and the greeting, and emits started + message', async () => {
      const r = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: { customerId: 'cus_1', customerLabel: 'Ada', metadata: { page: '/pricing' } } });
      assert.equal(r.status, 201, r.text);
      const { conversation, messages } = r.body.data;
      assert.match(conversation.id, /^conv_/);
      assert.equal(conversation.customerId, 'cus_1');
      assert.equal(conversation.status, 'active');
      assert.equal(conversation.endedAt, null);
      assert.equal(messages.length, 1);
      assert.equal(messages[0].role, 'assistant');
      assert.equal(messages[0].content, "Hi! I'm the virtual assistant. How can I help you today?");
      const evs = (await eventsOf(t, t.accountId)).filter((e) => e.data.conversationId === conversation.id);
      assert.deepEqual(evs.map((e) => e.event), ['conversation.started', 'conversation.message']);
      assert.deepEqual(evs[0]!.data, { conversationId: conversation.id, customerId: 'cus_1', customerLabel: 'Ada', persona: 'Assistant', metadata: { page: '/pricing' } });
    });

    test('a question is answered from active knowledge with sources; events for both messages', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      const id = s.body.data.conversation.id;
      const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'How long do refunds take to get my money back?' } });
      assert.equal(r.status, 200, r.text);
      const [customer, assistant] = r.body.data.messages;
      assert.equal(customer.role, 'customer');
      assert.equal(assistant.role, 'assistant');
      assert.ok(assistant.sources.length >= 1, 'cites a source');
      assert.match(assistant.content, /5 to 10 business days/);
      assert.equal(r.body.data.status, 'active');
      const msgs = (await eventsOf(t, t.accountId)).filter((e) => e.event === 'conversation.message' && e.data.conversationId === id);
      assert.deepEqual(msgs.map((e) => e.data.role), ['assistant', 'customer', 'assistant']);
      assert.equal(msgs[1]!.data.content, 'How long do refunds take to get my money back?');
    });

    test('never cites drafts or pending FAQs; abstains and then escalates with no_answer', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: { customerEmail: 'ada@example.com' } });
      const id = s.body.data.conversation.id;
      const r1 = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'What discount does the Platinum Pedal club give?' } });
      assert.deepEqual(r1.body.data.messages[1].sources, []);
      assert.match(r1.body.data.messages[1].content, /don't know|person/i);
      assert.equal(r1.body.data.status, 'active', 'one unanswered question does not escalate');
      const r2 = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'Do you sponsor amateur racing teams?' } });
      assert.deepEqual(r2.body.data.messages[1].sources, []);
      assert.equal(r2.body.data.status, 'escalated', 'the second one does, and the answer says so');
      const g = await t.request('GET', `/v1/chat/conversations/${id}`, { key: publicKey });
      assert.equal(g.body.data.conversation.status, 'escalated');
      assert.equal(g.body.data.conversation.escalationReason, 'no_answer');
      const esc = (await eventsOf(t, t.accountId)).filter((e) => e.event === 'escalation' && e.data.conversationId === id);
      assert.equal(esc.length, 1);
      assert.equal(esc[0]!.data.reason, 'no_answer');
      assert.equal(esc[0]!.data.customerEmail, 'ada@example.com');
      assert.equal(esc[0]!.data.lastMessage, 'Do you sponsor amateur racing teams?');
      assert.equal(esc[0]!.data.transcript.length, 5);
    });

    test('asking for a human escalates with customer_request and asks for an email; an email in reply is captured', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      const id = s.body.data.conversation.id;
      const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'can I talk to a real person please' } });
      assert.match(r.body.data.messages[1].content, /email/i);
      assert.equal(r.body.data.status, 'escalated');
      const g = await t.request('GET', `/v1/chat/conversations/${id}`, { key: publicKey });
      assert.equal(g.body.data.conversation.status, 'escalated');
      assert.equal(g.body.data.conversation.escalationReason, 'customer_request');
      const r2 = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'sure, it is bob@example.org' } });
      assert.match(r2.body.data.messages[1].content, /bob@example\.org/);
      assert.equal(r2.body.data.status, 'escalated', 'a message after the escalation');
      const evs = (await eventsOf(t, t.accountId)).filter((e) => e.data.conversationId === id);
      assert.equal(evs.filter((e) => e.event === 'escalation').length, 1);
      const sub = evs.find((e) => e.event === 'escalation.submitted');
      assert.equal(sub?.data.customerEmail, 'bob@example.org');
    });

    test("a contact name replaces only a made-up label, never the one the integration gave", async () => {
      const label = async (start: Record<string, string>) => {
        const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: start });
        const id = s.body.data.conversation.id;
        const c = await t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: publicKey, body: { email: 'ada@example.com', name: 'Ada L' } });
        assert.equal(c.status, 200, c.text);
        const events = (await eventsOf(t, t.accountId)).filter((e) => e.data.conversationId === id && e.event === 'escalation.submitted');
        assert.equal(events[0]?.data.customerLabel, c.body.data.conversation.customerLabel);
        return [s.body.data.conversation.customerLabel, c.body.data.conversation.customerLabel];
      };
      assert.deepEqual(await label({ customerId: 'cus_ada', customerLabel: 'Ada (VIP, account 42)' }), ['Ada (VIP, account 42)', 'Ada (VIP, account 42)']);
      assert.deepEqual(await label({ customerEmail: 'old@example.com' }), ['old@example.com', 'Ada L']);
      const [visitor, named] = await label({});
      assert.match(visitor, /^Visitor \S{6}$/);
      assert.equal(named, 'Ada L');
    });

    test('contact, escalate (idempotent) and end; ended conversations refuse messages', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: { customerId: 'cus_9' } });
      const id = s.body.data.conversation.id;
      await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'Which payment methods do you accept?' } });
      const c = await t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: publicKey, body: { email: 'eve@example.com', name: 'Eve', phone: '+1 555 0100' } });
      assert.equal(c.status, 200, c.text);
      assert.equal(c.body.data.conversation.customerEmail, 'eve@example.com');
      assert.equal(c.body.data.conversation.customerLabel, 'Eve', 'the name replaces a label made from the customer id');
      const bad = await t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: publicKey, body: { email: 'not-an-email' } });
      assert.equal(bad.status, 400);
      assert.match(bad.body.error.message, /body\.email/);
      const e1 = await t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key: publicKey, body: { reason: 'billing_dispute' } });
      assert.equal(e1.body.data.conversation.status, 'escalated');
      await t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key: publicKey, body: {} });
      (t.clock as FakeClock).advance(95_000);
      const end = await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: publicKey });
      assert.equal(end.status, 200, end.text);
      assert.equal(end.body.data.conversation.status, 'escalated');
      assert.ok(end.body.data.conversation.endedAt);
      const again = await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: publicKey });
      assert.equal(again.status, 200);
      const send = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'hello?' } });
      assert.equal(send.status, 400);
      assert.equal(send.body.error.code, 'INVALID_REQUEST');
      const evs = (await eventsOf(t, t.accountId)).filter((e) => e.data.conversationId === id);
      assert.equal(evs.filter((e) => e.event === 'escalation').length, 1);
      assert.equal(evs.find((e) => e.event === 'escalation')!.data.reason, 'billing_dispute');
      const ended = evs.filter((e) => e.event === 'conversation.ended');
      assert.equal(ended.length, 1);
      assert.equal(ended[0]!.data.status, 'escalated');
      assert.equal(ended[0]!.data.messageCount, 3);
      assert.equal(ended[0]!.data.duration, 95);
      assert.ok(ended[0]!.data.tags.includes('escalated'));
    });

    test('a resolved conversation ends as resolved with a topic from what it cited', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      const id = s.body.data.conversation.id;
      await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'how do I track my order' } });
      const end = await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: publicKey });
      assert.equal(end.body.data.conversation.status, 'ended');
      assert.equal(end.body.data.conversation.outcome, 'resolved');
      assert.equal(end.body.data.conversation.topic, 'shipping');
      assert.deepEqual(end.body.data.conversation.tags, ['shipping']);
    });

    test('the worker ends idle conversations', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      const id = s.body.data.conversation.id;
      (t.clock as FakeClock).advance(31 * 60_000);
      const sweeper = workerTasks(t.ctx).find((x) => x.name === 'conversation-idle-sweeper')!;
      await sweeper.run(new AbortController().signal);
      const g = await t.request('GET', `/v1/chat/conversations/${id}`, { key: publicKey });
      assert.equal(g.body.data.conversation.status, 'ended');
      assert.equal(g.body.data.conversation.outcome, 'unresolved');
    });

    test('an idle-ended conversation lasted until its last message; endedAt is when the worker ended it', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      const id = s.body.data.conversation.id;
      const clock = t.clock as FakeClock;
      clock.advance(125_000);
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'how do I track my order' } })).status, 200);
      clock.advance(31 * 60_000);
      const sweptAt = clock.now();
      const sweeper = workerTasks(t.ctx).find((x) => x.name === 'conversation-idle-sweeper')!;
      await sweeper.run(new AbortController().signal);
      const g = await t.request('GET', `/v1/chat/conversations/${id}`, { key: publicKey });
      assert.equal(g.body.data.conversation.status, 'ended');
      assert.equal(g.body.data.conversation.endedAt, new Date(sweptAt).toISOString());
      const ended = await t.ctx.db.selectFrom('events').select('payload').where('kind', '=', 'conversation.ended').execute();
      const mine = ended.map((e) => (JSON.parse(e.payload) as { data: { conversationId: string; duration: number } }).data).filter((d) => d.conversationId === id);
      assert.equal(mine.length, 1);
      assert.equal(mine[0]!.duration, 125, 'from the start to the last message, without the idle wait');
    });

    test('a conversation a message reached after the sweeper listed it stays open', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      const id = s.body.data.conversation.id;
      (t.clock as FakeClock).advance(31 * 60_000);
      // The sweeper read the idle list at this moment…
      const before = t.clock.now() - 30 * 60_000;
      // …then the customer wrote
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'still there?' } })).status, 200);
      const accountId = (await t.ctx.db.selectFrom('conversations').select('account_id').where('id', '=', id).executeTakeFirstOrThrow()).account_id;
      await t.ctx.services.chat.endIfIdle(accountId, id, before);
      const g = await t.request('GET', `/v1/chat/conversations/${id}`, { key: publicKey });
      assert.equal(g.body.data.conversation.status, 'active');
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'hello?' } })).status, 200);
      // The UPDATE itself carries the condition (a concurrent commit on PostgreSQL is re-checked there)
      const updated = await chatRepository.updateOpen(t.ctx.db, accountId, id, { status: 'ended', ended_at: t.clock.now() }, { idleBefore: before });
      assert.equal(updated, undefined);
    });

    test('validation, scopes and isolation', async () => {
      const long = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: { metadata: { blob: 'x'.repeat(17_000) } } });
      assert.equal(long.status, 400);
      assert.match(long.body.error.message, /metadata/);
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      const id = s.body.data.conversation.id;
      const empty = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: '' } });
      assert.equal(empty.status, 400);
      const tooLong = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: publicKey, body: { content: 'x'.repeat(4001) } });
      assert.equal(tooLong.status, 400);
      const docs = await t.request('GET', '/v1/documents', { key: publicKey });
      assert.equal(docs.status, 403);
      const other = await t.account();
      const foreign = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: other.key, body: { content: 'hi' } });
      assert.equal(foreign.status, 404);
      const viaServer = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: {} });
      assert.equal(viaServer.status, 201);
    });

    test('persona settings drive the greeting', async () => {
      const p = await t.request('PUT', '/v1/settings/assistant', { key: t.key, body: { name: 'Spoke', greeting: 'Hey, {name} here!' } });
      assert.equal(p.status, 200, p.text);
      assert.equal(p.body.data.name, 'Spoke');
      const s = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      assert.equal(s.body.data.messages[0].content, 'Hey, Spoke here!');
      assert.equal(s.body.data.conversation.persona, 'Spoke');
      await t.request('PUT', '/v1/settings/assistant', { key: t.key, body: { name: 'Assistant', greeting: "Hi! I'm {name}, the virtual assistant. How can I help you today?" } });
      // The default persona has no name it chose: it does not introduce itself as "Assistant, the virtual assistant".
      const plain = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {} });
      assert.equal(plain.body.data.messages[0].content, "Hi! I'm the virtual assistant. How can I help you today?");
      assert.equal(plain.body.data.conversation.persona, 'Assistant');
      const hello = await t.request('POST', `/v1/chat/conversations/${plain.body.data.conversation.id}/messages`, { key: publicKey, body: { content: 'hello' } });
      assert.equal(hello.body.data.messages[1].content, 'Hello! How can I help you today?');
    });

    test('persona settings refuse blank values and a name or tone of several lines, naming the field; nothing changes', async () => {
      const before = (await t.request('GET', '/v1/settings/assistant', { key: t.key })).body.data;
      for (const [body, field] of [
        [{ name: '   ' }, 'name'],
        [{ greeting: ' \u200b ' }, 'greeting'],
        [{ tone: '\t' }, 'tone'],
        [{ name: 'Ze\nd' }, 'name'],
        [{ name: 'Zed', tone: 'warm\nand brief' }, 'tone'],
      ] as const) {
        const r = await t.request('PUT', '/v1/settings/assistant', { key: t.key, body });
        assert.equal(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, new RegExp(`^body\\.${field}`));
      }
      assert.deepEqual((await t.request('GET', '/v1/settings/assistant', { key: t.key })).body.data, before);
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`chat bodies that may be left out (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('start and escalate accept no body at all, or an empty JSON body, as {}', async () => {
      const bare = await t.request('POST', '/v1/chat/conversations', { key: t.key });
      assert.equal(bare.status, 201, bare.text);
      const empty = await t.request('POST', '/v1/chat/conversations', { key: t.key, raw: '', headers: { 'content-type': 'application/json' } });
      assert.equal(empty.status, 201, empty.text);
      const esc = await t.request('POST', `/v1/chat/conversations/${bare.body.data.conversation.id}/escalate`, { key: t.key });
      assert.equal(esc.status, 200, esc.text);
      assert.equal(esc.body.data.conversation.escalationReason, 'customer_request');
    });

    test('a body sent with the wrong Content-Type is still refused, and a required body still required', async () => {
      const wrong = await t.request('POST', '/v1/chat/conversations', { key: t.key, raw: '{"customerId":"x"}', headers: { 'content-type': 'text/plain' } });
      assert.equal(wrong.status, 400);
      const s = await t.request('POST', '/v1/chat/conversations', { key: t.key });
      const noContent = await t.request('POST', `/v1/chat/conversations/${s.body.data.conversation.id}/messages`, { key: t.key });
      assert.equal(noContent.status, 400);
      assert.equal(noContent.body.error.code, 'INVALID_REQUEST');
    });
  });
}

for (const dialect of DIALECTS) {
  describe(`concurrent messages to one conversation (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('ten sends at once: every message stored and counted, none lost', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: t.key });
      const id = s.body.data.conversation.id;
      const sent = await Promise.all(
        Array.from({ length: 10 }, (_, i) => t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: `question number ${i} about shipping` } })),
      );
      assert.ok(sent.every((r) => r.status === 200));
      const g = await t.request('GET', `/v1/conversations/${id}`, { key: t.key });
      assert.equal(g.body.data.messages.length, 21);
      assert.equal(g.body.data.messageCount, 21);
    });
  });
}
