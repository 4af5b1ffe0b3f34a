import { Type, type Static } from 'typebox';
import { StringEnum, TEXT_PATTERNS } from '../../http/schemas.js';
import { MESSAGE_MAX_LENGTH } from '../assistant/assistant.schemas.js';
import { ConversationRecord, Message } from '../conversations/conversations.schemas.js';

export const MAX_METADATA_BYTES = 16 * 1024;

export const StartConversationBody = Type.Object(
  {
    customerId: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: TEXT_PATTERNS.singleLine.pattern })),
    customerLabel: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: TEXT_PATTERNS.singleLine.pattern })),
    customerEmail: Type.Optional(Type.String({ format: 'email', maxLength: 320 })),
    persona: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: TEXT_PATTERNS.singleLine.pattern })),
    metadata: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'free-form JSON object, at most 16 KiB' })),
  },
  { additionalProperties: false },
);
export type StartConversationBody = Static<typeof StartConversationBody>;

export const SendMessageBody = Type.Object({ content: Type.String({ minLength: 1, maxLength: MESSAGE_MAX_LENGTH }) }, { additionalProperties: false });
export type SendMessageBody = Static<typeof SendMessageBody>;

export const ContactBody = Type.Object(
  {
    email: Type.String({ format: 'email', maxLength: 320 }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: TEXT_PATTERNS.singleLine.pattern })),
    phone: Type.Optional(Type.String({ minLength: 1, maxLength: 50, pattern: TEXT_PATTERNS.singleLine.pattern })),
    message: Type.Optional(Type.String({ minLength: 1, maxLength: 4_000 })),
  },
  { additionalProperties: false },
);
export type ContactBody = Static<typeof ContactBody>;

export const EscalateBody = Type.Object(
  { reason: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: TEXT_PATTERNS.code.pattern, description: 'e.g. customer_request' })) },
  { additionalProperties: false },
);
export type EscalateBody = Static<typeof EscalateBody>;

/** End takes no fields (CONTRACT §5: body "none"): no body, an empty body or `{}`; any field is refused by name. */
export const EndBody = Type.Object({}, { additionalProperties: false, description: 'no fields; the body may be left out' });

const Conversation = ConversationRecord;

export const StartedConversation = Type.Object({ conversation: Conversation, messages: Type.Array(Message) });
export const SentMessages = Type.Object({
  messages: Type.Array(Message),
  status: StringEnum(['active', 'escalated'] as const, {
    description: "the conversation's status once this exchange is counted: `escalated` when it escalated it or came after an escalation",
  }),
});
export const ConversationOnly = Type.Object({ conversation: Conversation });
