/**
 * Default, network-free answerer. Composes the reply from the best FAQ answer
 * or document passage, cites sources in rank order, and abstains (citing
 * nothing) when retrieval confidence is below a threshold.
 *
 * Confidence is a small logistic model over features that do not depend on
 * the size or wording of a particular knowledge base (all are shares in 0..1):
 * - coverage: IDF-weighted share of the question's terms that the best source
 *   contains (all its passages together);
 * - passageCoverage: the same share for the single best passage of that
 *   source — a question whose words are spread over unrelated paragraphs of a
 *   long article is less likely to be answered by it;
 * - unknownShare: IDF-weighted share of the question that is topical words the
 *   knowledge base never uses ("bitcoin", "Linux"); numbers, one/two-letter
 *   tokens and everyday words ("never", "halfway") carry no weight;
 * - runnerUpRatio: score of the second source / score of the best one;
 * - unpublishedLead: 1 when an unpublished entry (draft document, pending FAQ)
 *   outranks every published one on a term the best published source lacks —
 *   the customer asks about something the account has written but not
 *   published, so the best published article is likely beside the point;
 * - semantic: word-vector cosine of the question and the best source (vectors.ts), the meaning that shared
 *   words miss.
 * The weights were fitted on the eight held-out sets in bench/eval/heldout (never on
 * eval set A) with bench/eval/calibrate.ts; see docs/assistant.md.
 */
import { DEFAULT_MIN_CONFIDENCE, isChosenName } from './assistant.schemas.js';
import { asksOnlyAttribute, detectHandoff, isDissatisfied, leansOnPrevious, smallTalkKind, type SmallTalkKind } from './intent.js';
import type { Hit, KnowledgeIndex, QueryTerm } from './retrieval.js';
import { analyze, stripMarkup } from './text.js';

export interface Persona {
  name?: string;
  tone?: string;
}

export interface ChatTurn {
  role: string;
  content: string;
}

export interface AnswerOptions {
  persona?: Persona;
  history?: ChatTurn[];
  /** Minimum model confidence ({@link confidenceOf}) to answer (default {@link DEFAULT_MIN_CONFIDENCE}). */
  minConfidence?: number;
  /** A further source is cited only if its score is at least this share of the best one (default 0.35). */
  relatedScoreRatio?: number;
}

export interface AssistantAnswer {
  kind: 'answer' | 'no_answer' | 'handoff' | 'smalltalk';
  content: string;
  /** Source ids, best first, at most 3. Empty unless kind === 'answer'. */
  sources: string[];
  /** 0..1 */
  confidence: number;
  /** FAQ categories / document titles used, for analytics. */
  topics: string[];
}

// The default bar to answer lives with the settings that may change it per account (assistant.schemas.ts).
export { DEFAULT_MIN_CONFIDENCE };

export interface DecisionFeatures {
  coverage: number;
  passageCoverage: number;
  unknownShare: number;
  runnerUpRatio: number;
  unpublishedLead: number;
  semantic: number;
}

/** Logistic model weights (fitted by bench/eval/calibrate.ts on the held-out sets only). */
export const CONFIDENCE_MODEL: { bias: number; weights: DecisionFeatures } = {
  bias: -0.488,
  weights: { coverage: 1.048, passageCoverage: 1.119, unknownShare: -1.392, runnerUpRatio: -0.435, unpublishedLead: -1.789, semantic: 1.104 },
};

/** The model's inputs, in a fixed order (bench/eval/calibrate.ts fits one weight per entry). */
export const DECISION_FEATURES: readonly (keyof DecisionFeatures)[] = ['coverage', 'passageCoverage', 'unknownShare', 'runnerUpRatio', 'unpublishedLead', 'semantic'];

/** Features of the abstention decision for a ranked hit list and the analysed query. */
export function decisionFeatures(hits: readonly Hit[], terms: readonly QueryTerm[], unpublishedLead = false): DecisionFeatures {
  const best = hits[0];
  if (!best) return { coverage: 0, passageCoverage: 0, unknownShare: 1, runnerUpRatio: 0, unpublishedLead: unpublishedLead ? 1 : 0, semantic: 0 };
  const total = terms.reduce((s, t) => s + t.idf, 0);
  const unknown = terms.reduce((s, t) => s + (t.known ? 0 : t.idf), 0);
  return {
    coverage: best.coverage,
    passageCoverage: best.passageCoverage ?? best.coverage,
    unknownShare: total > 0 ? unknown / total : 0,
    runnerUpRatio: hits[1] && best.relevance > 0 ? Math.max(0, hits[1].relevance / best.relevance) : 0,
    unpublishedLead: unpublishedLead ? 1 : 0,
    semantic: best.semantic ?? 0,
  };
}

