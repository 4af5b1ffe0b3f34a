import { Type, type Static } from 'typebox';
import { NullableTimestamp, PageQuery, StringEnum, Timestamp } from '../../http/schemas.js';
import { TimeRangeQuery } from '../../http/time-range.js';

export const CONVERSATION_STATUSES = ['active', 'ended', 'escalated'] as const;
export const CONVERSATION_OUTCOMES = ['resolved', 'unresolved', 'escalated'] as const;

const Status = StringEnum(CONVERSATION_STATUSES, {
  description: 'active: open, never escalated; escalated: escalated to a human (stays so after it ends); ended: ended without escalation',
});
const Outcome = Type.Union([StringEnum(CONVERSATION_OUTCOMES), Type.Null()], {
  description: 'set when the conversation ends (the conversation.ended webhook status); null while it has not ended',
});

export const ListConversationsQuery = Type.Object(
  {
    status: Type.Optional(StringEnum([...CONVERSATION_STATUSES, 'all'] as const, { default: 'all' })),
    ...TimeRangeQuery,
    customerId: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
    ...PageQuery,
  },
  { additionalProperties: false },
);
export type ListConversationsQuery = Static<typeof ListConversationsQuery>;

/** Which customer's conversations to erase: required, so a bare DELETE /conversations can never mean "all of them". */
export const EraseCustomerQuery = Type.Object(
  { customerId: Type.String({ minLength: 1, maxLength: 256, description: "the customer's id, as given when the conversation started (exact match)" }) },
  { additionalProperties: false },
);
export type EraseCustomerQuery = Static<typeof EraseCustomerQuery>;

export const CustomerErased = Type.Object({
  deleted: Type.Boolean(),
  count: Type.Integer({ description: 'conversations this request erased (0 when the customer had none left)' }),
});

/** CONTRACT §4 list item, plus outcome and topic so every analytics figure can be recomputed from the list. */
export const ConversationListItem = Type.Object({
  id: Type.String(),
  customerId: Type.String(),
  status: Status,
  tags: Type.Array(Type.String()),
  messageCount: Type.Integer(),
  createdAt: Timestamp,
  endedAt: NullableTimestamp,
  outcome: Outcome,
  topic: Type.Union([Type.String(), Type.Null()]),
});

export const ConversationList = Type.Object({
  conversations: Type.Array(ConversationListItem),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

export const Message = Type.Object({
  id: Type.String(),
  role: Type.String({ description: 'customer or assistant (a system role may appear for service notices)' }),
  content: Type.String(),
  timestamp: Timestamp,
  sources: Type.Optional(Type.Array(Type.String(), { description: 'assistant messages only: ids of the documents and FAQs used' })),
});

/** The spec's Conversation, exactly, followed by the extras an owner reading a transcript needs. */
export const ConversationRecord = Type.Object({
  id: Type.String(),
  customerId: Type.String(),
  status: Status,
  messages: Type.Array(Message),
  tags: Type.Array(Type.String()),
  createdAt: Timestamp,
  endedAt: NullableTimestamp,
  customerLabel: Type.String(),
  customerEmail: Type.Union([Type.String(), Type.Null()]),
  persona: Type.Union([Type.String(), Type.Null()]),
  metadata: Type.Record(Type.String(), Type.Unknown()),
  topic: Type.Union([Type.String(), Type.Null()]),
  outcome: Outcome,
  escalationReason: Type.Union([Type.String(), Type.Null()]),
  escalatedAt: NullableTimestamp,
  lastMessageAt: Timestamp,
  messageCount: Type.Integer(),
});
