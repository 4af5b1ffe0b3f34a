import type { Kysely, Selectable } from 'kysely';
import type { ConversationsTable, DB, MessagesTable } from '../../db/schema.js';
import { notFound } from '../../http/errors.js';
import { parseTimeRange } from '../../http/time-range.js';
import { toIso } from '../../lib/clock.js';
import { conversationsRepository as repo } from './conversations.repository.js';
import type { ListConversationsQuery } from './conversations.schemas.js';
import { readSnapshot } from '../../db/snapshot.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import type { RundownsService } from '../rundowns/rundowns.service.js';
import type { EventBus } from '../webhooks/events.js';

/** How far before a conversation's start the erasure looks for its events (clocks of several nodes differ). */
const CLOCK_SKEW_MARGIN_MS = 5 * 60_000;

/** Ids per IN list: a long conversation's events stay well under SQLite's and PostgreSQL's bound-value limits. */
const ERASE_CHUNK = 500;

/** Conversations read per page when erasing everything of one customer. */
const CUSTOMER_ERASE_BATCH = 100;

/** The conversation an event's payload is about, if it names one. */
function conversationOf(payload: string): unknown {
  return parseJson<{ data?: { conversationId?: unknown } } | null>(payload, null)?.data?.conversationId;
}

/** JSON columns are written by this service only, but a bad row must not take a whole list down. */
function parseJson<T>(text: string | null, fallback: T): T {
  if (text === null) return fallback;
  try {
    return JSON.parse(text) as T;
  } catch {
    return fallback;
  }
}

const toIsoOrNull = (ms: number | null) => (ms === null ? null : toIso(ms));

export function toMessage(m: Pick<MessagesTable, 'id' | 'role' | 'content' | 'created_at' | 'sources'>) {
  const sources = m.role === 'assistant' ? parseJson<string[] | null>(m.sources, null) : null;
  return {
    id: m.id,
    role: m.role,
    content: m.content,
    timestamp: toIso(m.created_at),
    ...(Array.isArray(sources) ? { sources } : {}),
  };
}

/** The one serialisation of a conversation, for the owner's API and the chat channel alike. */
export function toConversationRecord(c: Selectable<ConversationsTable>, messages: Parameters<typeof toMessage>[0][]) {
  return {
    id: c.id,
    customerId: c.customer_id,
    status: c.status,
    messages: messages.map(toMessage),
    tags: parseJson<string[]>(c.tags, []),
    createdAt: toIso(c.created_at),
    endedAt: toIsoOrNull(c.ended_at),
    customerLabel: c.customer_label,
    customerEmail: c.customer_email,
    persona: c.persona,
    metadata: parseJson<Record<string, unknown>>(c.metadata, {}),
    topic: c.topic,
    outcome: c.outcome,
    escalationReason: c.escalation_reason,
    escalatedAt: toIsoOrNull(c.escalated_at),
    lastMessageAt: toIso(c.last_message_at),
    messageCount: Number(c.message_count),
  };
}

