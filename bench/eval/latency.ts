/**
 * Query latency at scale: 10,000 synthesized documents (~1-2 KB each, built
 * from a support/e-commerce vocabulary) + the eval KB, then a few hundred
 * queries (eval questions + synthesized ones) through `answer()`.
 *
 *   node --import tsx bench/eval/latency.ts [--docs=10000] [--queries=400]
 */
import { readFileSync } from 'node:fs';
import { KnowledgeIndex, type KnowledgeDoc, type KnowledgeFaq } from '../../src/modules/assistant/retrieval.js';
import { answer } from '../../src/modules/assistant/answerer.js';

const arg = (name: string, dflt: number) => Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.split('=')[1] ?? dflt);
const N_DOCS = arg('docs', 10_000);
const N_QUERIES = arg('queries', 400);

// deterministic PRNG
let seed = 42;
const rnd = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff);
const pick = <T>(a: readonly T[]): T => a[Math.floor(rnd() * a.length)]!;

const NOUNS = `order shipment parcel package delivery refund return exchange warranty invoice receipt account password
email address card payment subscription plan discount coupon voucher gift tracking label courier warehouse store
product item size color battery charger cable screen laptop phone headphones camera lens tripod jacket shoe boot
shirt dress sofa table chair lamp mattress pillow blanket kettle blender mixer knife pan pot plate glass bottle
tent backpack sleeping bag helmet bicycle tire wheel chain pedal saddle glove sock hat scarf watch strap ring
necklace bracelet perfume cream shampoo soap toothbrush vitamin protein snack coffee tea chocolate wine cheese
ticket booking seat flight hotel room reservation membership loyalty point reward tier badge certificate license
software update install download upgrade device router printer ink toner paper notebook pen pencil folder`.split(/\s+/);
const VERBS = `ship deliver return refund exchange cancel change update track charge pay order book reserve install
replace repair assemble register verify confirm approve reject schedule collect redeem expire renew upgrade
downgrade transfer reset unlock activate deactivate subscribe unsubscribe pause resume claim inspect process`.split(/\s+/);
const ADJ = `standard express free international domestic damaged faulty missing late early partial full digital
physical new used refurbished premium basic annual monthly weekly secure verified pending approved oversized
fragile heavy small large personal business corporate student senior military seasonal limited`.split(/\s+/);
const PLACES = `Canada Mexico Germany France Spain Italy Japan Brazil Australia India Ireland Norway Poland Texas Ohio Oregon
Florida Quebec Ontario Bavaria Lyon Madrid Osaka Sydney Dublin`.split(/\s+/);

// A Zipf-distributed vocabulary: the support words above are mixed among
// ~20,000 generated pseudo-words so term frequencies look like real text.
const SYL = ['ka', 'lo', 'mi', 'ten', 'ra', 'vo', 'sel', 'dur', 'pi', 'ne', 'tor', 'gan', 'shu', 'bre', 'fi', 'mon', 'ar', 'el', 'quo', 'zi'];
const ZIPF_WORDS: string[] = [];
{
  const base = [...NOUNS, ...VERBS, ...ADJ];
  let b = 0;
  for (let i = 0; i < 20_000; i++) {
    if (i % 40 === 5 && b < base.length) ZIPF_WORDS.push(base[b++]!);
    else {
      let w = '';
      const n = 2 + (i % 3);
      for (let k = 0, x = i * 7919 + 13; k < n; k++, x = Math.floor(x / SYL.length) + k * 31) w += SYL[x % SYL.length];
      ZIPF_WORDS.push(w);
    }
  }
}
const ZIPF_CDF: number[] = [];
{
  let acc = 0;
  for (let i = 0; i < ZIPF_WORDS.length; i++) ZIPF_CDF.push((acc += 1 / (i + 1)));
  for (let i = 0; i < ZIPF_CDF.length; i++) ZIPF_CDF[i]! /= acc;
}
function zipfWord(): string {
  const r = rnd();
  let lo = 0, hi = ZIPF_CDF.length - 1;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (ZIPF_CDF[mid]! < r) lo = mid + 1;
    else hi = mid;
  }
  return ZIPF_WORDS[lo]!;
}

