import { Type, type Static } from 'typebox';
import { TimeRangeQuery } from '../../http/time-range.js';
import { DECIMAL_DIGITS } from '../../http/schemas.js';

export const OverviewQuery = Type.Object({ ...TimeRangeQuery }, { additionalProperties: false });
export type OverviewQuery = Static<typeof OverviewQuery>;

export const TopicsQuery = Type.Object(
  { ...TimeRangeQuery, limit: Type.Integer({ minimum: 1, maximum: 100, default: 10, description: DECIMAL_DIGITS }) },
  { additionalProperties: false },
);
export type TopicsQuery = Static<typeof TopicsQuery>;

export const Overview = Type.Object({
  conversations: Type.Integer({ description: 'conversations created in [from, to)' }),
  messages: Type.Integer({ description: 'sum of messageCount over those conversations' }),
  resolutionRate: Type.Number({ minimum: 0, maximum: 1, description: 'outcome resolved / conversations that have ended; 0 when none ended' }),
  escalationRate: Type.Number({ minimum: 0, maximum: 1, description: 'conversations ever escalated / conversations; 0 when none' }),
  averageMessages: Type.Number({ minimum: 0, description: 'messages / conversations; 0 when none' }),
});

export const Topic = Type.Object({
  name: Type.String(),
  count: Type.Integer(),
  percentage: Type.Number({ minimum: 0, maximum: 1, description: 'count / all conversations created in [from, to) (a fraction)' }),
});

export const TopicList = Type.Object({ topics: Type.Array(Topic) });
