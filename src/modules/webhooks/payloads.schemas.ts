import { Type, type Static, type TSchema } from 'typebox';
import { StringEnum, Timestamp } from '../../http/schemas.js';
import { CONVERSATION_OUTCOMES } from '../conversations/conversations.schemas.js';
import { RUNDOWN_TRIGGERS } from '../rundowns/rundowns.schemas.js';
import type { EventKind } from './events.js';

/**
 * The body of every webhook delivery, per event kind: the seed's payloads plus what it left open (README
 * "Escalation payloads", "Rundowns"). The client library types `verifyWebhook`'s answer with these, and
 * test/client/webhooks.test.ts checks real deliveries against them, so a payload that changes without its schema
 * fails there. Objects are closed so a field added to a payload must be added here too.
 */
const closed = { additionalProperties: false } as const;

export const ConversationStartedData = Type.Object(
  {
    conversationId: Type.String(),
    customerId: Type.String(),
    customerLabel: Type.String(),
    persona: Type.String(),
    metadata: Type.Record(Type.String(), Type.Unknown()),
  },
  closed,
);

export const ConversationMessageData = Type.Object(
  {
    conversationId: Type.String(),
    messageId: Type.String(),
    role: Type.String({ description: 'customer or assistant' }),
    content: Type.String(),
    customerId: Type.String(),
    sources: Type.Optional(Type.Array(Type.String(), { description: 'assistant messages only' })),
    timestamp: Timestamp,
    position: Type.Integer({ description: "the message's place in its conversation (the greeting is 1): deliveries can arrive out of order" }),
  },
  closed,
);

export const ConversationEndedData = Type.Object(
  {
    conversationId: Type.String(),
    customerId: Type.String(),
    status: StringEnum(CONVERSATION_OUTCOMES),
    messageCount: Type.Integer(),
    duration: Type.Integer({ description: 'seconds from the start to the end (to the last message when ended for idleness)' }),
    tags: Type.Array(Type.String()),
  },
  closed,
);

/** Only the ids: the erasure is of everything else, and the receiver finds its own copies by them. */
export const ConversationErasedData = Type.Object(
  {
    conversationId: Type.String(),
    customerId: Type.String(),
  },
  { ...closed, description: 'the conversation was erased (DELETE /v1/conversations/:id): erase what you keep of it too' },
);

export const EscalationData = Type.Object(
  {
    conversationId: Type.String(),
    customerId: Type.String(),
    customerLabel: Type.String(),
    customerEmail: Type.String({ description: '"" when the customer has not given one' }),
    reason: Type.String({ description: 'customer_request, no_answer, or the reason given to POST …/escalate' }),
    lastMessage: Type.String(),
    transcript: Type.Array(Type.Object({ role: Type.String(), content: Type.String(), timestamp: Timestamp }, closed)),
  },
  closed,
);

export const EscalationSubmittedData = Type.Object(
  {
    conversationId: Type.String(),
    customerId: Type.String(),
    customerLabel: Type.String(),
    customerEmail: Type.String(),
    name: Type.Union([Type.String(), Type.Null()]),
    phone: Type.Union([Type.String(), Type.Null()]),
    message: Type.Union([Type.String(), Type.Null()]),
    escalated: Type.Boolean(),
  },
  closed,
);

export const WorkflowTriggeredData = Type.Object(
  {
    workflowId: Type.String(),
    workflowSlug: Type.String(),
    conversationId: Type.String(),
    customerId: Type.String(),
    extracted: Type.Record(Type.String(), Type.Union([Type.String(), Type.Number()])),
  },
  closed,
);

export const RundownGeneratedData = Type.Object(
  {
    rundownId: Type.String(),
    from: Timestamp,
    to: Timestamp,
    trigger: StringEnum(RUNDOWN_TRIGGERS),
    conversations: Type.Integer(),
    resolutionRate: Type.Number(),
    escalationRate: Type.Number(),
    unansweredQuestions: Type.Integer(),
    suggestedFaqs: Type.Integer({ description: 'how many pending FAQs the rundown filed' }),
  },
  closed,
);

export const TestData = Type.Object({ message: Type.String() }, closed);

const payload = <K extends string, D extends TSchema>(event: K, data: D) =>
  Type.Object({ event: Type.Literal(event), timestamp: Timestamp, data }, closed);

/** Every delivery body, one per kind (`event` tells them apart). */
export const EVENT_PAYLOADS = {
  'conversation.started': payload('conversation.started', ConversationStartedData),
  'conversation.message': payload('conversation.message', ConversationMessageData),
  'conversation.ended': payload('conversation.ended', ConversationEndedData),
  'conversation.erased': payload('conversation.erased', ConversationErasedData),
  escalation: payload('escalation', EscalationData),
  'escalation.submitted': payload('escalation.submitted', EscalationSubmittedData),
  'workflow.triggered': payload('workflow.triggered', WorkflowTriggeredData),
  'rundown.generated': payload('rundown.generated', RundownGeneratedData),
  test: payload('test', TestData),
} satisfies Record<EventKind, TSchema>;

export const WebhookPayload = Type.Union(Object.values(EVENT_PAYLOADS));
export type WebhookPayload = { [K in keyof typeof EVENT_PAYLOADS]: Static<(typeof EVENT_PAYLOADS)[K]> }[keyof typeof EVENT_PAYLOADS];
