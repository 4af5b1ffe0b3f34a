import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { useWebhookReceiver } from '../../helpers/webhooks.js';
import { assertVerifies, sleep, waitFor } from '../webhooks/delivery-helpers.js';

const SECRET = 'workflow-webhook-secret';
const REPLY = 'Happy to set up a demo! Our team will send the invite shortly.';

for (const dialect of DIALECTS) {
  describe(`workflows fire from the chat (${dialect})`, () => {
    const t = useTestApp(dialect);
    let demoId: string;
    before(async () => {
      await runDemo(t.ctx, t.accountId);
      const wf = await t.request('POST', '/v1/workflows', {
        key: t.key,
        body: {
          slug: 'book-demo',
          name: 'Book a demo',
          triggers: ['book a demo'],
          fields: [
            { key: 'email', type: 'email' },
            { key: 'company', type: 'text' },
            { key: 'seats', type: 'number' },
            { key: 'orderRef', type: 'pattern', pattern: 'ORD-(\\d+)' },
            { key: 'phone', type: 'phone' },
          ],
          reply: REPLY,
        },
      });
      assert.equal(wf.status, 201, wf.text);
      demoId = wf.body.data.id;
      // No reply of its own: the assistant answers as usual, the event still fires.
      const quiet = await t.request('POST', '/v1/workflows', { key: t.key, body: { slug: 'track', name: 'Track', triggers: ['track order'] } });
      assert.equal(quiet.status, 201, quiet.text);
    });
    const receiver = useWebhookReceiver(t, { secret: SECRET, events: ['workflow.triggered', 'conversation.message'] });

    const start = async (body: Record<string, unknown> = {}) => (await t.request('POST', '/v1/chat/conversations', { key: t.key, body })).body.data.conversation.id as string;
    const send = async (id: string, content: string) => {
      const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content } });
      assert.equal(r.status, 200, r.text);
      return r.body.data.messages[1] as { content: string; sources: string[] };
    };
    const fired = (id: string) =>
      receiver.received.map((r) => JSON.parse(r.body.toString('utf8'))).filter((b) => b.event === 'workflow.triggered' && b.data.conversationId === id);

    test('a matching message fires workflow.triggered once per conversation, with the fields found so far', async () => {
      const id = await start({ customerId: 'cus_9', customerEmail: 'known@acme.test' });
      await send(id, 'Hi! My company is Acme Ltd and we need 12 seats');
      const reply = await send(id, 'Could I book a demo? my work address is jo@acme.test, ref ORD-58213');
      assert.equal(reply.content, REPLY, "the workflow's reply answers the message");
      assert.deepEqual(reply.sources, []);

      const [ev] = await waitFor(() => (fired(id).length ? fired(id) : undefined), 'workflow.triggered');
      assert.deepEqual(ev.data, {
        workflowId: demoId,
        workflowSlug: 'book-demo',
        conversationId: id,
        customerId: 'cus_9',
        extracted: { email: 'jo@acme.test', company: 'Acme Ltd', seats: 12, orderRef: '58213' },
      });
      const delivery = receiver.received.find((r) => JSON.parse(r.body.toString('utf8')).event === 'workflow.triggered')!;
      await assertVerifies(delivery, SECRET);

      // The phrase again: answered again, not fired again
      assert.equal((await send(id, 'sorry, can I book a demo for next week instead?')).content, REPLY);
      await sleep(300);
      assert.equal(fired(id).length, 1);

      // A new conversation fires it again; the conversation's known email fills the field
      const id2 = await start({ customerId: 'cus_10', customerEmail: 'known@acme.test' });
      await send(id2, 'book a demo please');
      const [ev2] = await waitFor(() => (fired(id2).length ? fired(id2) : undefined), 'second conversation');
      assert.deepEqual(ev2.data.extracted, { email: 'known@acme.test' });
    });

    test("a workflow's reply is an answer: rundowns do not list the message as unanswered", async () => {
      const from = new Date(Date.now() - 60_000).toISOString();
      const id = await start();
      await send(id, 'please book a demo for us');
      await send(id, 'what is the capital of peru?');
      const stored = await t.ctx.db.selectFrom('messages').select(['role', 'workflow_id']).where('conversation_id', '=', id).where('role', '=', 'assistant').orderBy('created_at').orderBy('seq').execute();
      assert.deepEqual(stored.map((m) => m.workflow_id ?? null), [null, demoId, null], 'greeting, workflow reply, no-answer');
      const r = await t.request('POST', '/v1/rundowns', { key: t.key, body: { from, to: new Date(Date.now() + 60_000).toISOString() } });
      assert.equal(r.status, 201, r.text);
      const questions = r.body.data.unanswered.map((u: any) => u.question);
      assert.ok(questions.includes('what is the capital of peru?'), JSON.stringify(questions));
      assert.ok(!questions.some((q: string) => /book a demo/.test(q)), JSON.stringify(questions));
    });

    test('two triggering messages at the same time fire one event', async () => {
      const id = await start();
      await Promise.all([send(id, 'book a demo'), send(id, 'I want to book a demo too')]);
      await waitFor(() => (fired(id).length ? true : undefined), 'one event');
      await sleep(300);
      assert.equal(fired(id).length, 1);
      const runs = await t.ctx.db.selectFrom('workflow_runs').selectAll().where('conversation_id', '=', id).execute();
      assert.equal(runs.length, 1);
    });

    test('the message events come before the workflow event; a workflow without a reply leaves the answer to the assistant', async () => {
      const id = await start();
      const reply = await send(id, 'how do I track my order?');
      assert.notEqual(reply.content, REPLY);
      assert.ok(reply.sources.length > 0, 'answered from the knowledge base');
      const events = await waitFor(() => {
        const all = receiver.received.map((r) => JSON.parse(r.body.toString('utf8'))).filter((b) => b.data.conversationId === id);
        return all.some((b) => b.event === 'workflow.triggered') ? all : undefined;
      }, 'track workflow');
      const wf = events.find((b) => b.event === 'workflow.triggered')!;
      assert.equal(wf.data.workflowSlug, 'track');
      assert.deepEqual(wf.data.extracted, {});
      const customerMsg = events.find((b) => b.event === 'conversation.message' && b.data.role === 'customer')!;
      assert.ok(customerMsg, 'the customer message event');
      assert.ok(customerMsg.timestamp <= wf.timestamp);
    });

    test('of two workflows with a reply that a message triggers, the older one answers; both fire', async () => {
      const newer = await t.request('POST', '/v1/workflows', {
        key: t.key,
        body: { slug: 'demo-newer', name: 'Newer demo', triggers: ['book a demo'], reply: 'The newer workflow answers.' },
      });
      assert.equal(newer.status, 201, newer.text);
      try {
        const id = await start();
        assert.equal((await send(id, 'can I book a demo for my team?')).content, REPLY);
        await waitFor(() => fired(id).length === 2 || undefined, 'both workflows fired');
        assert.deepEqual(fired(id).map((e) => e.data.workflowId).sort(), [demoId, newer.body.data.id].sort());
      } finally {
        await t.request('DELETE', `/v1/workflows/${newer.body.data.id}`, { key: t.key });
      }
    });

    test('disabled and deleted workflows do not fire; a handoff request still escalates', async () => {
      await t.request('PUT', `/v1/workflows/${demoId}`, { key: t.key, body: { enabled: false } });
      const id = await start();
      const reply = await send(id, 'I want to book a demo');
      assert.notEqual(reply.content, REPLY);
      const esc = await start();
      const handoff = await send(esc, 'book a demo, and let me talk to a human please');
      assert.match(handoff.content, /passing this conversation to a person/);
      await sleep(300);
      assert.equal(fired(id).length, 0);
      assert.equal(fired(esc).length, 0);
      const conv = await t.request('GET', `/v1/conversations/${esc}`, { key: t.key });
      assert.equal(conv.body.data.status, 'escalated');
    });
  });
}
