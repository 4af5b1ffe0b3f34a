/**
 * Loads an eval-style set (kb.json + questions.jsonl, see /work/shared/eval/README.md)
 * the way the service would: only active documents and approved FAQs can be cited.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KnowledgeIndex, type KnowledgeDoc, type KnowledgeFaq } from '../../src/modules/assistant/retrieval.js';

export interface KbFile {
  documents: { key: string; title: string; content: string; status: string }[];
  faqs: { key: string; question: string; answer: string; category: string; status: string }[];
}
export interface Question {
  q: string;
  expect: string[];
  kind: 'answerable' | 'unanswerable' | 'handoff';
}
export interface LoadedSet {
  dir: string;
  index: KnowledgeIndex;
  questions: Question[];
  /** Ids of draft/pending entries (never indexed; citing one is a leak). */
  leakIds: Set<string>;
}

/** Source ids are the set's own keys, so cited ids need no translation. */
export function loadSet(dir: string): LoadedSet {
  const kb = JSON.parse(readFileSync(join(dir, 'kb.json'), 'utf8')) as KbFile;
  const questions = readFileSync(join(dir, 'questions.jsonl'), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Question);
  const docs: KnowledgeDoc[] = [];
  const faqs: KnowledgeFaq[] = [];
  const leakIds = new Set<string>();
  // Everything is loaded with its status, as the service does: unpublished entries are indexed but never cited.
  for (const d of kb.documents) {
    const citable = d.status === 'active';
    docs.push({ id: d.key, title: d.title, content: d.content, citable });
    if (!citable) leakIds.add(d.key);
  }
  for (const f of kb.faqs) {
    const citable = f.status === 'approved';
    faqs.push({ id: f.key, question: f.question, answer: f.answer, category: f.category, citable });
    if (!citable) leakIds.add(f.key);
  }
  return { dir, index: KnowledgeIndex.build(docs, faqs), questions, leakIds };
}

/** Every set under bench/eval/heldout (eight domains; none is eval set A). */
export const HELDOUT_DIRS = readdirSync('bench/eval/heldout', { withFileTypes: true })
  .filter((e) => e.isDirectory())
  .map((e) => `bench/eval/heldout/${e.name}`)
  .sort();
