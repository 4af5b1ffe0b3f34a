/**
 * The eval through the real service: a fresh account, the knowledge base loaded through POST /v1/documents
 * and /v1/faqs (every entry with its status), every question sent as the first customer message of a new
 * conversation through the chat API, scored as /work/shared/eval/README.md says. Also the reply latency
 * (p50/p95 of POST /chat/conversations/:id/messages) and, with --extra-docs=N, the same latency with N more
 * synthetic active documents in the account.
 *
 *   node --import tsx bench/eval/api.ts [--dialect=sqlite|postgres] [--extra-docs=10000] [--dir=/work/shared/eval]
 */
import { readFileSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { systemClock } from '../../src/lib/clock.js';
import { createTestDatabase } from '../../test/helpers/db.js';

const arg = (name: string, dflt: string) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt;
const dialect = arg('dialect', 'sqlite') as 'sqlite' | 'postgres';
const dir = arg('dir', '/work/shared/eval');
const extraDocs = Number(arg('extra-docs', '0'));

interface Question {
  q: string;
  expect: string[];
  kind: 'answerable' | 'unanswerable' | 'handoff';
}
const kb = JSON.parse(readFileSync(join(dir, 'kb.json'), 'utf8')) as {
  documents: { key: string; title: string; content: string; status: string }[];
  faqs: { key: string; question: string; answer: string; category: string; status: string }[];
};
const questions = readFileSync(join(dir, 'questions.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l) as Question);

const database = await createTestDatabase(dialect);
const ctx = createContext(loadConfig({}), database, systemClock);
const app = await buildApp(ctx);
await app.listen({ port: 0, host: '127.0.0.1' });
const base = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}/v1`;
const account = await ctx.services.accounts.createAccount({ name: 'eval', plan: 'enterprise', rateLimitMinute: 1_000_000, rateLimitDay: 10_000_000 });
const { key } = await ctx.services.accounts.createKey({ accountId: account.id });

async function call(method: string, path: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: { authorization: `Bearer ${key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const json = (await res.json()) as { success: boolean; data: any; error?: unknown };
  if (!json.success) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json.error)}`);
  return json.data;
}

const idToKey = new Map<string, string>();
const leakIds = new Set<string>();
for (const d of kb.documents) {
  const r = await call('POST', '/documents', { title: d.title, content: d.content, status: d.status });
  idToKey.set(r.id, d.key);
  if (d.status !== 'active') leakIds.add(r.id);
}
// The API takes a category only as a slug (CONTRACT: `[a-z0-9]+(-[a-z0-9]+)*`); some sets write theirs as words
// ("food safety", foodbox). Sent as an owner would have to type it; the assistant does not read categories to answer.
const slug = (category: string) => category.toLowerCase().replace(/[^a-z0-9]+/g, '-').replace(/^-+|-+$/g, '');
for (const f of kb.faqs) {
  const r = await call('POST', '/faqs', { question: f.question, answer: f.answer, category: slug(f.category), status: f.status });
  idToKey.set(r.id, f.key);
  if (f.status !== 'approved') leakIds.add(r.id);
}

if (extraDocs > 0) {
  // Filler with a Zipf-distributed vocabulary of pseudo-words plus some everyday support words, so term
  // frequencies look like a real archive without copying the shop's own articles.
  let seed = 7;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
  const syl = ['ka', 'lo', 'mi', 'ten', 'ra', 'vo', 'sel', 'dur', 'pi', 'ne', 'tor', 'gan', 'shu', 'bre', 'fi', 'mon'];
  const common = 'the a to and of for your you is in on with we our order account can be this that it are'.split(' ');
  const vocab = Array.from({ length: 20_000 }, (_, i) => syl[i % 16]! + syl[Math.floor(i / 16) % 16]! + syl[Math.floor(i / 256) % 16]! + (i >= 4096 ? syl[Math.floor(i / 4096) % 16]! : ''));
  const zipf = () => vocab[Math.min(vocab.length - 1, Math.floor(Math.exp(rnd() * Math.log(vocab.length))) - 1)]!;
  for (let i = 0; i < extraDocs; i++) {
    const text = Array.from({ length: 250 }, () => (rnd() < 0.4 ? common[Math.floor(rnd() * common.length)] : zipf())).join(' ');
    await call('POST', '/documents', { title: `Archive note ${zipf()} ${i}`, content: text, status: 'active' });
  }
  // The first reply after loading builds the index; measure replies, not the build.
  const warm = await call('POST', '/chat/conversations', {});
  await call('POST', `/chat/conversations/${warm.conversation.id}/messages`, { content: 'hello there' });
}

const score = { answerable: 0, r1: 0, r3: 0, unanswerable: 0, abstained: 0, handoff: 0, escalated: 0, leaks: 0 };
const latencies: number[] = [];
const NO_ANSWER = /don'?t know|couldn'?t find|not sure|person|human|team/i;
for (const q of questions) {
  const conv = await call('POST', '/chat/conversations', {});
  const t0 = performance.now();
  const sent = await call('POST', `/chat/conversations/${conv.conversation.id}/messages`, { content: q.q });
  latencies.push(performance.now() - t0);
  const reply = sent.messages[1] as { content: string; sources: string[] };
  const keys = reply.sources.map((id) => idToKey.get(id) ?? id);
  if (reply.sources.some((id) => leakIds.has(id))) score.leaks++;
  const after = await call('GET', `/chat/conversations/${conv.conversation.id}`);
  if (q.kind === 'answerable') {
    score.answerable++;
    if (keys[0] && q.expect.includes(keys[0])) score.r1++;
    if (keys.slice(0, 3).some((k) => q.expect.includes(k))) score.r3++;
  } else if (q.kind === 'unanswerable') {
    score.unanswerable++;
    const noAnswerEscalation = after.conversation.status === 'escalated' && after.conversation.escalationReason === 'no_answer';
    if (reply.sources.length === 0 && (NO_ANSWER.test(reply.content) || noAnswerEscalation)) score.abstained++;
  } else {
    score.handoff++;
    if (after.conversation.status === 'escalated' && after.conversation.escalationReason === 'customer_request') score.escalated++;
  }
}

latencies.sort((a, b) => a - b);
const pct = (p: number) => latencies[Math.min(latencies.length - 1, Math.floor((p / 100) * latencies.length))]!.toFixed(1);
const fmt = (n: number, d: number) => (d ? (n / d).toFixed(3) : 'n/a');
console.log(
  JSON.stringify(
    {
      dialect,
      documentsInAccount: kb.documents.length + extraDocs,
      recallAt1: fmt(score.r1, score.answerable),
      recallAt3: fmt(score.r3, score.answerable),
      abstention: fmt(score.abstained, score.unanswerable),
      handoff: fmt(score.escalated, score.handoff),
      leaks: score.leaks,
      replyMs: { p50: pct(50), p95: pct(95), max: latencies.at(-1)!.toFixed(1) },
    },
    null,
    2,
  ),
);
await app.close();
await database.cleanup();