function sentence(): string {
  const n = 8 + Math.floor(rnd() * 14);
  const w: string[] = [];
  for (let i = 0; i < n; i++) {
    const r = rnd();
    w.push(r < 0.45 ? zipfWord() : r < 0.55 ? pick(NOUNS) : r < 0.55 ? pick(VERBS) : r < 0.7 ? pick(ADJ) : r < 0.73 ? pick(PLACES) : r < 0.8 ? String(Math.floor(rnd() * 90) + 1) : pick(['the', 'a', 'your', 'within', 'after', 'before', 'and', 'or', 'if', 'we', 'you', 'can', 'will', 'is', 'to', 'for', 'of', 'on']));
  }
  const s = w.join(' ');
  return s[0]!.toUpperCase() + s.slice(1) + '.';
}
function paragraph(): string {
  const n = 2 + Math.floor(rnd() * 4);
  return Array.from({ length: n }, sentence).join(' ');
}

const docs: KnowledgeDoc[] = [];
for (let i = 0; i < N_DOCS; i++) {
  const parts: string[] = [];
  const target = 1000 + Math.floor(rnd() * 1000);
  let len = 0;
  while (len < target) {
    const p = paragraph();
    parts.push(p);
    len += p.length + 2;
  }
  docs.push({ id: `syn-${i}`, title: `${pick(ADJ)} ${pick(NOUNS)} ${pick(VERBS)} guide ${i}`, content: parts.join('\n\n') });
}
const faqs: KnowledgeFaq[] = [];
const kb = JSON.parse(readFileSync('/work/shared/eval/kb.json', 'utf8')) as {
  documents: { key: string; title: string; content: string; status: string }[];
  faqs: { key: string; question: string; answer: string; category: string; status: string }[];
};
for (const d of kb.documents) if (d.status === 'active') docs.push({ id: d.key, title: d.title, content: d.content });
for (const f of kb.faqs) if (f.status === 'approved') faqs.push({ id: f.key, question: f.question, answer: f.answer, category: f.category });
const avgKb = docs.reduce((s, d) => s + d.content.length, 0) / docs.length / 1024;

const t0 = performance.now();
const index = KnowledgeIndex.build(docs, faqs);
const buildMs = performance.now() - t0;

const evalQs = readFileSync('/work/shared/eval/questions.jsonl', 'utf8')
  .split('\n')
  .filter(Boolean)
  .map((l) => (JSON.parse(l) as { q: string }).q);
const queries: string[] = [];
for (let i = 0; i < N_QUERIES; i++) {
  if (i % 2 === 0) queries.push(evalQs[i % evalQs.length]!);
  else {
    const n = 3 + Math.floor(rnd() * 10);
    const w = Array.from({ length: n }, () => (rnd() < 0.4 ? zipfWord() : rnd() < 0.6 ? pick(NOUNS) : rnd() < 0.5 ? pick(VERBS) : pick(ADJ)));
    // sprinkle typos
    if (rnd() < 0.3) w[0] = w[0]!.slice(0, -1) + 'x';
    queries.push(`how do I ${w.join(' ')}?`);
  }
}

// warm-up (JIT, caches) on a disjoint set of queries
for (let i = 0; i < 50; i++) answer(index, `warm up ${pick(NOUNS)} ${pick(VERBS)} ${pick(ADJ)} ${i}`);

const measure = (fn: (q: string) => void) => {
  const t: number[] = [];
  for (const q of queries) {
    const s = performance.now();
    fn(q);
    t.push(performance.now() - s);
  }
  t.sort((a, b) => a - b);
  const p = (x: number) => t[Math.min(t.length - 1, Math.floor(x * t.length))]!;
  return { p50: p(0.5), p95: p(0.95), p99: p(0.99), max: t[t.length - 1]! };
};
const ans = measure((q) => answer(index, q));
const search = measure((q) => index.search(q, 5));
const mem = process.memoryUsage();
console.log(`documents: ${docs.length} (avg ${avgKb.toFixed(2)} KB), FAQs: ${faqs.length}, passages+FAQs indexed: ${index.size}`);
console.log(`build: ${(buildMs / 1000).toFixed(2)} s, heap used ${(mem.heapUsed / 1048576).toFixed(0)} MB`);
console.log(`answer(): p50 ${ans.p50.toFixed(2)} ms  p95 ${ans.p95.toFixed(2)} ms  p99 ${ans.p99.toFixed(2)} ms  max ${ans.max.toFixed(2)} ms  (${queries.length} queries)`);
console.log(`search(): p50 ${search.p50.toFixed(2)} ms  p95 ${search.p95.toFixed(2)} ms  p99 ${search.p99.toFixed(2)} ms`);
