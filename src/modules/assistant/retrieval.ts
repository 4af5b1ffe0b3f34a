/**
 * In-process knowledge retrieval over ACTIVE documents and APPROVED FAQs.
 *
 * Documents are split into passages (paragraph based); FAQs are one entry
 * each. Everything is analysed once with the shared pipeline from text.ts
 * (stemming + synonym canonicalisation) and indexed with MiniSearch (BM25+),
 * with field boosts faq question > doc title > passage text. Query terms
 * unknown to the index get distance-1 spelling correction against the index
 * vocabulary; the engine then matches exact analysed terms only.
 *
 * Unpublished entries (draft documents, pending/draft FAQs) are indexed too, but
 * never returned as hits: they are only evidence that a question is about
 * something the account has not published (see `SearchResult.unpublishedLead`).
 *
 * Results are deduplicated per source (best passage kept) and carry
 * `coverage` (IDF-weighted share of the query's terms the source matches,
 * over all its passages) and `passageCoverage` (the same for its single best
 * passage) — the answerer's abstention model uses both.
 */
import MiniSearch from 'minisearch';
import { isCountryStem, isPlaceStem } from './places.js';
import { analyze, analyzeCached, isEverydayStem, SpellCorrector } from './text.js';
import { cosine, wordVectors } from './vectors.js';

/** The knowledge base's word for "abroad", as analysed ("international", "overseas" … share one term). */
const ABROAD = analyze('international')[0]!;

export interface KnowledgeDoc {
  id: string;
  title: string;
  content: string;
  updatedAt?: string | Date;
  /** Creation time (ms since the epoch, as stored): equally scored sources are cited older first ({@link compareTied}). */
  createdAt?: number;
  /** False for a draft: indexed as evidence of an unpublished topic, never cited (default true). */
  citable?: boolean;
}

export interface KnowledgeFaq {
  id: string;
  question: string;
  answer: string;
  category: string;
  /** Creation time (ms since the epoch, as stored): equally scored sources are cited older first ({@link compareTied}). */
  createdAt?: number;
  /** False for a pending or draft FAQ: indexed as evidence of an unpublished topic, never cited (default true). */
  citable?: boolean;
}

export interface Hit {
  sourceId: string;
  kind: 'document' | 'faq';
  /** BM25+ score of the best passage of this source (not comparable across indexes). */
  score: number;
  /** Text of the best passage (the FAQ answer for FAQs). */
  passage: string;
  /** Document title, or the FAQ question. */
  title: string;
  category?: string;
  /** IDF-weighted share (0..1) of the query's terms found in this source (all its passages together). */
  coverage: number;
  /** IDF-weighted share (0..1) of the query's terms found in the single best-covering passage of this source. */
  passageCoverage?: number;
  /** Analysed query terms this source contains (exact matches only). */
  matched?: string[];
  /** Cosine (word vectors, -1..1) of the question and this source's closest passage; set for the re-ranked top. */
  semantic?: number;
  /** Ranking score: BM25 relative to the best source's, plus {@link SEMANTIC_WEIGHT} × `semantic`. Hits are in this order. */
  relevance: number;
}

export interface QueryTerm {
  /** Analysed (stemmed, canonicalised, spell-corrected) term. */
  term: string;
  /** Inverse document frequency in this index; unknown terms get the maximum. */
  idf: number;
  /** Whether the term (after correction) occurs in a published entry (one the assistant may cite). */
  known: boolean;
}

export interface SearchResult {
  hits: Hit[];
  terms: QueryTerm[];
  /**
   * The best unpublished entry, when one scores above every published hit AND matches a query term the best
   * published hit does not: the question is about something the account has written but not published
   * ("race wheel rental", still a draft), so an answer from the best published article is likely off-topic.
   */
  unpublishedLead?: { sourceId: string; matched: string[] };
}

interface Entry {
  id: number;
  sourceId: string;
  kind: 'document' | 'faq';
  title: string;
  passage: string;
  category?: string;
  citable: boolean;
  /** Word-vector embeddings of the entry (title + passage; an FAQ's question alone and with its answer). */
  vectors: Float32Array[];
}

interface IndexedFields {
  id: number;
  question: string;
  title: string;
  text: string;
}

