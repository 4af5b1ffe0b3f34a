import assert from 'node:assert/strict';
import { test } from 'node:test';
import { isKnowledgeQuestion, onlyGivesEmail } from '../../../src/modules/assistant/questions.js';
import { topicText } from '../../../src/modules/chat/chat.service.js';
import { groupUnanswered } from '../../../src/modules/rundowns/rundowns.service.js';

test('a question for the knowledge base: not a hand-off, small talk or contact details (rundowns and the unanswered tag)', () => {
  for (const q of ['Do you sell coffee beans?', 'jo@acme.test: do you deliver to mars?', '<b>saxophone</b>?']) assert.equal(isKnowledgeQuestion(q, 10, null), true, q);
  for (const q of ['I want to talk to a human', 'hello', 'thanks!', 'jo@acme.test', 'my email is jo@acme.test', 'use other@acme.test instead', '???']) {
    assert.equal(isKnowledgeQuestion(q, 10, null), false, q);
  }
  assert.equal(onlyGivesEmail('my address is 1 Main St'), false, 'no email address: not contact details');
  // After escalation any message with an email address is contact details; before it, only one that gives nothing else.
  assert.equal(isKnowledgeQuestion('actually write to jo@acme.test about my order', 10, 5), false);
  assert.equal(isKnowledgeQuestion('actually write to jo@acme.test about my order', 10, null), true);
  assert.deepEqual(groupUnanswered([{ content: 'jo@acme.test', created_at: 1, escalated_at: null }, { content: 'Gift cards?', created_at: 2, escalated_at: null }]).total, 1);
});

test('an email address in an unanswered question is shown as [email], and the same question groups together', () => {
  const { top } = groupUnanswered([
    { content: 'is my order for jo@acme.test on its way?', created_at: 1, escalated_at: null },
    { content: 'is my order for al@b.test on its way?', created_at: 2, escalated_at: null },
  ]);
  assert.deepEqual(top.map((g) => [g.question, g.count]), [['is my order for [email] on its way?', 2]]);
});

test('topic text drops markup, character references, email addresses and URLs', () => {
  assert.equal(topicText('<script>alert(1)</script>saxophone <b>reeds</b> &amp; <!-- x -->jo@acme.test https://x.test/a?b').replace(/\s+/g, ' ').trim(), 'saxophone reeds');
  assert.equal(topicText('<script src=x>never closed').trim(), '');
  assert.equal(topicText('3 < 4 and a<b').replace(/\s+/g, ' ').trim(), '3 < 4 and a<b', 'a lone "<" is not markup');
});
