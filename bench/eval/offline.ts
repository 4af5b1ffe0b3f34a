/**
 * Offline evaluation of the default assistant on eval set A (/work/shared/eval).
 * Loads every entry with its status (as the service does: only active documents and approved FAQs can be cited), assigns
 * service-style ids, runs every question through detectHandoff + answer and
 * scores as /work/shared/eval/README.md says.
 *
 *   node --import tsx bench/eval/offline.ts [--verbose] [--min-confidence=0.35] [--dir=/work/shared/eval]
 *
 * Held-out sets in the same format: --dir=bench/eval/heldout/saas, --dir=bench/eval/heldout/hotel.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { KnowledgeIndex, type KnowledgeDoc, type KnowledgeFaq } from '../../src/modules/assistant/retrieval.js';
import { answer, isNoAnswerText } from '../../src/modules/assistant/answerer.js';
import { detectHandoff } from '../../src/modules/assistant/intent.js';

interface KbFile {
  documents: { key: string; title: string; content: string; status: string }[];
  faqs: { key: string; question: string; answer: string; category: string; status: string }[];
}
interface Question {
  q: string;
  expect: string[];
  kind: 'answerable' | 'unanswerable' | 'handoff';
}

const args = process.argv.slice(2);
const verbose = args.includes('--verbose');
const dir = args.find((a) => a.startsWith('--dir='))?.slice(6) ?? '/work/shared/eval';
const minArg = args.find((a) => a.startsWith('--min-confidence='));
const minConfidence = minArg ? Number(minArg.split('=')[1]) : undefined;

const kb = JSON.parse(readFileSync(join(dir, 'kb.json'), 'utf8')) as KbFile;
const questions = readFileSync(join(dir, 'questions.jsonl'), 'utf8')
  .split('\n')
  .filter((l) => l.trim())
  .map((l) => JSON.parse(l) as Question);

// Every entry gets a service id (as if loaded with its status); keep id → key for all of them
const idToKey = new Map<string, string>();
const leakIds = new Set<string>();
const docs: KnowledgeDoc[] = [];
const faqs: KnowledgeFaq[] = [];
for (const d of kb.documents) {
  const id = `doc_${randomUUID()}`;
  idToKey.set(id, d.key);
  docs.push({ id, title: d.title, content: d.content, citable: d.status === 'active' });
  if (d.status !== 'active') leakIds.add(id);
}
for (const f of kb.faqs) {
  const id = `faq_${randomUUID()}`;
  idToKey.set(id, f.key);
  faqs.push({ id, question: f.question, answer: f.answer, category: f.category, citable: f.status === 'approved' });
  if (f.status !== 'approved') leakIds.add(id);
}

const t0 = performance.now();
const index = KnowledgeIndex.build(docs, faqs);
const buildMs = performance.now() - t0;

let answerable = 0, r1 = 0, r3 = 0;
let unanswerable = 0, abstained = 0;
let handoffs = 0, handedOff = 0;
let falseHandoffs = 0;
let leaks = 0;
const times: number[] = [];

for (const q of questions) {
  const s = performance.now();
  const isHandoff = detectHandoff(q.q);
  const a = isHandoff ? undefined : answer(index, q.q, minConfidence !== undefined ? { minConfidence } : {});
  times.push(performance.now() - s);
  const sources = a?.sources ?? [];
  const keys = sources.map((id) => idToKey.get(id) ?? `?${id}`);
  if (sources.some((id) => leakIds.has(id))) leaks++;
  let mark = '';
  if (q.kind === 'answerable') {
    answerable++;
    const hit1 = keys.length > 0 && q.expect.includes(keys[0]!);
    const hit3 = keys.slice(0, 3).some((k) => q.expect.includes(k));
    if (hit1) r1++;
    if (hit3) r3++;
    if (isHandoff) falseHandoffs++;
    mark = hit1 ? 'ok@1' : hit3 ? 'ok@3' : a?.kind === 'no_answer' ? 'ABST' : 'MISS';
  } else if (q.kind === 'unanswerable') {
    unanswerable++;
    const ok = sources.length === 0 && (isHandoff || (a !== undefined && isNoAnswerText(a.content)));
    if (ok) abstained++;
    if (isHandoff) falseHandoffs++;
    mark = ok ? 'abst' : 'ANSW';
  } else {
    handoffs++;
    if (isHandoff) handedOff++;
    mark = isHandoff ? 'hand' : 'NOHO';
  }
  if (verbose) {
    console.log(`${mark}  conf=${(a?.confidence ?? 1).toFixed(2)}  [${keys.join(',')}] expect=[${q.expect.join(',')}]  ${q.q}`);
  }
}

times.sort((x, y) => x - y);
const pct = (p: number) => times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(2);
const f = (n: number, d: number) => (d ? n / d : 0).toFixed(3);
console.log(`eval set: ${dir}  (${docs.length} active docs, ${faqs.length} approved FAQs indexed; build ${buildMs.toFixed(1)} ms)`);
console.log(`answerable   (${answerable}): recall@1 = ${f(r1, answerable)}  recall@3 = ${f(r3, answerable)}`);
console.log(`unanswerable (${unanswerable}): abstention = ${f(abstained, unanswerable)}`);
console.log(`handoff      (${handoffs}): handoff rate = ${f(handedOff, handoffs)}   (false handoffs on other kinds: ${falseHandoffs})`);
console.log(`leaks (draft/pending cited): ${leaks}`);
console.log(`per-question latency: p50 ${pct(0.5)} ms  p95 ${pct(0.95)} ms`);
