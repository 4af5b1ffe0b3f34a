/**
 * Default, network-free answerer. Composes the reply from the best FAQ answer
 * or document passage, cites sources in rank order, and abstains (citing
 * nothing) when retrieval confidence is below a calibrated threshold.
 *
 * Confidence = IDF-weighted share of the question's terms that the best
 * source matches ("coverage"). Unknown words (not in the knowledge base at
 * all) count fully against it, so a question whose distinctive words appear
 * nowhere in the knowledge base is not answered. Numbers and one/two-letter
 * tokens unknown to the index are ignored. The threshold is a property of the
 * measure, not of a knowledge base: "at least 40% of what the customer asked
 * about (by information content) is in the source we cite".
 */
import { detectHandoff, smallTalkKind } from './intent.js';
import type { Hit, KnowledgeIndex } from './retrieval.js';

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
  /** Minimum coverage of the best source to answer (default {@link DEFAULT_MIN_CONFIDENCE}). */
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

export const DEFAULT_MIN_CONFIDENCE = 0.4;
const MAX_SOURCES = 3;
const MAX_ANSWER_CHARS = 900;

export const NO_ANSWER_TEXT =
  "I'm sorry, I don't know the answer to that — I couldn't find it in our help articles. Would you like me to connect you with a person from our team?";
export const HANDOFF_TEXT = "Of course. I'm passing this conversation to a person from our team; they'll reply here as soon as they can.";

/** True when a reply text is the "don't know / offer a person" reply (for evaluation and analytics). */
export function isNoAnswerText(content: string): boolean {
  return /don'?t know|couldn'?t find|connect you with a person/i.test(content);
}

/** Retrieve + decide + compose. Pure and synchronous. */
export function answer(index: KnowledgeIndex, question: string, opts: AnswerOptions = {}): AssistantAnswer {
  const q = question.trim();
  if (detectHandoff(q)) {
    return { kind: 'handoff', content: HANDOFF_TEXT, sources: [], confidence: 1, topics: [] };
  }
  const small = smallTalkKind(q);
  if (small) return { kind: 'smalltalk', content: smallTalkReply(small, opts.persona), sources: [], confidence: 1, topics: [] };

  const decision = decide(index, q, opts);
  if (!decision) return noAnswer(0);
  if (decision.confidence < (opts.minConfidence ?? DEFAULT_MIN_CONFIDENCE)) return noAnswer(decision.confidence);
  const { cited } = decision;
  return {
    kind: 'answer',
    content: compose(cited, opts.persona),
    sources: cited.map((h) => h.sourceId),
    confidence: round(decision.confidence),
    topics: [...new Set(cited.map((h) => (h.kind === 'faq' ? (h.category ?? 'faq') : h.title)))],
  };
}

export interface Decision {
  confidence: number;
  cited: Hit[];
  hits: Hit[];
}

/**
 * Rank and select sources for a question (no abstention applied). Exposed so
 * an LLM provider can be given the same passages the default answerer would use.
 */
export function decide(index: KnowledgeIndex, question: string, opts: AnswerOptions = {}): Decision | undefined {
  let { hits } = index.searchDetailed(question, 6);
  // A short follow-up ("and for Canada?") is interpreted with the previous customer turn.
  const prev = lastCustomerTurn(opts.history, question);
  if (prev && question.split(/\s+/).length <= 6) {
    const merged = index.searchDetailed(`${prev} ${question}`, 6).hits;
    if (merged[0] && (!hits[0] || merged[0].coverage > hits[0].coverage)) hits = merged;
  }
  const best = hits[0];
  if (!best) return undefined;
  const ratio = opts.relatedScoreRatio ?? 0.35;
  const cited = hits.filter((h, i) => i === 0 || h.score >= best.score * ratio).slice(0, MAX_SOURCES);
  return { confidence: best.coverage, cited, hits };
}

function lastCustomerTurn(history: ChatTurn[] | undefined, current: string): string | undefined {
  if (!history) return undefined;
  for (let i = history.length - 1; i >= 0; i--) {
    const t = history[i]!;
    if ((t.role === 'customer' || t.role === 'user') && t.content.trim() !== current.trim()) return t.content;
  }
  return undefined;
}

function noAnswer(confidence: number): AssistantAnswer {
  return { kind: 'no_answer', content: NO_ANSWER_TEXT, sources: [], confidence: round(confidence), topics: [] };
}

function compose(cited: Hit[], persona?: Persona): string {
  const best = cited[0]!;
  let body = best.passage.trim();
  if (body.length > MAX_ANSWER_CHARS) body = `${body.slice(0, MAX_ANSWER_CHARS).replace(/\s+\S*$/, '')}…`;
  const intro = best.kind === 'document' ? `From our article "${best.title}":\n\n` : '';
  const more = cited.slice(1).filter((h) => h.title !== best.title);
  const seeAlso = more.length ? `\n\nSee also: ${more.map((h) => (h.kind === 'faq' ? `"${h.title}"` : `"${h.title}"`)).join(', ')}.` : '';
  const tail = persona?.tone && /casual|friendly|warm/i.test(persona.tone) ? '\n\nHope that helps!' : '';
  return `${intro}${body}${seeAlso}${tail}`;
}

function smallTalkReply(kind: 'greeting' | 'thanks' | 'bye', persona?: Persona): string {
  const me = persona?.name ? `I'm ${persona.name}, ` : "I'm the assistant, ";
  switch (kind) {
    case 'greeting':
      return `Hello! ${me}how can I help you today?`;
    case 'thanks':
      return "You're welcome! Is there anything else I can help with?";
    case 'bye':
      return 'Thanks for chatting — have a great day!';
  }
}

function round(n: number): number {
  return Math.round(n * 1000) / 1000;
}
