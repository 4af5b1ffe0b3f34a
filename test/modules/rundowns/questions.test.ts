import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isKnowledgeQuestion, onlyGivesEmail } from '../../../src/modules/assistant/questions.js';
import { topicText } from '../../../src/modules/chat/chat.service.js';
import { groupUnanswered } from '../../../src/modules/rundowns/rundowns.service.js';

/** An uncited customer message as the rundown reads it, in a conversation of its own. */
const asked = (id: string, content: string, at: number, conversation = `conv-${id}`) => ({ id, conversation_id: conversation, content, created_at: at, escalated_at: null });

test('a question for the knowledge base: not a hand-off, small talk or contact details (rundowns and the unanswered tag)', () => {
  for (const q of ['Do you sell coffee beans?', 'jo@acme.test: do you deliver to mars?', '<b>saxophone</b>?']) assert.equal(isKnowledgeQuestion(q, 10, null), true, q);
  for (const q of ['I want to talk to a human', 'hello', 'thanks!', 'jo@acme.test', 'my email is jo@acme.test', 'use other@acme.test instead', '???']) {
    assert.equal(isKnowledgeQuestion(q, 10, null), false, q);
  }
  assert.equal(onlyGivesEmail('my address is 1 Main St'), false, 'no email address: not contact details');
  // After escalation any message with an email address is contact details; before it, only one that gives nothing else.
  assert.equal(isKnowledgeQuestion('actually write to jo@acme.test about my order', 10, 5), false);
  assert.equal(isKnowledgeQuestion('actually write to jo@acme.test about my order', 10, null), true);
  assert.deepEqual(groupUnanswered([asked('m1', 'jo@acme.test', 1), asked('m2', 'Gift cards?', 2)]).total, 1);
});

test('an email address in an unanswered question is shown as [email], and the same question groups together', () => {
  const { top } = groupUnanswered([asked('m1', 'is my order for jo@acme.test on its way?', 1), asked('m2', 'is my order for al@b.test on its way?', 2)]);
  assert.deepEqual(top.map((g) => [g.question, g.count]), [['is my order for [email] on its way?', 2]]);
});

test('a group records the messages behind it: every wording, the most frequent first, at most 25 of each and 250 in all', () => {
  const rows = [
    ...Array.from({ length: 30 }, (_, i) => asked(`a${i}`, 'Gift cards?', 100 + i)),
    asked('b1', 'gift cards', 10),
    asked('b2', 'gift cards', 11),
    asked('c1', 'GIFT CARDS!', 5),
  ];
  const [g] = groupUnanswered(rows).top;
  assert.equal(g!.question, 'Gift cards?');
  assert.equal(g!.count, 33);
  // The shown wording's 25 latest, then the next wordings in rank order (latest first).
  assert.deepEqual(
    g!.sources.map((s) => s.messageId),
    [...Array.from({ length: 25 }, (_, i) => `a${29 - i}`), 'b2', 'b1', 'c1'],
  );
  assert.equal(g!.sources[0]!.conversationId, 'conv-a29');
  const many = groupUnanswered(Array.from({ length: 400 }, (_, i) => asked(`m${i}`, `gift cards ${'!'.repeat(i % 20)}`.trim(), i)));
  assert.equal(many.top[0]!.sources.length, 250);
});

test('topic text drops markup, character references, email addresses and URLs', () => {
  assert.equal(topicText('<script>alert(1)</script>saxophone <b>reeds</b> &amp; <!-- x -->jo@acme.test https://x.test/a?b').replace(/\s+/g, ' ').trim(), 'saxophone reeds');
  assert.equal(topicText('<script src=x>never closed').trim(), '');
  assert.equal(topicText('3 < 4 and a<b').replace(/\s+/g, ' ').trim(), '3 < 4 and a<b', 'a lone "<" is not markup');
});