/** Probability-like confidence (0..1) that answering from the best hit is right. */
export function confidenceOf(f: DecisionFeatures, model = CONFIDENCE_MODEL): number {
  const w = model.weights;
  let z = model.bias;
  for (const k of DECISION_FEATURES) z += w[k] * f[k];
  return 1 / (1 + Math.exp(-z));
}
const MAX_SOURCES = 3;
const MAX_ANSWER_CHARS = 900;

/** How every reply to a question the knowledge base could not answer opens (the chat's variants after escalating too). */
export const UNKNOWN_TEXT = "I'm sorry, I don't know the answer to that — I couldn't find it in our help articles.";
/** How the reply that escalates after unanswered questions opens. */
export const UNANSWERED_ESCALATION_TEXT = "I'm sorry I couldn't answer your questions.";
/** The offer of a person that ends a reply; a plain "yes" after it accepts (`offersPerson`). */
const OFFER_TEXT = 'Would you like me to connect you with a person from our team?';
export const NO_ANSWER_TEXT = `${UNKNOWN_TEXT} ${OFFER_TEXT}`;
/** To "this is useless", "that's not what I asked": the reply before did not help; counted as unanswered. */
export const DISSATISFIED_TEXT = `I'm sorry that didn't help. ${OFFER_TEXT}`;
export const HANDOFF_TEXT = "Of course. I'm passing this conversation to a person from our team; they'll reply here as soon as they can.";

/** True when an assistant message ended by offering to connect a person (so a plain "yes" accepts it). */
export function offersPerson(content: string): boolean {
  return /would you like me to connect you with a person/i.test(content);
}

/** True when a reply text is the "don't know / offer a person" reply (for evaluation and analytics). */
export function isNoAnswerText(content: string): boolean {
  return /don'?t know|couldn'?t find|connect you with a person/i.test(content);
}

/** Retrieve + decide + compose. Pure and synchronous. */
export function answer(index: KnowledgeIndex, question: string, opts: AnswerOptions = {}): AssistantAnswer {
  const q = stripMarkup(question).trim();
  if (detectHandoff(q)) {
    return { kind: 'handoff', content: HANDOFF_TEXT, sources: [], confidence: 1, topics: [] };
  }
  const small = smallTalkKind(q);
  if (small) return { kind: 'smalltalk', content: smallTalkReply(small, opts.persona), sources: [], confidence: 1, topics: [] };
  if (isDissatisfied(q)) return { kind: 'no_answer', content: DISSATISFIED_TEXT, sources: [], confidence: 0, topics: [] };

  const decision = decide(index, q, opts);
  if (!decision) return noAnswer(0);
  if (decision.confidence < (opts.minConfidence ?? DEFAULT_MIN_CONFIDENCE)) return noAnswer(decision.confidence);
  let { cited } = decision;
  let content = compose(cited, opts.persona);
  // A passage one of the last replies already gave ("and express?" after the shipping article, "it says delivered but
  // I don't have it" after the tracking FAQ): giving it again word for word reads as a machine not listening.
  const recent = (opts.history ?? []).filter((t) => t.role === 'assistant').slice(-REPEAT_LOOKBACK);
  const shown = (passage: string) => recent.some((t) => t.content.includes(bodyOf({ passage })));
  // A paragraph given already is not given again: another paragraph of the article that shares more of this message's
  // words and was not given yet is the answer ("and india?" after the WhatsApp paragraph of the calls article: its
  // International Saver paragraph); failing that, a quote or the pointer.
  const best = cited[0]!;
  if (shown(best.passage)) {
    const asked = new Set(analyze(q));
    // Only one that shares more of the words than the given one: when that matches as well, pointing back is right.
    const given = sharedTerms(best.passage, asked);
    const other = sharingMost(index.passagesOf(best.sourceId), asked, given, (p) => !shown(p));
    // Else another source the reply cites that has the new words ("and quickbooks?" after the Xero FAQ: the
    // integrations article names both): it answers first, the given one stays cited after it. Not for a question
    // about an attribute of what was answered ("is there a fee?", "how much"): that is about the given answer, and
    // another source's "fee" is some other fee.
    const elsewhere = other || asksOnlyAttribute(q) ? undefined : unshownElsewhere(index, cited.slice(1), asked, given, shown);
    if (other) content = compose([{ ...best, passage: other }, ...cited.slice(1)], opts.persona);
    else if (elsewhere) {
      cited = [elsewhere, ...cited.filter((h) => h.sourceId !== elsewhere.sourceId)];
      content = compose(cited, opts.persona);
    } else {
      content = repeatedReply(best, asked);
      // The same quote as just given ("As in my answer above: …" twice): only the pointer and the offer of a person.
      if (content === recent.at(-1)?.content) content = pointerTo(best);
    }
  }
  return {
    kind: 'answer',
    content,
    sources: cited.map((h) => h.sourceId),
    confidence: round(decision.confidence),
    topics: [...new Set(cited.map((h) => (h.kind === 'faq' ? (h.category ?? 'faq') : h.title)))],
  };
}

