import type { Kysely } from 'kysely';
import type { Config } from '../../config.js';
import type { DB } from '../../db/schema.js';
import { answerWithFallback, OpenAiCompatibleProvider, type AnswerProvider } from './llm.js';
import type { AssistantAnswer, ChatTurn } from './answerer.js';
import { KnowledgeIndex } from './retrieval.js';
import { assistantRepository as repo } from './assistant.repository.js';
import { DEFAULT_SETTINGS, type AssistantSettings, type UpdateAssistantSettingsBody } from './assistant.schemas.js';

interface CachedIndex {
  version: number;
  index: KnowledgeIndex;
}

/**
 * One in-process index per account, rebuilt when the account's knowledge_version moved. The version is
 * read from the database on every reply (one indexed lookup), so a change made through any API node is
 * seen by every other node on its next message.
 */
export function createAssistantService(db: Kysely<DB>, config: Config, opts: { provider?: AnswerProvider; log?: (msg: string, err?: unknown) => void } = {}) {
  const cache = new Map<string, CachedIndex>();
  const building = new Map<string, Promise<CachedIndex>>();
  const provider: AnswerProvider | undefined =
    opts.provider ??
    (config.llm
      ? new OpenAiCompatibleProvider({ baseUrl: config.llm.baseUrl, apiKey: config.llm.apiKey ?? '', model: config.llm.model, timeoutMs: config.llm.timeoutMs })
      : undefined);

  async function indexFor(accountId: string): Promise<KnowledgeIndex> {
    const version = await repo.knowledgeVersion(db, accountId);
    const hit = cache.get(accountId);
    if (hit && hit.version === version) return hit.index;
    const key = `${accountId}:${version}`;
    let pending = building.get(key);
    if (!pending) {
      pending = (async () => {
        const { docs, faqs } = await repo.knowledge(db, accountId);
        const index = KnowledgeIndex.build(
          docs.map((d) => ({ id: d.id, title: d.title, content: d.content })),
          faqs.map((f) => ({ id: f.id, question: f.question, answer: f.answer, category: f.category })),
        );
        const entry = { version, index };
        const current = cache.get(accountId);
        if (!current || current.version <= version) cache.set(accountId, entry);
        return entry;
      })().finally(() => building.delete(key));
      building.set(key, pending);
    }
    return (await pending).index;
  }

  async function settings(accountId: string): Promise<AssistantSettings> {
    const json = await repo.settings(db, accountId);
    return { ...DEFAULT_SETTINGS, ...(json ? (JSON.parse(json) as Partial<AssistantSettings>) : {}) };
  }

  return {
    settings,

    async updateSettings(accountId: string, body: UpdateAssistantSettingsBody) {
      const next = { ...(await settings(accountId)), ...body };
      await repo.saveSettings(db, accountId, JSON.stringify(next));
      return next;
    },

    greetingText(s: AssistantSettings) {
      return s.greeting.replaceAll('{name}', s.name);
    },

    async reply(accountId: string, question: string, history: ChatTurn[], persona: AssistantSettings): Promise<AssistantAnswer> {
      const index = await indexFor(accountId);
      return answerWithFallback(index, provider, question, {
        persona: { name: persona.name, tone: persona.tone },
        history,
        onFallback: (reason, err) => {
          if (err) opts.log?.(`assistant provider failed, default answerer used: ${reason}`, err);
        },
      });
    },

    /** Pass the caller's transaction: on SQLite a query outside it would wait for it forever. */
    labelsOf: (conn: Kysely<DB>, accountId: string, ids: string[]) => repo.sourceLabels(conn, accountId, ids),
  };
}

export type AssistantService = ReturnType<typeof createAssistantService>;
