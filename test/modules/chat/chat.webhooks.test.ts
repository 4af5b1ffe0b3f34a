import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { runDemo } from '../../../src/cli/demo.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { useWebhookReceiver } from '../../helpers/webhooks.js';
import { assertVerifies, waitFor } from '../webhooks/delivery-helpers.js';

const SECRET = 'chat-webhook-secret';

for (const dialect of DIALECTS) {
  describe(`chat events reach a registered webhook (${dialect})`, () => {
    const t = useTestApp(dialect);
    before(() => runDemo(t.ctx, t.accountId));
    const receiver = useWebhookReceiver(t, {
      secret: SECRET,
      events: ['conversation.started', 'conversation.message', 'conversation.ended', 'conversation.escalated', 'escalation.submitted'],
    });

    test('a whole conversation: started, every message, escalation, contact, ended — signed, in the spec shapes', async () => {
      const s = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: { customerId: 'cus_7', customerLabel: 'Grace', metadata: { plan: 'gold' } } });
      const id = s.body.data.conversation.id;
      await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: 'how do I track my order?' } });
      await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: 'I want to speak to a human agent' } });
      await t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: t.key, body: { email: 'grace@example.com', phone: '+44 20 7946 0000' } });
      await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: t.key });

      const bodies = () => receiver.received.map((r) => JSON.parse(r.body.toString('utf8'))).filter((b) => b.data.conversationId === id);
      // started + 5 messages (greeting, 2 customer, 2 assistant) + escalation + submitted + ended
      await waitFor(() => bodies().length >= 9, 'nine deliveries');
      for (const r of receiver.received) await assertVerifies(r, SECRET);
      const byEvent = (e: string) => bodies().filter((b) => b.event === e);

      assert.deepEqual(byEvent('conversation.started')[0].data, { conversationId: id, customerId: 'cus_7', customerLabel: 'Grace', persona: 'Assistant', metadata: { plan: 'gold' } });
      const messages = byEvent('conversation.message');
      assert.equal(messages.length, 5);
      for (const m of messages) {
        assert.equal(typeof m.data.messageId, 'string');
        assert.ok(['customer', 'assistant'].includes(m.data.role));
        assert.equal(m.data.customerId, 'cus_7');
        assert.equal(typeof m.data.content, 'string');
      }
      // Whatever order the deliveries arrived in, position rebuilds the transcript as stored.
      const transcript = await t.request('GET', `/v1/conversations/${id}`, { key: t.key });
      const rebuilt = [...messages].sort((a, b) => a.data.position - b.data.position);
      assert.deepEqual(rebuilt.map((m) => m.data.position), [1, 2, 3, 4, 5]);
      assert.deepEqual(rebuilt.map((m) => m.data.messageId), transcript.body.data.messages.map((m: { id: string }) => m.id));
      const esc = byEvent('escalation');
      assert.equal(esc.length, 1, 'subscribed through the conversation.escalated alias');
      assert.equal(esc[0].data.reason, 'customer_request');
      assert.equal(esc[0].data.customerLabel, 'Grace');
      assert.equal(esc[0].data.lastMessage, 'I want to speak to a human agent');
      assert.ok(Array.isArray(esc[0].data.transcript) && esc[0].data.transcript.every((x: any) => x.role && x.content && x.timestamp));
      assert.equal(byEvent('escalation.submitted')[0].data.customerEmail, 'grace@example.com');
      const ended = byEvent('conversation.ended')[0].data;
      assert.equal(ended.status, 'escalated');
      assert.equal(ended.messageCount, 5);
      assert.equal(typeof ended.duration, 'number');
      assert.ok(Array.isArray(ended.tags));
      for (const b of bodies()) {
        assert.deepEqual(Object.keys(b).sort(), ['data', 'event', 'timestamp']);
        assert.equal(new Date(b.timestamp).toISOString(), b.timestamp);
      }
      const header = receiver.received.find((r) => JSON.parse(r.body.toString('utf8')).event === 'conversation.ended')!;
      assert.equal(header.headers['x-service-event'], 'conversation.ended');
    });
  });
}
