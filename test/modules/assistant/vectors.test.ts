import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { cosine, WORD_VECTORS_FILE, WordVectors, wordVectors } from '../../../src/modules/assistant/vectors.js';
import { KnowledgeIndex, RERANK_DEPTH, SEMANTIC_WEIGHT } from '../../../src/modules/assistant/retrieval.js';
import { DOCS, FAQS } from './fixtures.js';

test('the shipped table loads and embeds texts as unit vectors', () => {
  const wv = wordVectors();
  assert.equal(wv.dims, 64);
  const v = wv.embed('Where is my parcel?')!;
  assert.equal(v.length, 64);
  assert.ok(Math.abs(cosine(v, v) - 1) < 1e-5);
  // accents and case fold like the rest of the text pipeline
  assert.deepEqual(wv.embed('CAFÉ délivery'), wv.embed('cafe delivery'));
  assert.equal(wv.embed(''), undefined);
  assert.equal(wv.embed('xqzvw 12345 !!!'), undefined);
});

test('texts that mean the same are closer than texts that do not', () => {
  const wv = wordVectors();
  const sim = (a: string, b: string) => cosine(wv.embed(a)!, wv.embed(b)!);
  // Paraphrases with no content word in common: the reason the re-rank exists.
  assert.ok(sim('how do I get my money back', 'refund policy for returns') > sim('how do I get my money back', 'where is my parcel'));
  assert.ok(sim('my parcel never arrived', 'lost or missing package delivery') > sim('my parcel never arrived', 'change your password'));
  assert.ok(sim('can I pay in instalments', 'payment options and financing') > sim('can I pay in instalments', 'returning an item'));
});

test('a damaged table is refused, not half read', () => {
  const buf = readFileSync(WORD_VECTORS_FILE);
  assert.throws(() => WordVectors.fromBuffer(Buffer.from('nope')), /not a PWV1 file/);
  assert.throws(() => WordVectors.fromBuffer(buf.subarray(0, buf.length - 100)), /truncated/);
  assert.throws(() => WordVectors.fromBuffer(Buffer.concat([buf, Buffer.alloc(1)])), /truncated/);
  const wrongCount = Buffer.from(buf);
  wrongCount.writeUInt32LE(buf.readUInt32LE(4) + 1, 4);
  assert.throws(() => WordVectors.fromBuffer(wrongCount), /does not match|truncated/);
});

test('the lexical top is re-ranked by relevance = BM25 / best BM25 + weight × cosine', () => {
  const index = KnowledgeIndex.build(DOCS, FAQS);
  for (const q of ['how long does delivery take', 'return an order for a refund', 'shipping cost of my order', 'is the tea organic']) {
    const hits = index.search(q, 10);
    assert.ok(hits.length >= 2, q);
    const best = Math.max(...hits.map((h) => h.score));
    hits.forEach((h, i) => {
      if (i < RERANK_DEPTH) {
        assert.equal(typeof h.semantic, 'number', `${q}: hit ${i} has a cosine`);
        assert.ok(Math.abs(h.relevance - (h.score / best + SEMANTIC_WEIGHT * h.semantic!)) < 1e-9, q);
        if (i > 0) assert.ok(hits[i - 1]!.relevance >= h.relevance, `${q}: ordered by relevance`);
      } else {
        assert.equal(h.semantic, undefined);
      }
    });
  }
  // Meaning can overturn a lexical lead: the subscription article has the best BM25 score for this one (it says
  // "tea" most often), the FAQ about brewing tea is the closer text.
  const tea = index.search('is the tea organic', 5);
  assert.equal(tea[0]!.sourceId, 'faq-brew');
  assert.ok(tea.some((h) => h.score > tea[0]!.score), 'a lower-ranked hit has the higher BM25 score');
  // A question of words the table does not know keeps the lexical order and has no cosine.
  const plain = index.search('zzkettle', 5);
  for (const h of plain) assert.equal(h.semantic, undefined);
});