/** What MiniSearch indexes for an entry: an FAQ's question, or a passage's document title, and its text. */
function indexedFields(e: Entry, titleTerms = analyze(e.title), textTerms = analyze(e.passage)): IndexedFields {
  const title = titleTerms.join(' ');
  const text = textTerms.join(' ');
  return e.kind === 'faq' ? { id: e.id, question: title, title: '', text } : { id: e.id, question: '', title, text };
}

const FIELD_BOOST = { question: 1.6, title: 1.4, text: 1 };
const MAX_PASSAGE_CHARS = 1200;
const MIN_PASSAGE_CHARS = 160;
const PRUNE_MIN_DF = 500;
const PRUNE_SHARE = 0.05;
/**
 * The lexical top sources are re-ranked by meaning: BM25 / best BM25 + SEMANTIC_WEIGHT × cosine. Both chosen on the
 * held-out sets (docs/assistant.md, "Static word vectors"); the figures were flat from 3 to 5 and from 6 to 10.
 */
export const RERANK_DEPTH = 6;
export const SEMANTIC_WEIGHT = 4;

/** Split a document body into passages: paragraphs, short ones merged forward, long ones cut at sentences. */
export function splitPassages(content: string): string[] {
  const paras = content
    .replace(/\r\n?/g, '\n')
    .split(/\n\s*\n/)
    .map((p) => p.trim())
    .filter((p) => p.length > 0);
  const merged: string[] = [];
  let carry = '';
  for (const p of paras) {
    const cur = carry ? `${carry}\n\n${p}` : p;
    if (cur.length < MIN_PASSAGE_CHARS) {
      carry = cur;
      continue;
    }
    carry = '';
    if (cur.length <= MAX_PASSAGE_CHARS) {
      merged.push(cur);
      continue;
    }
    const sentences = cur.match(/[^.!?\n]+(?:[.!?]+|\n|$)/g) ?? [cur];
    let buf = '';
    for (const s of sentences) {
      if (buf.length + s.length > MAX_PASSAGE_CHARS && buf.length > 0) {
        merged.push(buf.trim());
        buf = '';
      }
      buf += s;
    }
    if (buf.trim()) merged.push(buf.trim());
  }
  if (carry) {
    if (merged.length > 0 && merged[merged.length - 1]!.length + carry.length <= MAX_PASSAGE_CHARS) {
      merged[merged.length - 1] += `\n\n${carry}`;
    } else merged.push(carry);
  }
  return merged;
}

function decrement(counts: Map<string, number>, term: string): void {
  const n = (counts.get(term) ?? 1) - 1;
  if (n <= 0) counts.delete(term);
  else counts.set(term, n);
}

export class KnowledgeIndex {
  private readonly mini: MiniSearch<IndexedFields>;
  private readonly entries: Entry[] = [];
  /** term → number of entries (passages/FAQs, published or not) containing it: ranking statistics */
  private readonly df = new Map<string, number>();
  /** term → number of PUBLISHED entries containing it: a term only drafts use is unknown to the customer-facing side */
  private readonly dfPublished = new Map<string, number>();
  private publishedEntries = 0;
  private corrector: SpellCorrector | undefined;
  private readonly sources = new Map<string, number[]>();
  /** Source id → its tie key ({@link compareTied}). */
  private readonly tieKeys = new Map<string, TieKey>();

  private constructor() {
    this.mini = new MiniSearch<IndexedFields>({
      idField: 'id',
      fields: ['question', 'title', 'text'],
      storeFields: [],
      tokenize: (s) => (s.length ? s.split(' ') : []),
      processTerm: (t) => t,
      // Entries are removed outright (`remove` below), never discarded: MiniSearch's automatic vacuum cleans
      // discarded entries in batches with pauses between them, and an entry added during a pause can split a
      // tree edge the vacuum is about to visit. The vacuum then throws from a timer, an unhandled rejection
      // that ended the process (lucaong/minisearch#306); a crash audit hit it in 9 of 12 runs of document churn.
      autoVacuum: false,
    });
  }

