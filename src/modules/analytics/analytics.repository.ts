import { sql, type Kysely, type Transaction } from 'kysely';
import { pageLimit } from '../../db/pagination.js';
import type { DialectName } from '../../db/database.js';
import type { DB } from '../../db/schema.js';
import type { TimeRange } from '../../http/time-range.js';
import { createdIn } from '../conversations/conversations.repository.js';

type Conn = Kysely<DB> | Transaction<DB>;

export const analyticsRepository = {
  /** Every count the overview needs in one pass over the account's conversations created in the range. */
  async overviewCounts(db: Conn, accountId: string, range: TimeRange) {
    const row = await createdIn(db.selectFrom('conversations').where('account_id', '=', accountId), range)
      .select((eb) => [
        eb.fn.countAll<number>().as('conversations'),
        eb.fn.coalesce(eb.fn.sum<number>('message_count'), sql<number>`0`).as('messages'),
        eb.fn.count<number>('ended_at').as('ended'),
        eb.fn.count<number>('escalated_at').as('escalated'),
        eb.fn
          .count<number>(sql`case when ${eb.ref('outcome')} = 'resolved' and ${eb.ref('ended_at')} is not null then 1 end`)
          .as('resolved'),
        eb.fn
          .count<number>(sql`case when ${eb.ref('outcome')} = 'unresolved' and ${eb.ref('ended_at')} is not null then 1 end`)
          .as('unresolved'),
      ])
      .executeTakeFirstOrThrow();
    return {
      conversations: Number(row.conversations),
      messages: Number(row.messages),
      ended: Number(row.ended),
      escalated: Number(row.escalated),
      resolved: Number(row.resolved),
      unresolved: Number(row.unresolved),
    };
  },

  /**
   * Topic counts, most frequent first, then by name in code-point order on both dialects (PostgreSQL's
   * default collation is locale-aware and would order differently from SQLite).
   */
  topics(db: Conn, dialect: DialectName, accountId: string, range: TimeRange, limit: number) {
    const byName = dialect === 'postgres' ? sql`${sql.ref('topic')} collate "C"` : sql`${sql.ref('topic')}`;
    return createdIn(db.selectFrom('conversations').where('account_id', '=', accountId), range)
      .where('topic', 'is not', null)
      // Never a nameless topic (conversations ended before labels kept non-Latin titles could hold "").
      .where('topic', '!=', '')
      .select((eb) => ['topic', eb.fn.countAll<number>().as('count')])
      .groupBy('topic')
      .orderBy(sql`count(*)`, 'desc')
      .orderBy(byName)
      .limit(pageLimit(limit))
      .execute();
  },

  async countConversations(db: Conn, accountId: string, range: TimeRange) {
    const row = await createdIn(db.selectFrom('conversations').where('account_id', '=', accountId), range)
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .executeTakeFirstOrThrow();
    return Number(row.n);
  },
};
