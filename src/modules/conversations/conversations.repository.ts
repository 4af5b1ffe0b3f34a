import type { Kysely, SelectQueryBuilder, Transaction } from 'kysely';
import { lockingRead } from '../../db/locks.js';
import { countAlone, pageLimit, totalColumn, totalOf } from '../../db/pagination.js';
import type { DB } from '../../db/schema.js';
import type { TimeRange } from '../../http/time-range.js';
import { accountNotBeingDeleted } from '../accounts/accounts.repository.js';
import { deliveriesRepository } from '../webhooks/webhooks.repository.js';

type Conn = Kysely<DB> | Transaction<DB>;

/** The createdAt window every conversation read and every analytics figure shares: [from, to). */
export function createdIn<O>(q: SelectQueryBuilder<DB, 'conversations', O>, range: TimeRange) {
  if (range.from !== undefined) q = q.where('created_at', '>=', range.from);
  if (range.to !== undefined) q = q.where('created_at', '<', range.to);
  return q;
}

export interface ConversationFilter extends TimeRange {
  status: 'active' | 'ended' | 'escalated' | 'all';
  customerId?: string;
  limit: number;
  offset: number;
}

export const conversationsRepository = {
  async list(db: Conn, accountId: string, f: ConversationFilter) {
    let q = createdIn(db.selectFrom('conversations').where('account_id', '=', accountId), f);
    if (f.status !== 'all') q = q.where('status', '=', f.status);
    if (f.customerId !== undefined) q = q.where('customer_id', '=', f.customerId);
    // Deferred join: the page's ids come from the index alone (every list index ends in created_at, id), so
    // a deep offset skips index entries instead of fetching, then discarding, thousands of table rows.
    const pageIds = q.select('id').orderBy('created_at', 'desc').orderBy('id', 'desc').limit(pageLimit(f.limit)).offset(f.offset);
    const rows = await db
      .selectFrom('conversations')
      .select(['id', 'customer_id', 'status', 'tags', 'message_count', 'created_at', 'ended_at', 'outcome', 'topic', totalColumn(q)])
      .where('account_id', '=', accountId)
      .where('id', 'in', pageIds)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    return { rows, total: await totalOf(rows[0]?.total, f.offset, countAlone(q)) };
  },

  /** `lock`: read under the row's lock until the transaction ends (locks.ts), as an erasure does. */
  find(db: Conn, accountId: string, id: string, lock = false) {
    const q = db.selectFrom('conversations').selectAll().where('account_id', '=', accountId).where('id', '=', id);
    return (lock ? lockingRead(db, q) : q).executeTakeFirst();
  },

  /**
   * The events emitted about a conversation (every kind names it as data.conversationId), from its start on. The
   * LIKE narrows the account's events by the index's time range; the caller checks each payload, since `_` in an id
   * is a LIKE wildcard. On PostgreSQL locked until the erasure commits, in id order: a webhook recover (which makes
   * new deliveries of stored events, reading them FOR KEY SHARE in that order) that read them first is waited for here,
   * so its deliveries are committed, and seen and deleted, before the erasure deletes them; one that comes later
   * waits for the erasure and finds the events gone. Locked only at their delete, a recover committing in between
   * left deliveries of erased events, sent after the erasure.
   */
  eventsOf(db: Conn, accountId: string, conversationId: string, since: number) {
    const q = db
      .selectFrom('events')
      .select(['id', 'payload'])
      .where('account_id', '=', accountId)
      .where('created_at', '>=', since)
      .where('payload', 'like', `%"conversationId":"${conversationId}"%`)
      .orderBy('id');
    return lockingRead(db, q).execute();
  },

  /**
   * Deletes the deliveries of these events with their attempts (deliveries_event_webhook index). On PostgreSQL their rows are
   * locked first in id order, the order a worker's record of a batch (UPDATE … WHERE id IN …, through the primary
   * key) locks them in: deleting in the event index's order instead could deadlock with it.
   */
  async deleteDeliveriesOf(db: Conn, accountId: string, eventIds: readonly string[]) {
    if (eventIds.length === 0) return;
    const ids = (
      await lockingRead(db, db.selectFrom('deliveries').select('id').where('account_id', '=', accountId).where('event_id', 'in', eventIds).orderBy('id')).execute()
    ).map((r) => r.id);
    await deliveriesRepository.deleteWithAttempts(db, ids);
  },

  async deleteEvents(db: Conn, accountId: string, eventIds: readonly string[]) {
    if (eventIds.length) await db.deleteFrom('events').where('account_id', '=', accountId).where('id', 'in', eventIds).execute();
  },

  /**
   * The answers kept for the Idempotency-Keys of requests about the conversation (its start's answer names its id;
   * the others are sent to its path): they repeat its messages for 24 hours. An answer is matched by the id anywhere
   * in it, not only as a JSON string: a manual delivery retry's answer holds the delivery's body as an escaped
   * string (`\"conv_…\"`), with the customer's words.
   */
  deleteIdempotencyAnswers(db: Conn, accountId: string, conversationId: string) {
    return db
      .deleteFrom('idempotency_keys')
      .where('account_id', '=', accountId)
      .where((eb) => eb.or([eb('path', 'like', `/v1/chat/conversations/${conversationId}/%`), eb('response', 'like', `%${conversationId}%`)]))
      .execute();
  },

  /** The conversation, its messages and its workflow runs; true when it existed. */
  async delete(db: Conn, accountId: string, id: string) {
    await db.deleteFrom('messages').where('account_id', '=', accountId).where('conversation_id', '=', id).execute();
    await db.deleteFrom('workflow_runs').where('account_id', '=', accountId).where('conversation_id', '=', id).execute();
    const r = await db.deleteFrom('conversations').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },

  /**
   * Conversations of every account that ended before `before`, oldest first (CONVERSATION_RETENTION). Read through
   * the (status, last_message_at) index: a conversation's last message is never after its end. An account being
   * deleted is left to its deletion.
   */
  endedBefore(db: Conn, before: number, limit: number) {
    return db
      .selectFrom('conversations')
      .select(['id', 'account_id'])
      .where('status', 'in', ['ended', 'escalated'])
      .where('last_message_at', '<', before)
      .where('ended_at', '<', before)
      .where(accountNotBeingDeleted('conversations.account_id'))
      .orderBy('last_message_at')
      .limit(pageLimit(limit))
      .execute();
  },

  /**
   * One customer's conversations after the key (`created_at`, `id`) given, oldest first: a page of an erasure that
   * walks them by key, so the rows it erased before cannot make it read or skip any twice.
   */
  ofCustomerAfter(db: Conn, accountId: string, customerId: string, after: { createdAt: number; id: string } | null, limit: number) {
    let q = db.selectFrom('conversations').select(['id', 'created_at']).where('account_id', '=', accountId).where('customer_id', '=', customerId);
    if (after) q = q.where((eb) => eb.or([eb('created_at', '>', after.createdAt), eb.and([eb('created_at', '=', after.createdAt), eb('id', '>', after.id)])]));
    return q.orderBy('created_at').orderBy('id').limit(pageLimit(limit)).execute();
  },

  /** In order of occurrence: seq (the position in the conversation) orders messages of the same millisecond. */
  messages(db: Conn, accountId: string, conversationId: string) {
    return db
      .selectFrom('messages')
      .select(['id', 'role', 'content', 'sources', 'created_at'])
      .where('conversation_id', '=', conversationId)
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'asc')
      .orderBy('seq', 'asc')
      .orderBy('id', 'asc')
      .execute();
  },
};