  /**
   * Build an index from ACTIVE documents and APPROVED FAQs (the caller filters). Entries are added in tie order
   * ({@link compareTied}): MiniSearch returns equal scores in the order entries were added, so which of many equally
   * scored sources a search collects does not depend on the order the rows were loaded in.
   */
  static build(docs: readonly KnowledgeDoc[], faqs: readonly KnowledgeFaq[]): KnowledgeIndex {
    const idx = new KnowledgeIndex();
    const batch: IndexedFields[] = [];
    const all = [
      ...docs.map((d) => ({ key: tieKey(d.id, d.createdAt, d.title, d.content), add: () => idx.collectDoc(d, batch) })),
      ...faqs.map((f) => ({ key: tieKey(f.id, f.createdAt, f.question, f.answer), add: () => idx.collectFaq(f, batch) })),
    ];
    for (const { add } of all.sort((a, b) => compareTied(a.key, b.key))) add();
    idx.mini.addAll(batch);
    return idx;
  }

  /** Number of indexed passages + FAQs. */
  get size(): number {
    return this.mini.documentCount;
  }

  /** Source ids present in the index (published or not). */
  sourceIds(): string[] {
    return [...this.sources.keys()];
  }

  /** Add (or replace) a document. */
  upsertDocument(doc: KnowledgeDoc): void {
    this.remove(doc.id);
    const batch: IndexedFields[] = [];
    this.collectDoc(doc, batch);
    this.mini.addAll(batch);
  }

  /** Add (or replace) an FAQ. */
  upsertFaq(faq: KnowledgeFaq): void {
    this.remove(faq.id);
    const batch: IndexedFields[] = [];
    this.collectFaq(faq, batch);
    this.mini.addAll(batch);
  }

  /** The passages of a citable source, in the order of its text (an FAQ: its answer); none for any other. */
  passagesOf(sourceId: string): string[] {
    return (this.sources.get(sourceId) ?? []).map((id) => this.entries[id]!).filter((e) => e.citable).map((e) => e.passage);
  }

  /** Remove a document or FAQ by id (no-op if absent). */
  remove(sourceId: string): void {
    const ids = this.sources.get(sourceId);
    if (!ids) return;
    for (const id of ids) {
      const e = this.entries[id];
      if (e) {
        const titleTerms = analyze(e.title);
        const textTerms = analyze(e.passage);
        // The same fields, analysed the same way, as the entry was added with: what `remove` needs to find its terms.
        this.mini.remove(indexedFields(e, titleTerms, textTerms));
        if (e.citable) this.publishedEntries--;
        for (const t of new Set([...titleTerms, ...textTerms])) {
          decrement(this.df, t);
          if (e.citable) decrement(this.dfPublished, t);
        }
      }
    }
    this.sources.delete(sourceId);
    this.tieKeys.delete(sourceId);
    this.corrector = undefined;
  }

  private collectDoc(d: KnowledgeDoc, batch: IndexedFields[]): void {
    this.tieKeys.set(d.id, tieKey(d.id, d.createdAt, d.title, d.content));
    const titleTerms = analyze(d.title);
    const citable = d.citable ?? true;
    for (const passage of splitPassages(d.content)) {
      const textTerms = analyze(passage);
      const vectors = citable ? embedAll([`${d.title}\n${passage}`]) : [];
      const id = this.addEntry({ sourceId: d.id, kind: 'document', title: d.title, passage, citable, vectors }, [...titleTerms, ...textTerms]);
      batch.push(indexedFields(this.entries[id]!, titleTerms, textTerms));
    }
  }

  private collectFaq(f: KnowledgeFaq, batch: IndexedFields[]): void {
    this.tieKeys.set(f.id, tieKey(f.id, f.createdAt, f.question, f.answer));
    const qTerms = analyze(f.question);
    const aTerms = analyze(f.answer);
    const citable = f.citable ?? true;
    const vectors = citable ? embedAll([f.question, `${f.question}\n${f.answer}`]) : [];
    const id = this.addEntry(
      { sourceId: f.id, kind: 'faq', title: f.question, passage: f.answer, category: f.category, citable, vectors },
      [...qTerms, ...aTerms],
    );
    batch.push(indexedFields(this.entries[id]!, qTerms, aTerms));
  }

  private addEntry(e: Omit<Entry, 'id'>, terms: string[]): number {
    const id = this.entries.length;
    this.entries.push({ id, ...e });
    let list = this.sources.get(e.sourceId);
    if (!list) this.sources.set(e.sourceId, (list = []));
    list.push(id);
    if (e.citable) this.publishedEntries++;
    for (const t of new Set(terms)) {
      this.df.set(t, (this.df.get(t) ?? 0) + 1);
      if (e.citable) this.dfPublished.set(t, (this.dfPublished.get(t) ?? 0) + 1);
    }
    this.corrector = undefined;
    return id;
  }