/** How many distinct analysed terms of the message (`asked`) a text contains. */
function sharedTerms(text: string, asked: ReadonlySet<string>): number {
  return new Set(analyze(text).filter((t) => asked.has(t))).size;
}

/** Of `texts`, the one sharing the most terms with the message, more than `floor` (the earliest of equals); `eligible` may leave some out. */
function sharingMost(texts: readonly string[], asked: ReadonlySet<string>, floor: number, eligible: (text: string) => boolean = () => true): string | undefined {
  let best: string | undefined;
  let most = floor;
  for (const text of texts) {
    const shared = sharedTerms(text, asked);
    if (shared > most && eligible(text)) [best, most] = [text, shared];
  }
  return best;
}

/**
 * Of the other cited sources, the one with a passage not given yet that shares the most of the message's words, more
 * than `floor`, as a hit quoting that passage; the earliest-ranked of equals.
 */
function unshownElsewhere(index: KnowledgeIndex, others: readonly Hit[], asked: ReadonlySet<string>, floor: number, shown: (passage: string) => boolean): Hit | undefined {
  let found: Hit | undefined;
  let most = floor;
  for (const hit of others) {
    const passage = sharingMost(index.passagesOf(hit.sourceId), asked, most, (p) => !shown(p));
    if (passage) [found, most] = [{ ...hit, passage }, sharedTerms(passage, asked)];
  }
  return found;
}

/** How many of the assistant's last replies a passage counts as already given in. */
const REPEAT_LOOKBACK = 3;

/**
 * In place of a passage given again: the sentence of it that shares the most words with this message ("and
 * express?" → the sentence on expedited shipping), or, when no part of it does (or it is one sentence), a pointer to
 * it and the offer of a person ("yes" then accepts). Only a sentence the reply showed (a long passage is cut).
 */
function repeatedReply(best: Hit, asked: ReadonlySet<string>): string {
  const sentences = bodyOf(best).split(/(?<=[.!?])\s+|\n+/).map((x) => x.trim()).filter((x) => x && !x.endsWith('…'));
  const quote = sentences.length > 1 ? sharingMost(sentences, asked, 0) : undefined;
  return quote ? `As in my answer above: ${quote}` : pointerTo(best);
}

function pointerTo(best: Hit): string {
  const from = best.kind === 'document' ? `our article "${best.title}"` : `our FAQ "${best.title}"`;
  return `What I have on this is in my answer above, from ${from}. If that doesn't answer your question, would you like me to connect you with a person from our team?`;
}

export interface Decision {
  confidence: number;
  features: DecisionFeatures;
  cited: Hit[];
  hits: Hit[];
}

/**
 * Rank and select sources for a question (no abstention applied). Exposed so
 * an LLM provider can be given the same passages the default answerer would use.
 */
