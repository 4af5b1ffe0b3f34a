import type { Kysely, Transaction } from 'kysely';
import type { DialectName } from '../../db/database.js';
import type { DB } from '../../db/schema.js';
import { parseTimeRange, type TimeRange } from '../../http/time-range.js';
import { analyticsRepository as repo } from './analytics.repository.js';
import type { OverviewQuery, TopicsQuery } from './analytics.schemas.js';

/** A ratio that is 0, not NaN, when nothing is counted. Unrounded: clients round for display. */
const ratio = (n: number, d: number) => (d === 0 ? 0 : n / d);

type Conn = Kysely<DB> | Transaction<DB>;

export function createAnalyticsService(db: Kysely<DB>, dialect: DialectName) {
  /**
   * The overview's counts and rates over a parsed range, on the given connection: rundowns read them inside
   * the transaction that stores the digest, so a rundown's figures are the overview's by construction.
   */
  async function figures(accountId: string, range: TimeRange, conn: Conn = db) {
    const c = await repo.overviewCounts(conn, accountId, range);
    return {
      ...c,
      resolutionRate: ratio(c.resolved, c.ended),
      escalationRate: ratio(c.escalated, c.conversations),
      averageMessages: ratio(c.messages, c.conversations),
    };
  }

  async function topicsIn(accountId: string, range: TimeRange, limit: number, conn: Conn = db) {
    const [rows, total] = await Promise.all([
      repo.topics(conn, dialect, accountId, range, limit),
      repo.countConversations(conn, accountId, range),
    ]);
    return rows.map((r) => ({ name: r.topic!, count: Number(r.count), percentage: ratio(Number(r.count), total) }));
  }

  return {
    figures,
    topicsIn,

    async overview(accountId: string, q: OverviewQuery) {
      const f = await figures(accountId, parseTimeRange(q));
      return {
        conversations: f.conversations,
        messages: f.messages,
        resolutionRate: f.resolutionRate,
        escalationRate: f.escalationRate,
        averageMessages: f.averageMessages,
      };
    },

    async topics(accountId: string, q: TopicsQuery) {
      return { topics: await topicsIn(accountId, parseTimeRange(q), q.limit) };
    },
  };
}

export type AnalyticsService = ReturnType<typeof createAnalyticsService>;