  /**
   * Over published entries only: the decision features weigh the question against what the assistant may
   * cite, so words only unpublished entries use ("rental", a pending FAQ's own wording) weigh as unknown ones.
   */
  private idf(term: string): number {
    const n = Math.max(1, this.publishedEntries);
    const df = this.dfPublished.get(term) ?? 0;
    // BM25-style idf, floored at a small positive value; unknown terms get the
    // idf of a term seen once less than the rarest possible (df = 0.5).
    return Math.log(1 + (n - Math.max(df, 0.5) + 0.5) / (Math.max(df, 0.5) + 0.5));
  }

  /** Analyse a query: stems, synonyms, spelling correction, idf. */
  analyzeQuery(query: string): QueryTerm[] {
    const raw = analyzeCached(query);
    const seen = new Set<string>();
    const out: QueryTerm[] = [];
    let country = false;
    for (const t of raw) {
      let term = t;
      if (!this.df.has(term)) {
        this.corrector ??= new SpellCorrector(this.df);
        const c = this.corrector.correct(term);
        if (c) term = c;
      }
      if (seen.has(term)) continue;
      seen.add(term);
      const known = this.dfPublished.has(term);
      // unknown numbers, sizes, one/two-letter tokens ("740", "57cm", "m"), everyday words the knowledge base
      // never uses ("halfway", "anymore") and places it never names ("australia") carry no topic
      const noise = !known && (term.length <= 2 || /\d/.test(term) || isEverydayStem(term) || isPlaceStem(term));
      out.push({ term, idf: noise ? 0 : this.idf(term), known });
      if (isCountryStem(term)) country = true;
    }
    // A country stands for "abroad" too, when the knowledge base has a word for it.
    if (country && !seen.has(ABROAD) && this.dfPublished.has(ABROAD)) out.push({ term: ABROAD, idf: this.idf(ABROAD), known: true });
    return out;
  }

  /** Deduplicated hits, best first. */
  search(query: string, limit = 5): Hit[] {
    return this.searchDetailed(query, limit).hits;
  }

  /** Hits plus the analysed query terms (used by the answerer for calibration). */
  searchDetailed(query: string, limit = 5): SearchResult {
    const terms = this.analyzeQuery(query);
    // Terms only unpublished entries use are searched too: they are what makes an unpublished entry lead.
    const known = terms.filter((t) => this.df.has(t.term));
    if (known.length === 0) return { hits: [], terms };
    // Very common terms (in >10% of entries and >500 entries) add almost nothing to
    // the ranking but dominate query cost on big indexes: they still count towards
    // coverage, but are not sent to the engine unless nothing else is left.
    const n = this.mini.documentCount;
    const selective = known.filter((t) => {
      const df = this.df.get(t.term) ?? 0;
      return !(df > PRUNE_MIN_DF && df > n * PRUNE_SHARE);
    });
    const qs = (selective.length ? selective : [...known].sort((a, b) => b.idf - a.idf).slice(0, 2)).map((t) => t.term);
    const results = this.mini.search(qs.join(' '), {
      boost: FIELD_BOOST,
      combineWith: 'OR',
      // No engine-side fuzzy/prefix expansion: unknown terms are already spell-corrected
      // against the vocabulary above and known terms are stems, so expansion only matched
      // neighbouring stems; removing it moved the eval and held-out figures by at most one question.
    });
    const totalIdf = terms.reduce((s, t) => s + t.idf, 0) || 1;
    const idfOf = new Map(terms.map((t) => [t.term, t.idf]));
    const bySource = new Map<string, { hit: Hit; matched: Set<string>; bestPassage: number }>();
    /** The best unpublished entry, if it ranks above every published one. */
    let leading: { sourceId: string; matched: string[] } | undefined;
    for (const r of results) {
      const e = this.entries[r.id as number];
      if (!e) continue;
      if (!e.citable) {
        if (bySource.size === 0 && !leading) leading = { sourceId: e.sourceId, matched: r.queryTerms.filter((q) => r.terms.includes(q)) };
        continue;
      }
      let agg = bySource.get(e.sourceId);
      if (!agg) {
        if (bySource.size >= Math.max(limit, 1) * 4) continue; // enough sources collected
        agg = {
          hit: {
            sourceId: e.sourceId,
            kind: e.kind,
            score: r.score,
            passage: e.passage,
            title: e.title,
            coverage: 0,
            relevance: 0,
            ...(e.category !== undefined ? { category: e.category } : {}),
          },
          matched: new Set(),
          bestPassage: 0,
        };
        bySource.set(e.sourceId, agg);
      }
      // exact query terms only count towards coverage
      let pm = 0;
      for (const q of r.queryTerms) {
        if (!r.terms.includes(q)) continue;
        agg.matched.add(q);
        pm += idfOf.get(q) ?? 0;
      }
      if (pm > agg.bestPassage) agg.bestPassage = pm;
    }
    const hits: Hit[] = [];
    for (const { hit, matched, bestPassage } of bySource.values()) {
      let m = 0;
      for (const t of matched) m += idfOf.get(t) ?? 0;
      hit.coverage = m / totalIdf;
      hit.passageCoverage = bestPassage / totalIdf;
      hit.matched = [...matched];
      hits.push(hit);
    }
    hits.sort((a, b) => b.score - a.score || this.tied(a, b));
    this.rerank(query, hits);
    const top = hits[0];
    const unpublishedLead = leading && (!top || leading.matched.some((t) => !top.matched!.includes(t))) ? leading : undefined;
    return { hits: hits.slice(0, limit), terms, ...(unpublishedLead ? { unpublishedLead } : {}) };
  }

