/**
 * LLM answer provider port + an OpenAI-compatible chat-completions adapter,
 * and `answerWithFallback`, which always falls back to the default answerer.
 */
import { request } from 'undici';
import { answer as defaultAnswer, decide, DEFAULT_MIN_CONFIDENCE, type AnswerOptions, type AssistantAnswer, type ChatTurn, type Persona } from './answerer.js';
import { detectHandoff, smallTalkKind } from './intent.js';
import type { Hit, KnowledgeIndex } from './retrieval.js';
import { stripMarkup } from './text.js';

export interface AnswerProviderInput {
  question: string;
  passages: Hit[];
  persona?: Persona;
  history?: ChatTurn[];
}

export interface AnswerProvider {
  answer(input: AnswerProviderInput, signal?: AbortSignal): Promise<{ content: string; sources: string[] }>;
}

export interface OpenAiCompatibleOptions {
  baseUrl: string;
  apiKey: string;
  model: string;
  /** Request timeout in ms (default 15 000). */
  timeoutMs?: number;
  temperature?: number;
  maxTokens?: number;
}

export class ProviderError extends Error {
  constructor(message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'ProviderError';
  }
}

const SOURCES_LINE = /^\s*SOURCES?\s*:\s*(.*)$/im;

/** Split the model reply into the visible text and the cited ids (only ids among `allowed` are kept, order preserved). */
export function parseCitations(reply: string, allowed: readonly string[]): { content: string; sources: string[] } {
  const allowedSet = new Set(allowed);
  const m = SOURCES_LINE.exec(reply);
  const sources: string[] = [];
  if (m) {
    for (const raw of m[1]!.split(/[,\s]+/)) {
      const id = raw.replace(/^[[\]("'`]+|[[\])"'`.;]+$/g, '').trim();
      if (id && allowedSet.has(id) && !sources.includes(id)) sources.push(id);
    }
  }
  const content = (m ? reply.slice(0, m.index) + reply.slice(m.index + m[0].length) : reply).trim();
  return { content, sources: sources.slice(0, 3) };
}

export function buildMessages(input: AnswerProviderInput): { role: 'system' | 'user' | 'assistant'; content: string }[] {
  const persona = input.persona?.name ? `You are ${input.persona.name}, ` : 'You are ';
  const tone = input.persona?.tone ? ` Tone: ${input.persona.tone}.` : '';
  const system =
    `${persona}a customer-support assistant. Answer ONLY from the knowledge passages below; never invent policies, prices or dates.` +
    ` If the passages do not answer the question, say you don't know and offer to connect the customer with a person.${tone}` +
    ` End your reply with a final line "SOURCES: <ids>" listing the ids of the passages you used, best first, comma separated (or "SOURCES:" with nothing if none).`;
  const ctx = input.passages
    .map((p) => `[${p.sourceId}] (${p.kind === 'faq' ? 'FAQ' : 'Article'}: ${p.title})\n${p.passage}`)
    .join('\n\n---\n\n');
  const msgs: { role: 'system' | 'user' | 'assistant'; content: string }[] = [
    { role: 'system', content: `${system}\n\nKnowledge passages:\n\n${ctx}` },
  ];
  for (const t of (input.history ?? []).slice(-6)) {
    msgs.push({ role: t.role === 'assistant' ? 'assistant' : 'user', content: t.content });
  }
  msgs.push({ role: 'user', content: input.question });
  return msgs;
}

/** OpenAI-compatible `POST {baseUrl}/chat/completions` provider. */
export class OpenAiCompatibleProvider implements AnswerProvider {
  constructor(private readonly opts: OpenAiCompatibleOptions) {}

  async answer(input: AnswerProviderInput, signal?: AbortSignal): Promise<{ content: string; sources: string[] }> {
    const timeout = AbortSignal.timeout(this.opts.timeoutMs ?? 15_000);
    const combined = signal ? AbortSignal.any([signal, timeout]) : timeout;
    const url = `${this.opts.baseUrl.replace(/\/+$/, '')}/chat/completions`;
    let res;
    try {
      res = await request(url, {
        method: 'POST',
        headers: { authorization: `Bearer ${this.opts.apiKey}`, 'content-type': 'application/json' },
        body: JSON.stringify({
          model: this.opts.model,
          messages: buildMessages(input),
          temperature: this.opts.temperature ?? 0.2,
          ...(this.opts.maxTokens ? { max_tokens: this.opts.maxTokens } : {}),
        }),
        signal: combined,
      });
    } catch (err) {
      throw new ProviderError(timeout.aborted ? 'provider timeout' : 'provider request failed', err);
    }
    let text: string;
    try {
      text = await res.body.text();
    } catch (err) {
      throw new ProviderError(timeout.aborted ? 'provider timeout' : 'provider body read failed', err);
    }
    if (res.statusCode < 200 || res.statusCode >= 300) throw new ProviderError(`provider HTTP ${res.statusCode}`);
    let json: unknown;
    try {
      json = JSON.parse(text);
    } catch (err) {
      throw new ProviderError('provider returned invalid JSON', err);
    }
    const content = (json as { choices?: { message?: { content?: unknown } }[] })?.choices?.[0]?.message?.content;
    if (typeof content !== 'string' || !content.trim()) throw new ProviderError('provider returned no content');
    return parseCitations(content, input.passages.map((p) => p.sourceId));
  }
}

/**
 * Below the answer threshold, questions down to this confidence still go to the provider, which reads the
 * passages and decides: it answers only by citing one (otherwise the default answerer abstains as usual). The
 * lexical model cannot tell a low-overlap paraphrase from an unanswerable look-alike; a language model can, so an
 * operator who configures one gets that judgement where it matters. Lower than this, retrieval found nothing
 * worth a model call.
 */
export const LLM_REVIEW_FLOOR = 0.15;

export interface FallbackOptions extends AnswerOptions {
  signal?: AbortSignal;
  /** Lowest confidence at which the provider is asked (default {@link LLM_REVIEW_FLOOR}). */
  reviewFloor?: number;
  /** Called when the provider was not used (for logging/metrics). */
  onFallback?: (reason: string, err?: unknown) => void;
}

/**
 * Answer with the provider when retrieval found something worth reading (confidence at least the review floor);
 * on any failure, timeout, or a reply that cites none of the given passages, return the default answerer's reply
 * — which, below the answer threshold, is "I don't know". Handoff, small talk and questions below the floor never
 * reach the provider.
 */
export async function answerWithFallback(
  index: KnowledgeIndex,
  provider: AnswerProvider | undefined,
  question: string,
  opts: FallbackOptions = {},
): Promise<AssistantAnswer & { provider: 'llm' | 'default' }> {
  // As the default answerer reads it (answerer.ts): markup a widget passed through is not the customer's words.
  question = stripMarkup(question);
  const fallback = (reason: string, err?: unknown) => {
    opts.onFallback?.(reason, err);
    return { ...defaultAnswer(index, question, opts), provider: 'default' as const };
  };
  if (!provider) return fallback('no provider');
  if (detectHandoff(question) || smallTalkKind(question)) return fallback('not a knowledge question');
  const d = decide(index, question, opts);
  const floor = Math.min(opts.reviewFloor ?? LLM_REVIEW_FLOOR, opts.minConfidence ?? DEFAULT_MIN_CONFIDENCE);
  if (!d || d.confidence < floor) return fallback('low confidence');
  const passages = d.hits.slice(0, 5);
  try {
    const out = await provider.answer(
      { question, passages, ...(opts.persona ? { persona: opts.persona } : {}), ...(opts.history ? { history: opts.history } : {}) },
      opts.signal,
    );
    const allowed = new Set(passages.map((p) => p.sourceId));
    const sources = out.sources.filter((s) => allowed.has(s)).slice(0, 3);
    if (sources.length === 0) return fallback('no valid citation');
    if (!out.content.trim()) return fallback('empty reply');
    const byId = new Map(passages.map((p) => [p.sourceId, p]));
    return {
      kind: 'answer',
      content: out.content.trim(),
      sources,
      confidence: Math.round(d.confidence * 1000) / 1000,
      topics: [...new Set(sources.map((s) => byId.get(s)!).map((h) => (h.kind === 'faq' ? (h.category ?? 'faq') : h.title)))],
      provider: 'llm',
    };
  } catch (err) {
    return fallback(err instanceof ProviderError ? err.message : 'provider error', err);
  }
}
