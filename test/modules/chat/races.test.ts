import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import type { FakeClock } from '../../../src/lib/clock.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

/**
 * Requests that race on one conversation or one slug, fired in parallel at a real server: on PostgreSQL they
 * run in concurrent transactions (READ COMMITTED), on SQLite one after another.
 */
for (const dialect of DIALECTS) {
  describe(`concurrent requests (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: true });

    const start = async () => {
      const r = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: {} });
      assert.equal(r.status, 201, r.text);
      return r.body.data.conversation.id as string;
    };
    const escalationEvents = async (conversationId: string) =>
      (await t.ctx.db.selectFrom('events').select('payload').where('account_id', '=', t.accountId).where('kind', '=', 'escalation').execute())
        .map((e) => JSON.parse(e.payload).data)
        .filter((d) => d.conversationId === conversationId);
    const parallel = <T>(n: number, f: (i: number) => Promise<T>) => Promise.all(Array.from({ length: n }, (_, i) => f(i)));

    test('parallel escalations of one conversation: one escalation, one event', async () => {
      const id = await start();
      const rs = await parallel(10, (i) => t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key: t.key, body: { reason: `r${i}` } }));
      for (const r of rs) assert.equal(r.status, 200, r.text);
      const evs = await escalationEvents(id);
      assert.equal(evs.length, 1, `${evs.length} escalation events`);
      const c = await t.ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(c.status, 'escalated');
      assert.equal(c.escalation_reason, evs[0].reason, 'the stored reason is the one the event carried');
    });

    test('parallel "talk to a person" messages: one escalation event, the others are told it is already done', async () => {
      const id = await start();
      const rs = await parallel(6, () => t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: 'talk to a person please' } }));
      for (const r of rs) assert.equal(r.status, 200, r.text);
      assert.equal((await escalationEvents(id)).length, 1);
      const replies = rs.map((r) => r.body.data.messages[1].content as string);
      assert.equal(replies.filter((c) => c.startsWith("Of course. I'm passing")).length, 1, replies.join('\n'));
      assert.equal(replies.filter((c) => c.startsWith('A person from our team has already been asked')).length, 5, replies.join('\n'));
    });

    test('parallel unanswered questions escalate with no_answer, once', async () => {
      const id = await start();
      const rs = await parallel(10, (i) => t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: `what is the capital of peru ${i}?` } }));
      for (const r of rs) assert.equal(r.status, 200, r.text);
      const c = await t.ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      assert.equal(c.status, 'escalated');
      assert.equal(c.escalation_reason, 'no_answer');
      assert.equal(c.message_count, 21);
      const evs = await escalationEvents(id);
      assert.equal(evs.length, 1);
      assert.equal(evs[0].reason, 'no_answer');
    });

    test('parallel messages in one millisecond keep their question/reply pairs and positions', async () => {
      const id = await start();
      const rs = await parallel(8, (i) => t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: `hello number ${i}` } }));
      for (const r of rs) assert.equal(r.status, 200, r.text);
      const got = await t.request('GET', `/v1/chat/conversations/${id}`, { key: t.key });
      const msgs = got.body.data.conversation.messages as Array<{ id: string; role: string; content: string }>;
      assert.equal(msgs.length, 17);
      assert.equal(msgs[0]!.role, 'assistant');
      for (let i = 1; i < msgs.length; i += 2) {
        assert.equal(msgs[i]!.role, 'customer');
        assert.equal(msgs[i + 1]!.role, 'assistant');
        const r = rs.find((x) => x.body.data.messages[0].id === msgs[i]!.id)!;
        assert.equal(r.body.data.messages[1].id, msgs[i + 1]!.id, 'each reply right after its question');
      }
      const seqs = await t.ctx.db.selectFrom('messages').select('seq').where('conversation_id', '=', id).orderBy('seq').execute();
      assert.deepEqual(seqs.map((s) => s.seq), Array.from({ length: 17 }, (_, i) => i + 1));
    });

    test('a transcript written in one millisecond keeps its order (chat and conversations API)', async () => {
      (t.clock as FakeClock).advance(60_000);
      const id = await start();
      const sent: string[] = [];
      for (let i = 0; i < 6; i++) {
        const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: `question ${i} about nothing` } });
        assert.equal(r.status, 200, r.text);
        sent.push(...r.body.data.messages.map((m: { id: string }) => m.id));
      }
      const chat = await t.request('GET', `/v1/chat/conversations/${id}`, { key: t.key });
      const api = await t.request('GET', `/v1/conversations/${id}`, { key: t.key });
      for (const view of [chat.body.data.conversation.messages, api.body.data.messages]) {
        assert.equal(new Set(view.map((m: { timestamp: string }) => m.timestamp)).size, 1, 'one millisecond');
        assert.deepEqual(view.slice(1).map((m: { id: string }) => m.id), sent);
        assert.deepEqual(view.slice(1).map((m: { role: string }) => m.role), Array.from({ length: 12 }, (_, i) => (i % 2 ? 'assistant' : 'customer')));
      }
      // The ids themselves do not give that order (random within a millisecond): without seq it would be lost.
      const byId = [...sent].sort();
      assert.notDeepEqual(byId, sent);
    });

    test('end racing in-flight messages decides from the row it locked: the event, outcome and tags match the stored conversation', async () => {
      const faq = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'How long do refunds take?', answer: 'Refunds take 5 to 10 business days.', category: 'returns', status: 'approved' } });
      assert.equal(faq.status, 201, faq.text);
      const endedEvent = async (conversationId: string) =>
        (await t.ctx.db.selectFrom('events').select('payload').where('account_id', '=', t.accountId).where('kind', '=', 'conversation.ended').execute())
          .map((e) => JSON.parse(e.payload).data)
          .filter((d) => d.conversationId === conversationId);
      for (let round = 0; round < 6; round++) {
        const id = await start();
        const sends = parallel(6, () => t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: 'how long do refunds take?' } }));
        // Let the sends reach their transactions, then end while some are still in flight.
        await new Promise((r) => setTimeout(r, 5 + round * 4));
        const ended = await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: t.key });
        assert.equal(ended.status, 200, ended.text);
        for (const r of await sends) assert.ok(r.status === 200 || r.status === 400, r.text);
        const got = await t.request('GET', `/v1/conversations/${id}`, { key: t.key });
        const conv = got.body.data;
        const evs = await endedEvent(id);
        assert.equal(evs.length, 1);
        const answered = conv.messages.some((m: { role: string; sources?: string[] }) => m.role === 'assistant' && (m.sources ?? []).length > 0);
        assert.equal(evs[0].messageCount, conv.messageCount, `round ${round}: event messageCount`);
        assert.equal(conv.messageCount, conv.messages.length);
        assert.equal(conv.outcome, answered ? 'resolved' : 'unresolved', `round ${round}: outcome`);
        assert.equal(evs[0].status, conv.outcome);
        assert.deepEqual(evs[0].tags, conv.tags);
        const asked = conv.messages.some((m: { role: string }) => m.role === 'customer');
        assert.equal(conv.tags.includes('unanswered'), asked && !answered, `round ${round}: tags ${conv.tags}`);
        assert.equal(conv.tags.includes('returns'), answered, `round ${round}: tags ${conv.tags}`);
      }
    });

    test('parallel workflow creates with one slug: one 201, the others the 400 naming body.slug', async () => {
      const body = { slug: 'dup-slug', name: 'D', triggers: ['refund now'], fields: [] };
      const rs = await parallel(10, () => t.request('POST', '/v1/workflows', { key: t.key, body }));
      assert.deepEqual(rs.map((r) => r.status).sort(), [201, 400, 400, 400, 400, 400, 400, 400, 400, 400], rs.map((r) => r.text).join('\n'));
      const winner = rs.find((r) => r.status === 201)!.body.data.id;
      for (const r of rs.filter((x) => x.status === 400)) {
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.equal(r.body.error.message, `body.slug "dup-slug" is already used by workflow ${winner}`);
      }
    });

    test('parallel workflow updates to one slug: one 200, the others the 400 naming body.slug', async () => {
      const ids = await parallel(8, async (i) => {
        const r = await t.request('POST', '/v1/workflows', { key: t.key, body: { slug: `own-${i}`, name: 'W', triggers: ['book a demo'], fields: [] } });
        assert.equal(r.status, 201, r.text);
        return r.body.data.id as string;
      });
      const rs = await parallel(8, (i) => t.request('PUT', `/v1/workflows/${ids[i]}`, { key: t.key, body: { slug: 'taken-slug' } }));
      assert.deepEqual(rs.map((r) => r.status).sort(), [200, 400, 400, 400, 400, 400, 400, 400], rs.map((r) => r.text).join('\n'));
      const winner = rs.find((r) => r.status === 200)!.body.data.id;
      for (const r of rs.filter((x) => x.status === 400)) assert.equal(r.body.error.message, `body.slug "taken-slug" is already used by workflow ${winner}`);
    });
  });
}
