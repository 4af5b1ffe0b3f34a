import type { Kysely, SelectQueryBuilder, Transaction } from 'kysely';
import { pageLimit } from '../../db/pagination.js';
import type { DB } from '../../db/schema.js';
import type { TimeRange } from '../../http/time-range.js';

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
    const [count, rows] = await Promise.all([
      q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
      db
        .selectFrom('conversations')
        .select(['id', 'customer_id', 'status', 'tags', 'message_count', 'created_at', 'ended_at', 'outcome', 'topic'])
        .where('account_id', '=', accountId)
        .where('id', 'in', pageIds)
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .execute(),
    ]);
    return { rows, total: Number(count.n) };
  },

  find(db: Conn, accountId: string, id: string) {
    return db.selectFrom('conversations').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
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
