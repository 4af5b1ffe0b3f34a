import { Type, type Static } from 'typebox';
import { PageQuery, StringEnum, TEXT_PATTERNS, Timestamp } from '../../http/schemas.js';
import { CATEGORY_PATTERN } from '../faqs/faqs.schemas.js';
import { WorkflowTriggeredData } from '../webhooks/payloads.schemas.js';

export const FIELD_TYPES = ['email', 'phone', 'number', 'text', 'pattern'] as const;
export type FieldType = (typeof FIELD_TYPES)[number];

const Slug = Type.String({ minLength: 1, maxLength: 100, pattern: CATEGORY_PATTERN, description: 'unique per account: lowercase letters and digits in groups joined by single hyphens' });
const Name = Type.String({ minLength: 1, maxLength: 200 });
const Triggers = Type.Array(Type.String({ minLength: 1, maxLength: 200 }), {
  minItems: 1,
  maxItems: 50,
  description: 'phrases; a customer message containing every word of one of them (stemmed, any order) fires the workflow',
});
export const Field = Type.Object(
  {
    key: Type.String({ minLength: 1, maxLength: 64, pattern: TEXT_PATTERNS.identifier.pattern, description: 'name in `extracted`; its words ("orderNumber" → "order number") label a value in the conversation' }),
    type: StringEnum(FIELD_TYPES),
    pattern: Type.Optional(Type.String({ minLength: 1, maxLength: 500, description: 'RE2 regular expression (linear time: no back-references or look-arounds), case-insensitive, required for type pattern (first capture group, else the whole match)' })),
  },
  { additionalProperties: false },
);
export type Field = Static<typeof Field>;
const Fields = Type.Array(Field, { maxItems: 20 });
const Reply = Type.String({ minLength: 1, maxLength: 2_000, description: "the assistant's reply to the message that fires the workflow (instead of an answer from the knowledge base)" });

export const CreateWorkflowBody = Type.Object(
  {
    slug: Slug,
    name: Name,
    triggers: Triggers,
    fields: Type.Optional(Fields),
    reply: Type.Optional(Reply),
    enabled: Type.Optional(Type.Boolean({ default: true })),
  },
  { additionalProperties: false },
);
export type CreateWorkflowBody = Static<typeof CreateWorkflowBody>;

export const UpdateWorkflowBody = Type.Object(
  {
    slug: Type.Optional(Slug),
    name: Type.Optional(Name),
    triggers: Type.Optional(Triggers),
    fields: Type.Optional(Fields),
    reply: Type.Optional(Type.Union([Reply, Type.Null()], { description: 'null removes the reply' })),
    enabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateWorkflowBody = Static<typeof UpdateWorkflowBody>;

export const ListWorkflowsQuery = Type.Object(
  { enabled: Type.Optional(Type.Boolean({ description: 'only enabled (true) or disabled (false) workflows' })), ...PageQuery },
  { additionalProperties: false },
);
export type ListWorkflowsQuery = Static<typeof ListWorkflowsQuery>;

export const WorkflowRecord = Type.Object({
  id: Type.String(),
  slug: Type.String(),
  name: Type.String(),
  triggers: Type.Array(Type.String()),
  fields: Type.Array(Field),
  reply: Type.Union([Type.String(), Type.Null()]),
  enabled: Type.Boolean(),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const WorkflowList = Type.Object({
  workflows: Type.Array(WorkflowRecord),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

export const ListWorkflowRunsQuery = Type.Object(
  {
    conversationId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, description: "only this conversation's run (a workflow fires once per conversation)" })),
    ...PageQuery,
  },
  { additionalProperties: false },
);
export type ListWorkflowRunsQuery = Static<typeof ListWorkflowRunsQuery>;

/**
 * A firing of the workflow, with what its workflow.triggered event carried (the slug aside: the workflow is the one
 * in the path), so an owner whose receiver missed events can rebuild them from the list.
 */
export const WorkflowRun = Type.Object({
  workflowId: Type.String(),
  conversationId: Type.String(),
  customerId: Type.String({ description: "the conversation's customer, as in the event" }),
  extracted: WorkflowTriggeredData.properties.extracted,
  createdAt: Timestamp,
});

export const WorkflowRunList = Type.Object({
  runs: Type.Array(WorkflowRun),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});