export function decide(index: KnowledgeIndex, question: string, opts: AnswerOptions = {}): Decision | undefined {
  let result = index.searchDetailed(question, 6);
  // A follow-up ("and for Canada?", "is that covered?") is read with the previous question.
  const prev = leansOnPrevious(question) ? previousQuestion(opts.history, question) : undefined;
  if (prev) {
    const merged = index.searchDetailed(`${prev.text} ${question}`, 6);
    // Read with a question that went unanswered only if that reading is confident enough to answer ("my phone was
    // stolen" abstained at 0.51 → "do I still have to pay for it?": together they find the stolen-phone article;
    // alone, the 5G FAQ). Otherwise alone: "can I return a helmet I wore once?" → "how do I return it" took on the
    // unknown words, where alone it finds the returns article.
    const use = merged.hits[0] !== undefined && (!prev.afterUnanswered || confidenceOf(decisionFeatures(merged.hits, merged.terms, merged.unpublishedLead !== undefined)) >= (opts.minConfidence ?? DEFAULT_MIN_CONFIDENCE));
    if (use) result = merged;
  }
  const { hits } = result;
  const best = hits[0];
  if (!best) return undefined;
  const features = decisionFeatures(hits, result.terms, result.unpublishedLead !== undefined);
  const ratio = opts.relatedScoreRatio ?? 0.35;
  // "Related enough to cite" stays lexical: a share of the best BM25 score among the hits.
  const topScore = Math.max(...hits.map((h) => h.score));
  const cited = hits.filter((h, i) => i === 0 || h.score >= topScore * ratio).slice(0, MAX_SOURCES);
  return { confidence: confidenceOf(features), features, cited, hits };
}

/**
 * The customer's last question before `current` (small talk and requests for a person skipped); when that one was
 * itself a follow-up, with the question it followed ("how do I return something" → "how long does that take?" →
 * "for Canada?"), up to three messages in all.
 */
function previousQuestion(history: ChatTurn[] | undefined, current: string): { text: string; afterUnanswered: boolean } | undefined {
  if (!history) return undefined;
  const taken: string[] = [];
  let afterUnanswered = false;
  for (let i = history.length - 1; i >= 0 && taken.length < 3; i--) {
    const t = history[i]!;
    if (t.role !== 'customer' && t.role !== 'user') continue;
    if (t.content.trim() === current.trim() || smallTalkKind(t.content) || detectHandoff(t.content) || isDissatisfied(t.content)) continue;
    const replied = history[i + 1];
    const unanswered = replied !== undefined && replied.role !== 'customer' && replied.role !== 'user' && wasUnanswered(replied.content);
    // A question that went unanswered is the last one taken (decide reads the follow-up with it only if confident).
    if (unanswered && taken.length > 0) break;
    taken.unshift(t.content);
    if (unanswered) {
      afterUnanswered = true;
      break;
    }
    if (!leansOnPrevious(t.content)) break;
  }
  return taken.length ? { text: taken.join(' '), afterUnanswered } : undefined;
}

function wasUnanswered(reply: string): boolean {
  return reply.startsWith(UNKNOWN_TEXT) || reply.startsWith(UNANSWERED_ESCALATION_TEXT);
}

/** The "I don't know, shall I connect a person?" reply (no sources), as the chat counts it towards `no_answer`. */
export function noAnswer(confidence: number): AssistantAnswer {
  return { kind: 'no_answer', content: NO_ANSWER_TEXT, sources: [], confidence: round(confidence), topics: [] };
}

/** The passage of a hit as a reply quotes it. */
function bodyOf(hit: Pick<Hit, 'passage'>): string {
  const body = hit.passage.trim();
  return body.length > MAX_ANSWER_CHARS ? `${body.slice(0, MAX_ANSWER_CHARS).replace(/\s+\S*$/, '')}…` : body;
}

function compose(cited: Hit[], persona?: Persona): string {
  const best = cited[0]!;
  const body = bodyOf(best);
  const intro = best.kind === 'document' ? `From our article "${best.title}":\n\n` : '';
  const more = cited.slice(1).filter((h) => h.title !== best.title);
  const seeAlso = more.length ? `\n\nSee also: ${more.map((h) => `"${h.title}"`).join(', ')}.` : '';
  const tail = persona?.tone && /casual|friendly|warm/i.test(persona.tone) ? '\n\nHope that helps!' : '';
  return `${intro}${body}${seeAlso}${tail}`;
}

function smallTalkReply(kind: SmallTalkKind, persona?: Persona): string {
  switch (kind) {
    case 'greeting':
      return isChosenName(persona?.name) ? `Hello! I'm ${persona.name}, how can I help you today?` : 'Hello! How can I help you today?';
    case 'thanks':
      return "You're welcome! Is there anything else I can help with?";
    case 'bye':
      return 'Thanks for chatting — have a great day!';
    case 'presence':
      return "Yes, I'm here! What can I help you with?";
    case 'unclear':
      return 'Could you tell me a little more about what you need help with?';
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}
