import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, test } from 'node:test';
import { createTestApp, type TestApp } from '../../helpers/app.js';

/*
 * The assistant must answer the same on SQLite and PostgreSQL: the same knowledge base, loaded the same way,
 * gives the same replies and cites the same sources (mapped back to the knowledge base's own keys).
 */
const dir = new URL('../../../bench/eval/heldout/hotel/', import.meta.url);
const kb = JSON.parse(readFileSync(new URL('kb.json', dir), 'utf8')) as {
  documents: { key: string; title: string; content: string; status: string }[];
  faqs: { key: string; question: string; answer: string; category: string; status: string }[];
};
const questions = readFileSync(new URL('questions.jsonl', dir), 'utf8')
  .split('\n')
  .filter((l) => l.trim())
  .map((l) => (JSON.parse(l) as { q: string }).q);

async function replies(t: TestApp) {
  const { key } = await t.account();
  const keyOf = new Map<string, string>();
  for (const d of kb.documents) {
    const r = await t.request('POST', '/v1/documents', { key, body: { title: d.title, content: d.content, status: d.status } });
    keyOf.set(r.body.data.id, d.key);
  }
  for (const f of kb.faqs) {
    const r = await t.request('POST', '/v1/faqs', { key, body: { question: f.question, answer: f.answer, category: f.category, status: f.status } });
    keyOf.set(r.body.data.id, f.key);
  }
  const out: { content: string; sources: string[] }[] = [];
  for (const q of questions) {
    const c = await t.request('POST', '/v1/chat/conversations', { key, body: {} });
    const r = await t.request('POST', `/v1/chat/conversations/${c.body.data.conversation.id}/messages`, { key, body: { content: q } });
    const reply = r.body.data.messages[1] as { content: string; sources: string[] };
    out.push({ content: reply.content, sources: reply.sources.map((id) => keyOf.get(id) ?? id) });
  }
  return out;
}

let sqlite: TestApp;
let postgres: TestApp;
before(async () => {
  [sqlite, postgres] = await Promise.all([createTestApp('sqlite'), createTestApp('postgres')]);
});
after(async () => {
  await Promise.all([sqlite.close(), postgres.close()]);
});

test('the same knowledge base answers the same questions identically on SQLite and PostgreSQL', async () => {
  const [a, b] = await Promise.all([replies(sqlite), replies(postgres)]);
  assert.ok(questions.length >= 40);
  assert.ok(a.some((r) => r.sources.length > 0), 'some questions are answered');
  assert.ok(a.some((r) => r.sources.length === 0), 'some are not');
  assert.deepEqual(b, a);
});
