import { Type, type Static } from 'typebox';
import { PageQuery, StringEnum, TEXT_PATTERNS, Timestamp } from '../../http/schemas.js';

export const FAQ_STATUSES = ['approved', 'pending', 'draft'] as const;
export const CATEGORY_PATTERN = TEXT_PATTERNS.slug.pattern;

const Question = Type.String({ minLength: 1, maxLength: 1_000 });
const Answer = Type.String({ minLength: 1, maxLength: 20_000 });
const Category = Type.String({ minLength: 1, maxLength: 100, pattern: CATEGORY_PATTERN, description: 'a slug: lowercase letters and digits in groups joined by single hyphens' });
const Status = StringEnum(FAQ_STATUSES);

export const CreateFaqBody = Type.Object(
  { question: Question, answer: Answer, category: Category, status: Type.Optional(Status) },
  { additionalProperties: false },
);
export type CreateFaqBody = Static<typeof CreateFaqBody>;

export const UpdateFaqBody = Type.Object(
  { question: Type.Optional(Question), answer: Type.Optional(Answer), category: Type.Optional(Category), status: Type.Optional(Status) },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateFaqBody = Static<typeof UpdateFaqBody>;

export const ListFaqsQuery = Type.Object(
  {
    status: Type.Optional(StringEnum([...FAQ_STATUSES, 'all'] as const, { default: 'all' })),
    category: Type.Optional(Category),
    ...PageQuery,
  },
  { additionalProperties: false },
);
export type ListFaqsQuery = Static<typeof ListFaqsQuery>;

export const FaqRecord = Type.Object({
  id: Type.String(),
  question: Type.String(),
  answer: Type.String(),
  category: Type.String(),
  status: Status,
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const FaqList = Type.Object({
  faqs: Type.Array(FaqRecord),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});
