import type { Kysely } from 'kysely';
import type { DialectName } from '../../db/database.js';
import type { DB } from '../../db/schema.js';
import { parseTimeRange } from '../../http/time-range.js';
import { analyticsRepository as repo } from './analytics.repository.js';
import type { OverviewQuery, TopicsQuery } from './analytics.schemas.js';

/** A ratio that is 0, not NaN, when nothing is counted. Unrounded: clients round for display. */
const ratio = (n: number, d: number) => (d === 0 ? 0 : n / d);

export function createAnalyticsService(db: Kysely<DB>, dialect: DialectName) {
  return {
    async overview(accountId: string, q: OverviewQuery) {
      const c = await repo.overviewCounts(db, accountId, parseTimeRange(q));
      return {
        conversations: c.conversations,
        messages: c.messages,
        resolutionRate: ratio(c.resolved, c.ended),
        escalationRate: ratio(c.escalated, c.conversations),
        averageMessages: ratio(c.messages, c.conversations),
      };
    },

    async topics(accountId: string, q: TopicsQuery) {
      const range = parseTimeRange(q);
      const [rows, total] = await Promise.all([
        repo.topics(db, dialect, accountId, range, q.limit),
        repo.countConversations(db, accountId, range),
      ]);
      return {
        topics: rows.map((r) => ({ name: r.topic!, count: Number(r.count), percentage: ratio(Number(r.count), total) })),
      };
    },
  };
}

export type AnalyticsService = ReturnType<typeof createAnalyticsService>;
