import type { Kysely } from 'kysely';
import type { Config } from '../../config.js';
import { systemClock, type Clock } from '../../lib/clock.js';
import type { DB } from '../../db/schema.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import { rejectBlank } from '../../http/errors.js';
import { answerWithFallback, OpenAiCompatibleProvider, PausingProvider, PROVIDER_FAILURES, ProviderError, type AnswerProvider, type ProviderFailure } from './llm.js';
import { decide, type AssistantAnswer, type ChatTurn } from './answerer.js';
import { EMAILS_IN_TEXT, stripMarkup } from './text.js';
import { KnowledgeIndex, type KnowledgeDoc, type KnowledgeFaq } from './retrieval.js';
import { assistantRepository as repo } from './assistant.repository.js';
import { accountsRepository } from '../accounts/accounts.repository.js';
import {
  DEFAULT_SETTINGS,
  isChosenName,
  UNNAMED_GREETING,
  type AssistantPreview,
  type AssistantSettings,
  type PreviewBody,
  type UpdateAssistantSettingsBody,
} from './assistant.schemas.js';

interface CachedIndex {
  version: number;
  index: KnowledgeIndex;
  /** Newest updated_at among the rows the index holds. */
  watermark: number;
}

/**
 * Rows changed this long before the watermark are looked at again on refresh: a transaction that committed
 * late with an older updated_at (or a node whose clock lags) is still picked up.
 */
const REFRESH_OVERLAP_MS = 60_000;

type IndexRows = Awaited<ReturnType<typeof repo.knowledge>>;
const toDoc = (d: IndexRows['docs'][number]): KnowledgeDoc => ({
  id: d.id,
  title: d.title,
  content: d.content,
  createdAt: d.created_at,
  citable: d.status === 'active',
});
const toFaq = (f: IndexRows['faqs'][number]): KnowledgeFaq => ({
  id: f.id,
  question: f.question,
  answer: f.answer,
  category: f.category,
  createdAt: f.created_at,
  citable: f.status === 'approved',
});

/** An account's assistant settings from its stored JSON (null: none saved yet), defaults filling the rest. */
export const settingsFrom = (json: string | null): AssistantSettings => ({ ...DEFAULT_SETTINGS, ...(json ? (JSON.parse(json) as Partial<AssistantSettings>) : {}) });

/** How many of the best-matching sources a preview lists. */
const PREVIEW_MATCHES = 5;

/** At most one warning per kind of provider failure in this period (with a count of the ones left out). */
const PROVIDER_WARN_INTERVAL_MS = 60_000;

/**
 * One in-process index per account, kept in step with the account's knowledge version. The version is read
 * on every reply (one indexed lookup), so a change made through any API node is seen by every node on its
 * next message. A changed version refreshes the index incrementally (rows changed since the watermark are
 * upserted with their status, deleted ids are removed) rather than rebuilding it: a 10,000-document rebuild takes
 * seconds, a refresh milliseconds.
 */
