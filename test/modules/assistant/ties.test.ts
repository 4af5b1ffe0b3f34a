import { test } from 'node:test';
import assert from 'node:assert/strict';
import { KnowledgeIndex, type KnowledgeDoc, type KnowledgeFaq } from '../../../src/modules/assistant/retrieval.js';
import { answer } from '../../../src/modules/assistant/answerer.js';
import { DOCS, FAQS } from './fixtures.js';

/**
 * The same knowledge in two accounts (two instances): every entry gets an id per instance. Ids sort by their
 * creation millisecond only (the tail is random), so entries created in the same millisecond can get ids in
 * either order, and an account's rows are loaded in id order. Equally scored sources must still come out in
 * one order, decided by the content and creation time.
 */
const T = Date.UTC(2025, 0, 6, 9, 30);

interface Seed {
  key: string;
  question: string;
  answer: string;
  createdAt: number;
}

const SEEDS: Seed[] = [
  // Identical wording, created a millisecond apart (a double import): the older is cited first.
  { key: 'returns-new', question: 'Can I return a kettle?', answer: 'Yes, within 30 days, unused.', createdAt: T + 1 },
  { key: 'returns-old', question: 'Can I return a kettle?', answer: 'Yes, within 30 days, unused.', createdAt: T },
  // Same millisecond, different wording that scores exactly the same (names the word vectors do not know):
  // ordered by their text.
  { key: 'stock-b', question: 'Is the Blimtar kettle in stock?', answer: 'It ships in two weeks.', createdAt: T + 5 },
  { key: 'stock-q', question: 'Is the Quorvex kettle in stock?', answer: 'It ships in two weeks.', createdAt: T + 5 },
  { key: 'stock-a', question: 'Is the Arvinel kettle in stock?', answer: 'It ships in two weeks.', createdAt: T + 5 },
];

/** One instance: ids in the given order (all "in the same millisecond", tails as the instance drew them), loaded in id order. */
function instance(idOrder: string[], reverseLoad = false) {
  const idOf = new Map(idOrder.map((key, i) => [key, `faq_01jgx7c4r0${String.fromCharCode(97 + i)}${'z'.repeat(15)}`]));
  const keyOf = new Map([...idOf].map(([k, id]) => [id, k]));
  const faqs: KnowledgeFaq[] = SEEDS.map((s) => ({ id: idOf.get(s.key)!, question: s.question, answer: s.answer, category: 'products', createdAt: s.createdAt }));
  faqs.sort((a, b) => (a.id < b.id ? -1 : 1));
  if (reverseLoad) faqs.reverse();
  const docs: KnowledgeDoc[] = DOCS.map((d, i) => ({ ...d, createdAt: T - 1000 + i }));
  const index = KnowledgeIndex.build(reverseLoad ? [...docs].reverse() : docs, [...FAQS, ...faqs]);
  const keys = (ids: string[]) => ids.map((id) => keyOf.get(id) ?? id);
  return { index, idOf, keys };
}

const QUERIES = ['can I return a kettle', 'is the kettle in stock', 'kettle'];

function citedOrders(inst: ReturnType<typeof instance>) {
  return QUERIES.map((q) => ({
    q,
    hits: inst.keys(inst.index.search(q, 10).map((h) => h.sourceId)),
    sources: inst.keys(answer(inst.index, q).sources),
  }));
}

test('equally scored sources are cited in the same order whatever the ids and the load order', () => {
  const keys = SEEDS.map((s) => s.key);
  const a = citedOrders(instance(keys));
  const b = citedOrders(instance([...keys].reverse()));
  const c = citedOrders(instance([keys[2]!, keys[0]!, keys[4]!, keys[1]!, keys[3]!], true));
  assert.deepEqual(b, a);
  assert.deepEqual(c, a);

  const returns = a[0]!;
  assert.deepEqual(returns.hits.slice(0, 2), ['returns-old', 'returns-new'], 'identical wording: the older first');
  assert.equal(returns.sources[0], 'returns-old');
  const stock = a[1]!;
  assert.deepEqual(stock.hits.slice(0, 3), ['stock-a', 'stock-b', 'stock-q'], 'tied scores, same millisecond: by question text');
});

test('a refreshed index (entries upserted again, so added last) orders ties as a fresh build does', () => {
  const keys = SEEDS.map((s) => s.key);
  const fresh = instance(keys);
  const refreshed = instance(keys);
  // The refresh re-upserts changed rows: they move to the end of the index's insertion order.
  for (const key of ['returns-new', 'stock-b']) {
    const s = SEEDS.find((x) => x.key === key)!;
    refreshed.index.upsertFaq({ id: refreshed.idOf.get(key)!, question: s.question, answer: s.answer, category: 'products', createdAt: s.createdAt });
  }
  assert.deepEqual(citedOrders(refreshed), citedOrders(fresh));
});

test('a long run of equal scores: a fresh build collects its oldest sources, in order, however the rows were loaded', () => {
  // 300 FAQs that score exactly alike for "kettle" (one matched word, same lengths; the other word is unknown to
  // the word vectors), far more than a search collects (4 × the limit). A long-lived index that has refreshed some
  // of them collects from the run in its own order (documented in docs/assistant.md); the final order of what it
  // collected is still the tie order.
  let seed = 7;
  const rnd = () => (seed = (seed * 1103515245 + 12345) & 0x7fffffff) / 0x7fffffff;
  const word = (i: number) => `zq${i.toString(36).padStart(3, '0').replace(/\d/g, (d) => 'abcdefghij'[Number(d)]!)}x`;
  const age = Array.from({ length: 300 }, (_, i) => i).sort(() => rnd() - 0.5);
  const made = Array.from({ length: 300 }, (_, i) => ({ key: `k${i}`, question: `kettle ${word(i)}?`, createdAt: T + 2 * age[i]! }));
  const byAge = [...made].sort((a, b) => a.createdAt - b.createdAt).map((m) => m.key);
  const load = (order: typeof made, prefix: string) => {
    const idx = KnowledgeIndex.build(
      DOCS,
      order.map((m) => ({ id: `${prefix}${m.key}`, question: m.question, answer: 'Ask us.', category: 'products', createdAt: m.createdAt })),
    );
    return (limit = 6) => idx.search('kettle', limit).map((h) => h.sourceId.slice(prefix.length));
  };
  const shuffled = [...made].sort(() => rnd() - 0.5);
  assert.deepEqual(load(made, 'faq_a_')(), byAge.slice(0, 6));
  assert.deepEqual(load(shuffled, 'faq_b_')(), byAge.slice(0, 6));
  assert.deepEqual(load(shuffled, 'faq_c_')(1), byAge.slice(0, 1));
});
