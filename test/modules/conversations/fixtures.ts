import type { Insertable, Kysely } from 'kysely';
import type { ConversationsTable, DB, MessagesTable } from '../../../src/db/schema.js';
import { newId } from '../../../src/lib/ids.js';

export type ConvFixture = Partial<Omit<Insertable<ConversationsTable>, 'tags'>> & { created_at: number; tags?: string[] };

/**
 * Inserts a conversation row as the chat channel leaves it, with the timestamps given: the read API must not
 * depend on how rows were written, only on the documented semantics of the columns.
 */
export async function insertConversation(db: Kysely<DB>, accountId: string, f: ConvFixture): Promise<string> {
  const row = conversationRow(accountId, f);
  await db.insertInto('conversations').values(row).execute();
  return row.id;
}

/** The row insertConversation inserts, for a test that inserts many in one statement. */
export function conversationRow(accountId: string, f: ConvFixture) {
  return {
    id: f.id ?? newId('conv', f.created_at),
    account_id: accountId,
    customer_id: f.customer_id ?? 'cust_x',
    customer_label: f.customer_label ?? 'Visitor',
    customer_email: f.customer_email ?? null,
    persona: f.persona ?? null,
    metadata: f.metadata ?? '{}',
    status: f.status ?? 'active',
    outcome: f.outcome ?? null,
    escalation_reason: f.escalation_reason ?? null,
    tags: JSON.stringify(f.tags ?? []),
    topic: f.topic ?? null,
    message_count: f.message_count ?? 0,
    created_at: f.created_at,
    last_message_at: f.last_message_at ?? f.created_at,
    escalated_at: f.escalated_at ?? null,
    ended_at: f.ended_at ?? null,
  } satisfies Insertable<ConversationsTable>;
}

export async function insertMessage(db: Kysely<DB>, accountId: string, conversationId: string, m: Partial<MessagesTable> & { created_at: number }) {
  const id = m.id ?? newId('msg', m.created_at);
  await db
    .insertInto('messages')
    .values({
      id,
      account_id: accountId,
      conversation_id: conversationId,
      role: m.role ?? 'customer',
      content: m.content ?? 'hello',
      sources: m.sources ?? null,
      created_at: m.created_at,
      seq: m.seq ?? 0,
    })
    .execute();
  return id;
}

export const T0 = Date.UTC(2026, 2, 1); // 2026-03-01T00:00:00.000Z
export const MIN = 60_000;
export const HOUR = 3_600_000;
export const DAY = 86_400_000;
export const iso = (ms: number) => new Date(ms).toISOString();

/**
 * The hand-computed scenario. Over [T0, T0+1d): c1..c5 → 5 conversations, 22 messages, 3 ended (c1, c2, c4)
 * of which 1 resolved (c1), 2 ever escalated (c2, c3); topics billing 2, shipping 1. c0 sits 1 ms before T0
 * and c6 exactly at T0+1d, so both fall outside the day. Account B's conversation is inside the day.
 */
export async function seedScenario(db: Kysely<DB>, a: string, b: string) {
  const c0 = await insertConversation(db, a, {
    created_at: T0 - 1, customer_id: 'cust_4', status: 'ended', outcome: 'resolved', ended_at: T0 + 5 * MIN, message_count: 10, topic: 'returns',
  });
  const c1 = await insertConversation(db, a, {
    created_at: T0, customer_id: 'cust_1', status: 'ended', outcome: 'resolved', ended_at: T0 + 10 * MIN, message_count: 5, topic: 'billing', tags: ['vip', 'card'],
  });
  const c2 = await insertConversation(db, a, {
    created_at: T0 + HOUR, customer_id: 'cust_2', customer_label: 'Ada', customer_email: 'ada@example.com', persona: 'friendly',
    metadata: JSON.stringify({ plan: 'gold', seats: 3 }), status: 'escalated', outcome: 'escalated', escalation_reason: 'customer_request',
    escalated_at: T0 + HOUR + 5 * MIN, ended_at: T0 + 2 * HOUR, last_message_at: T0 + HOUR + 4 * MIN, message_count: 8, topic: 'billing',
  });
  const c3 = await insertConversation(db, a, {
    created_at: T0 + 2 * HOUR, customer_id: 'cust_1', status: 'escalated', escalation_reason: 'no_answer', escalated_at: T0 + 2 * HOUR + MIN, message_count: 4,
  });
  const c4 = await insertConversation(db, a, {
    created_at: T0 + 3 * HOUR, customer_id: 'cust_3', status: 'ended', outcome: 'unresolved', ended_at: T0 + 4 * HOUR, message_count: 3, topic: 'shipping',
  });
  const c5 = await insertConversation(db, a, { created_at: T0 + 4 * HOUR, customer_id: 'cust_1', status: 'active', message_count: 2 });
  const c6 = await insertConversation(db, a, {
    created_at: T0 + DAY, customer_id: 'cust_2', status: 'ended', outcome: 'resolved', ended_at: T0 + DAY + MIN, message_count: 6, topic: 'shipping',
  });
  const other = await insertConversation(db, b, {
    created_at: T0 + 30 * MIN, customer_id: 'cust_1', status: 'ended', outcome: 'resolved', ended_at: T0 + HOUR, message_count: 100, topic: 'billing',
  });
  return { c0, c1, c2, c3, c4, c5, c6, other };
}
