import { Type, type Static } from 'typebox';
import { NullableTimestamp, StringEnum, Timestamp } from '../../http/schemas.js';

export const MAX_METADATA_BYTES = 16 * 1024;

export const StartConversationBody = Type.Object(
  {
    customerId: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    customerLabel: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    customerEmail: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
    persona: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    metadata: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'free-form JSON object, at most 16 KiB' })),
  },
  { additionalProperties: false },
);
export type StartConversationBody = Static<typeof StartConversationBody>;

export const SendMessageBody = Type.Object({ content: Type.String({ minLength: 1, maxLength: 4_000 }) }, { additionalProperties: false });
export type SendMessageBody = Static<typeof SendMessageBody>;

export const ContactBody = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320 }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    phone: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })),
    message: Type.Optional(Type.String({ minLength: 1, maxLength: 4_000 })),
  },
  { additionalProperties: false },
);
export type ContactBody = Static<typeof ContactBody>;

export const EscalateBody = Type.Object(
  { reason: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9_.-]+$', description: 'e.g. customer_request' })) },
  { additionalProperties: false },
);
export type EscalateBody = Static<typeof EscalateBody>;

export const Message = Type.Object({
  id: Type.String(),
  role: StringEnum(['customer', 'assistant', 'system'] as const),
  content: Type.String(),
  timestamp: Timestamp,
  sources: Type.Optional(Type.Array(Type.String())),
});

/** The spec's Conversation resource, plus the fields a support agent needs. */
export const Conversation = Type.Object({
  id: Type.String(),
  customerId: Type.String(),
  customerLabel: Type.String(),
  customerEmail: Type.Union([Type.String(), Type.Null()]),
  persona: Type.Union([Type.String(), Type.Null()]),
  metadata: Type.Object({}, { additionalProperties: true }),
  status: StringEnum(['active', 'ended', 'escalated'] as const),
  outcome: Type.Union([StringEnum(['resolved', 'unresolved', 'escalated'] as const), Type.Null()]),
  escalationReason: Type.Union([Type.String(), Type.Null()]),
  messages: Type.Array(Message),
  tags: Type.Array(Type.String()),
  topic: Type.Union([Type.String(), Type.Null()]),
  messageCount: Type.Integer(),
  createdAt: Timestamp,
  endedAt: NullableTimestamp,
});

export const StartedConversation = Type.Object({ conversation: Conversation, messages: Type.Array(Message) });
export const SentMessages = Type.Object({ messages: Type.Array(Message) });
export const ConversationOnly = Type.Object({ conversation: Conversation });