export function createAssistantService(
  db: Kysely<DB>,
  config: Config,
  opts: { provider?: AnswerProvider; clock?: Clock; log?: (msg: string, fields: { err: unknown; accountId: string; notLogged: number }) => void } = {},
) {
  const cache = new Map<string, CachedIndex>();
  const inflight = new Map<string, Promise<CachedIndex>>();
  const clock = opts.clock ?? systemClock;
  const provider: AnswerProvider | undefined =
    opts.provider ??
    (config.llm
      ? new PausingProvider(
          new OpenAiCompatibleProvider({ baseUrl: config.llm.baseUrl, apiKey: config.llm.apiKey ?? '', model: config.llm.model, timeoutMs: config.llm.timeoutMs }),
          clock,
        )
      : undefined);

  /** Replies the LLM failed to give, by reason, since start (the metrics endpoint reads them). */
  const providerFailures = Object.fromEntries(PROVIDER_FAILURES.map((r) => [r, 0])) as Record<ProviderFailure, number>;

  // A provider that is down fails every reply: one warning per reason per interval, not one per customer message.
  const warned = new Map<string, { at: number; notLogged: number }>();
  function warnProviderFailure(reason: string, err: unknown, accountId: string) {
    const now = clock.now();
    const last = warned.get(reason);
    if (last && now - last.at < PROVIDER_WARN_INTERVAL_MS) {
      last.notLogged++;
      return;
    }
    warned.set(reason, { at: now, notLogged: 0 });
    opts.log?.(`assistant provider failed, default answerer used: ${reason}`, { err, accountId, notLogged: last?.notLogged ?? 0 });
  }

  async function build(accountId: string, version: number): Promise<CachedIndex> {
    const { docs, faqs } = await repo.knowledge(db, accountId);
    const index = KnowledgeIndex.build(docs.map(toDoc), faqs.map(toFaq));
    const watermark = Math.max(0, ...docs.map((d) => d.updated_at), ...faqs.map((f) => f.updated_at));
    return { version, index, watermark };
  }

  async function refresh(entry: CachedIndex, accountId: string, version: number): Promise<CachedIndex> {
    const since = entry.watermark - REFRESH_OVERLAP_MS;
    const [existing, changed] = await Promise.all([repo.ids(db, accountId), repo.knowledge(db, accountId, since)]);
    // Synchronous from here on: no reply can search a half-updated index.
    for (const id of entry.index.sourceIds()) if (!existing.has(id)) entry.index.remove(id);
    for (const d of changed.docs) entry.index.upsertDocument(toDoc(d));
    for (const f of changed.faqs) entry.index.upsertFaq(toFaq(f));
    const watermark = Math.max(entry.watermark, ...changed.docs.map((d) => d.updated_at), ...changed.faqs.map((f) => f.updated_at));
    return { version, index: entry.index, watermark };
  }

  /** `known`: the version the caller has just read (chat reads it with the conversation), saving a query. */
  async function indexFor(accountId: string, known?: number): Promise<KnowledgeIndex> {
    const version = known ?? (await accountsRepository.knowledgeVersion(db, accountId));
    const hit = cache.get(accountId);
    if (hit && hit.version === version) return hit.index;
    // One build or refresh per account at a time; concurrent replies wait for it.
    let pending = inflight.get(accountId);
    if (!pending) {
      pending = (hit ? refresh(hit, accountId, version) : build(accountId, version))
        .then((entry) => {
          cache.set(accountId, entry);
          return entry;
        })
        .finally(() => inflight.delete(accountId));
      inflight.set(accountId, pending);
    }
    const entry = await pending;
    // A refresh that started before a newer change saw an older version: catch up once more.
    return entry.version >= version ? entry.index : indexFor(accountId);
  }

  /**
   * `knowledgeVersion`: the account's, when the caller has just read it (else it is read here). The answer's
   * `provider` says whether the LLM wrote it or the built-in answerer did.
   */
  async function reply(
    accountId: string,
    question: string,
    history: ChatTurn[],
    persona: AssistantSettings,
    knowledgeVersion?: number,
  ): Promise<AssistantAnswer & { provider: 'llm' | 'default' }> {
    return replyFrom(await indexFor(accountId, knowledgeVersion), accountId, question, history, persona);
  }

  /** reply() on an index already in hand. */
  function replyFrom(index: KnowledgeIndex, accountId: string, question: string, history: ChatTurn[], persona: AssistantSettings) {
    return answerWithFallback(index, provider, question, {
      persona: { name: persona.name, tone: persona.tone },
      minConfidence: persona.minConfidence,
      history,
      onFallback: (reason, err) => {
        if (!err) return;
        providerFailures[err instanceof ProviderError ? err.reason : 'other']++;
        warnProviderFailure(reason, err, accountId);
      },
    });
  }

  async function settings(accountId: string): Promise<AssistantSettings> {
    return settingsFrom(await repo.settings(db, accountId));
  }

  return {
    settings,

    async updateSettings(accountId: string, body: UpdateAssistantSettingsBody) {
      // Customers read all three: a greeting of spaces, or "Hi! I'm    ", is a mistake.
      for (const f of ['name', 'greeting', 'tone'] as const) rejectBlank(`body.${f}`, body[f]);
      // Read and written in one transaction, the read locked: two PUTs of different fields both stay.
      // Only what the owner set is stored, so a field left at its default (the answer bar above all, a calibrated value)
      // follows the service's default when that changes; a null (the bar's way back to it) removes the field.
      return writeTransaction(db, async (trx) => {
        const raw = await repo.settings(trx, accountId, true);
        const stored: Record<string, unknown> = { ...(raw ? (JSON.parse(raw) as Record<string, unknown>) : {}), ...body };
        for (const [k, v] of Object.entries(stored)) if (v === null) delete stored[k];
        const json = JSON.stringify(stored);
        await repo.saveSettings(trx, accountId, json);
        return settingsFrom(json);
      });
    },

    greetingText(s: AssistantSettings) {
      if (!isChosenName(s.name) && s.greeting === DEFAULT_SETTINGS.greeting) return UNNAMED_GREETING;
      return s.greeting.replaceAll('{name}', () => s.name);
    },

    reply,

    /**
     * What the assistant would answer to `content` after `history`, and the published sources that match it best, for
     * the owner trying the knowledge base: nothing is written, no event is emitted. The knowledge-base answer only: in
     * a conversation a workflow with a reply answers first, a request for a person escalates and asks for an email,
     * and a second unanswered question in a row escalates.
     */
    async preview(accountId: string, body: PreviewBody): Promise<AssistantPreview> {
      rejectBlank('body.content', body.content);
      const history = body.history ?? [];
      // As the chat reads a message: without its email addresses (contact details, not words to look up).
      const question = body.content.replace(EMAILS_IN_TEXT, ' ');
      // One read of the knowledge version for the reply and the matches, beside the settings' read.
      const [index, persona] = await Promise.all([indexFor(accountId), settings(accountId)]);
      const answered = await replyFrom(index, accountId, question, history, persona);
      const aboutKnowledge = answered.kind === 'answer' || answered.kind === 'no_answer';
      const decision = aboutKnowledge ? decide(index, stripMarkup(question).trim(), { history }) : undefined;
      return {
        outcome: answered.kind,
        reply: answered.content,
        sources: answered.sources,
        confidence: aboutKnowledge ? Math.round(answered.confidence * 1000) / 1000 : null,
        minConfidence: persona.minConfidence,
        provider: answered.provider,
        matches: (decision?.hits ?? []).slice(0, PREVIEW_MATCHES).map((h) => ({
          id: h.sourceId,
          type: h.kind,
          title: h.title,
          passage: h.passage,
          coverage: Math.round(h.coverage * 1000) / 1000,
        })),
      };
    },

    /** Whether an LLM is configured, how often it failed since start, and whether it is being left alone for now. */
    llm: {
      configured: provider !== undefined,
      failures: providerFailures as Readonly<Record<ProviderFailure, number>>,
      get paused() {
        return provider instanceof PausingProvider && provider.paused;
      },
    },

    /** Pass the caller's transaction: on SQLite a query outside it would wait for it forever. */
    labelsOf: (conn: Kysely<DB>, accountId: string, ids: string[]) => repo.sourceLabels(conn, accountId, ids),
  };
}

export type AssistantService = ReturnType<typeof createAssistantService>;
