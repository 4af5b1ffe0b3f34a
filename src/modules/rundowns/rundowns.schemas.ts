import { Type, type Static } from 'typebox';
import { PageQuery, StringEnum, Timestamp } from '../../http/schemas.js';

export const RUNDOWN_TRIGGERS = ['schedule', 'manual'] as const;
/** The longest period one rundown may cover: a year, leap day included. */
export const MAX_RUNDOWN_SPAN_DAYS = 366;

const Instant = (description: string) =>
  Type.String({ minLength: 1, maxLength: 64, description: `${description}; ISO 8601 date (2026-01-01, midnight UTC) or date-time (2026-01-01T09:30:00Z)` });

export const CreateRundownBody = Type.Object(
  { from: Instant('start of the period (inclusive)'), to: Instant('end of the period (exclusive)') },
  { additionalProperties: false },
);
export type CreateRundownBody = Static<typeof CreateRundownBody>;

export const ListRundownsQuery = Type.Object(
  { trigger: Type.Optional(StringEnum([...RUNDOWN_TRIGGERS, 'all'] as const, { default: 'all' })), ...PageQuery },
  { additionalProperties: false },
);
export type ListRundownsQuery = Static<typeof ListRundownsQuery>;

export const RundownFigures = Type.Object({
  conversations: Type.Integer({ description: 'conversations created in [from, to) (as GET /analytics/overview)' }),
  messages: Type.Integer({ description: 'sum of messageCount over those conversations (as the overview)' }),
  resolved: Type.Integer({ description: 'of those, ended with outcome resolved' }),
  escalated: Type.Integer({ description: 'of those, ever escalated (ended or not)' }),
  unresolved: Type.Integer({ description: 'of those, ended with outcome unresolved' }),
  resolutionRate: Type.Number({ minimum: 0, maximum: 1, description: 'as the overview: resolved / ended; 0 when none ended' }),
  escalationRate: Type.Number({ minimum: 0, maximum: 1, description: 'as the overview: escalated / conversations; 0 when none' }),
  averageMessages: Type.Number({ minimum: 0, description: 'as the overview: messages / conversations; 0 when none' }),
  unansweredQuestions: Type.Integer({ description: 'customer messages sent in [from, to) whose reply cited no source (requests for a person, small talk, contact details and messages a workflow answered excluded)' }),
});
export type RundownFigures = Static<typeof RundownFigures>;

export const RundownTopic = Type.Object({
  name: Type.String(),
  count: Type.Integer(),
  percentage: Type.Number({ minimum: 0, maximum: 1, description: 'count / conversations (a fraction, as GET /analytics/topics)' }),
});

export const UnansweredQuestion = Type.Object({
  question: Type.String({
    description: "the customers' most frequent wording (the latest on a tie); once the conversations it came from are erased, another customer's wording of the same question, else \"(erased)\"",
  }),
  count: Type.Integer({ description: 'times asked in [from, to), compared lower-cased, whitespace collapsed, trailing punctuation dropped' }),
  lastAskedAt: Timestamp,
});

export const SuggestedFaq = Type.Object({
  id: Type.String({ description: 'the pending FAQ created for it (GET /faqs/:id)' }),
  question: Type.String({ description: 'the question it was filed with; reworded as the unanswered question it came from is' }),
});

export const RundownRecord = Type.Object({
  id: Type.String(),
  from: Timestamp,
  to: Timestamp,
  trigger: StringEnum(RUNDOWN_TRIGGERS, { description: 'schedule: made by the worker every RUNDOWN_INTERVAL; manual: POST /rundowns' }),
  createdAt: Timestamp,
  figures: RundownFigures,
  topTopics: Type.Array(RundownTopic, { description: 'at most 10, as GET /analytics/topics for the same range' }),
  unanswered: Type.Array(UnansweredQuestion, { description: 'at most 10, most asked first' }),
  suggestedFaqs: Type.Array(SuggestedFaq, { description: 'pending FAQs this rundown created' }),
});
export type RundownRecord = Static<typeof RundownRecord>;

export const RundownList = Type.Object({
  rundowns: Type.Array(RundownRecord),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});