export function createConversationsService(db: Kysely<DB>, events: EventBus, rundowns: Pick<RundownsService, 'forgetConversation'>) {
  /** Conversations erased by this process since start, by reason (the metrics endpoint reads them). */
  const erased = { request: 0, retention: 0 };
  /**
   * `erase`'s work: answers whether this call erased the conversation (false: there is none, or another request or
   * worker erased it first). `retention`: erased by CONVERSATION_RETENTION, without the notice (see eraseEnded).
   */
  async function eraseIfThere(accountId: string, id: string, reason: keyof typeof erased): Promise<boolean> {
    const done = await writeTransaction(db, async (trx) => {
      // Under the row's lock: a message, an end or contact details in flight finish first.
      const c = await repo.find(trx, accountId, id, true);
      if (!c) return false;
      // Events carry the emitting node's clock: a node a little behind the one that started the conversation dates
      // an early event before its start.
      const since = c.created_at - CLOCK_SKEW_MARGIN_MS;
      const eventIds = (await repo.eventsOf(trx, accountId, id, since)).filter((e) => conversationOf(e.payload) === id).map((e) => e.id);
      for (let i = 0; i < eventIds.length; i += ERASE_CHUNK) {
        const chunk = eventIds.slice(i, i + ERASE_CHUNK);
        await repo.deleteDeliveriesOf(trx, accountId, chunk);
        await repo.deleteEvents(trx, accountId, chunk);
      }
      await repo.deleteIdempotencyAnswers(trx, accountId, id);
      // Rundowns quote customers' wording: reworded here, while the messages are still there to match against.
      await rundowns.forgetConversation(trx, accountId, { id, createdAt: c.created_at, topic: c.topic });
      const deleted = await repo.delete(trx, accountId, id);
      // The owner's own systems got this conversation through webhooks: they are told to erase it too.
      if (deleted && reason === 'request') await events.emit(trx, accountId, 'conversation.erased', { conversationId: id, customerId: c.customer_id });
      return deleted;
    });
    if (done) erased[reason]++;
    return done;
  }
  return {
    erased: erased as Readonly<typeof erased>,

    async list(accountId: string, q: ListConversationsQuery) {
      const range = parseTimeRange(q);
      const f = { ...range, status: q.status ?? 'all', customerId: q.customerId, limit: q.limit, offset: q.offset };
      const { rows, total } = await repo.list(db, accountId, f);
      return {
        conversations: rows.map((r) => ({
          id: r.id,
          customerId: r.customer_id,
          status: r.status,
          tags: parseJson<string[]>(r.tags, []),
          messageCount: Number(r.message_count),
          createdAt: toIso(r.created_at),
          endedAt: toIsoOrNull(r.ended_at),
          outcome: r.outcome,
          topic: r.topic,
        })),
        total,
        limit: f.limit,
        offset: f.offset,
      };
    },

    async get(accountId: string, id: string) {
      // One snapshot, so messageCount and the messages listed agree while the conversation is being written.
      const [c, messages] = await readSnapshot(db, async (trx) => {
        const row = await repo.find(trx, accountId, id);
        return [row, row ? await repo.messages(trx, accountId, id) : []] as const;
      });
      if (!c) throw notFound('conversation', id);
      return toConversationRecord(c, messages);
    },

    /**
     * Erases a conversation and what Parley keeps of it: its messages and workflow runs, the events emitted about it
     * and their webhook deliveries with their attempts (a delivery not yet sent never will be), the answers kept
     * for Idempotency-Keys of requests about it, and its wording quoted by rundowns (and untouched FAQs they suggested); then emits conversation.erased (the ids only), so that the owner's
     * systems that got it through webhooks erase it too. One transaction, taken under the conversation row's lock: a message,
     * an end or contact details in flight either committed before (and is erased with the rest) or finds no
     * conversation (404) and writes nothing.
     */
    async erase(accountId: string, id: string) {
      if (!(await eraseIfThere(accountId, id, 'request'))) throw notFound('conversation', id);
      return { deleted: true };
    },

    /**
     * Erases every conversation of one customer, as `erase` does each (its own transaction, its own conversation.erased
     * notice), oldest first; one erased meanwhile by another request is skipped. Answers how many this call erased.
     * Fails part-way only on a database error: what was erased stays erased, and calling again finishes the rest.
     */
    async eraseCustomer(accountId: string, customerId: string) {
      let count = 0;
      let after: { createdAt: number; id: string } | null = null;
      for (;;) {
        const rows = await repo.ofCustomerAfter(db, accountId, customerId, after, CUSTOMER_ERASE_BATCH);
        for (const r of rows) if (await eraseIfThere(accountId, r.id, 'request')) count++;
        const last = rows.at(-1);
        if (!last || rows.length < CUSTOMER_ERASE_BATCH) return { deleted: true, count };
        after = { createdAt: last.created_at, id: last.id };
      }
    },

    /**
     * Erases conversations that ended before `before` (CONVERSATION_RETENTION), a batch at a time, each in its own
     * transaction. No conversation.erased is emitted: keeping the owner's copies is the owner's own policy. Another
     * worker erasing the same one first is not an error. Answers how many it erased.
     */
    async eraseEnded(before: number, signal?: AbortSignal, batch = 100) {
      let count = 0;
      for (;;) {
        const rows = await repo.endedBefore(db, before, batch);
        for (const r of rows) {
          if (signal?.aborted) return count;
          if (await eraseIfThere(r.account_id, r.id, 'retention')) count++;
        }
        if (rows.length < batch) return count;
      }
    },
  };
}

export type ConversationsService = ReturnType<typeof createConversationsService>;
