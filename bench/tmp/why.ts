import { readFileSync } from 'node:fs';
import { KnowledgeIndex, type KnowledgeDoc, type KnowledgeFaq } from '../../src/modules/assistant/retrieval.js';
import { decide } from '../../src/modules/assistant/answerer.js';
import { detectHandoff } from '../../src/modules/assistant/intent.js';
const dir = process.argv[2] ?? '/work/shared/eval';
const kb = JSON.parse(readFileSync(`${dir}/kb.json`, 'utf8'));
const qs = readFileSync(`${dir}/questions.jsonl`, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l));
const docs: KnowledgeDoc[] = kb.documents.map((d: any) => ({ id: d.key, title: d.title, content: d.content, citable: d.status === 'active' }));
const faqs: KnowledgeFaq[] = kb.faqs.map((f: any) => ({ id: f.key, question: f.question, answer: f.answer, category: f.category, citable: f.status === 'approved' }));
const index = KnowledgeIndex.build(docs, faqs);
const only = process.argv[3];
for (const q of qs) {
  if (q.kind === 'handoff' || detectHandoff(q.q)) continue;
  const d = decide(index, q.q);
  const conf = d?.confidence ?? 0;
  const ok = q.kind === 'answerable' ? d && q.expect.includes(d.hits[0]!.sourceId) : false;
  const tag = q.kind === 'answerable' ? (conf >= 0.55 ? (ok ? 'ok' : 'MISS') : ok ? 'ABST-right' : 'abst-wrong') : conf >= 0.55 ? 'ANSW' : 'abst';
  if (only && !tag.startsWith(only)) continue;
  const f = d?.features;
  console.log(`${tag.padEnd(10)} ${conf.toFixed(2)} cov=${f?.coverage.toFixed(2)} pc=${f?.passageCoverage.toFixed(2)} unk=${f?.unknownShare.toFixed(2)} ru=${f?.runnerUpRatio.toFixed(2)} ul=${f?.unpublishedLead} sem=${f?.semantic.toFixed(2)} [${d?.hits.slice(0,3).map(h=>h.sourceId).join(',')}] exp=${q.expect.join(',')} | ${q.q}`);
  if (process.argv[4]) console.log('    terms:', index.analyzeQuery(q.q).map((t) => `${t.term}${t.known ? '' : '?'}:${t.idf.toFixed(2)}`).join(' '));
}