  private tied(a: Hit, b: Hit): number {
    return compareTied(this.tieKeys.get(a.sourceId)!, this.tieKeys.get(b.sourceId)!);
  }

  /** Re-rank the lexical top by meaning (in place): see {@link SEMANTIC_WEIGHT}. */
  private rerank(query: string, hits: Hit[]): void {
    const best = hits[0]?.score ?? 0;
    for (const h of hits) h.relevance = best > 0 ? h.score / best : 0;
    const qv = wordVectors().embed(query);
    if (!qv || hits.length === 0) return;
    const depth = Math.min(RERANK_DEPTH, hits.length);
    for (let i = 0; i < depth; i++) {
      const h = hits[i]!;
      let sem = -1;
      for (const id of this.sources.get(h.sourceId) ?? []) {
        for (const v of this.entries[id]!.vectors) sem = Math.max(sem, cosine(qv, v));
      }
      if (sem === -1) continue;
      h.semantic = sem;
      h.relevance += SEMANTIC_WEIGHT * sem;
    }
    const top = hits.slice(0, depth).sort((a, b) => b.relevance - a.relevance || this.tied(a, b));
    hits.splice(0, depth, ...top);
  }
}

interface TieKey {
  id: string;
  createdAt: number;
  /** Document title or FAQ question. */
  title: string;
  /** Document content or FAQ answer. */
  text: string;
}

function tieKey(id: string, createdAt: number | undefined, title: string, text: string): TieKey {
  return { id, createdAt: createdAt ?? 0, title, text };
}

/**
 * The order of equally scored sources, the same on every instance that holds the same knowledge however it was
 * loaded (an account's rows load by id, and ids are random within a millisecond): older first, then by title (or
 * question), then by text (or answer), and only for identical entries made in the same millisecond by id.
 * Code-unit comparisons, not localeCompare: the order must not depend on an instance's locale or ICU data.
 */
function compareTied(x: TieKey, y: TieKey): number {
  if (x.createdAt !== y.createdAt) return x.createdAt - y.createdAt;
  if (x.title !== y.title) return x.title < y.title ? -1 : 1;
  if (x.text !== y.text) return x.text < y.text ? -1 : 1;
  return x.id < y.id ? -1 : x.id > y.id ? 1 : 0;
}

/** Embeddings of the texts the word-vector table knows a word of (unpublished entries are never re-ranked). */
function embedAll(texts: string[]): Float32Array[] {
  const out: Float32Array[] = [];
  for (const t of texts) {
    const v = wordVectors().embed(t);
    if (v) out.push(v);
  }
  return out;
}
