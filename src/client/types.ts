/**
 * The client's request and answer types, all derived from the service's own schemas (type-only imports: nothing of
 * the server is loaded at run time). List queries are Partial: the schemas type `limit` and `offset` as present
 * because the service fills in their defaults, while a caller may leave them out.
 */
import type { Static } from 'typebox';
import type { Deleted as DeletedSchema } from '../http/schemas.js';
import type { Overview, OverviewQuery, TopicList, TopicsQuery } from '../modules/analytics/analytics.schemas.js';
import type { AssistantPreview as AssistantPreviewSchema, AssistantSettings as AssistantSettingsSchema, PreviewBody, UpdateAssistantSettingsBody } from '../modules/assistant/assistant.schemas.js';
import type { ContactBody, ConversationOnly, EscalateBody, SendMessageBody, SentMessages, StartConversationBody, StartedConversation } from '../modules/chat/chat.schemas.js';
import type { ConversationList as ConversationListSchema, ConversationListItem as ConversationListItemSchema, ConversationRecord, CustomerErased as CustomerErasedSchema, ListConversationsQuery, Message as MessageSchema } from '../modules/conversations/conversations.schemas.js';
import type { CreateDocumentBody, CreatedDocument as CreatedDocumentSchema, DocumentList as DocumentListSchema, DocumentListItem as DocumentListItemSchema, DocumentRecord, ListDocumentsQuery, UpdateDocumentBody } from '../modules/documents/documents.schemas.js';
import type { CreateFaqBody, FaqList as FaqListSchema, FaqRecord, ListFaqsQuery, UpdateFaqBody } from '../modules/faqs/faqs.schemas.js';
import type { CreateRundownBody, ListRundownsQuery, RundownList as RundownListSchema, RundownRecord } from '../modules/rundowns/rundowns.schemas.js';
import type { EventList as EventListSchema, EventRecord, ListEventsQuery } from '../modules/webhooks/feed.schemas.js';
import type { WebhookPayload } from '../modules/webhooks/payloads.schemas.js';
import type { CreateWebhookBody, DeliveryDetail, DeliveryList as DeliveryListSchema, DeliveryListItem as DeliveryListItemSchema, ListDeliveriesQuery, ListWebhooksQuery, RecoverResult, RecoverWebhookBody, TestWebhookBody, UpdateWebhookBody, WebhookList as WebhookListSchema, WebhookRecord } from '../modules/webhooks/webhooks.schemas.js';
import type {
  CreateWorkflowBody,
  ListWorkflowRunsQuery,
  ListWorkflowsQuery,
  UpdateWorkflowBody,
  WorkflowList as WorkflowListSchema,
  WorkflowRecord,
  WorkflowRun as WorkflowRunSchema,
  WorkflowRunList as WorkflowRunListSchema,
} from '../modules/workflows/workflows.schemas.js';

export type Deleted = Static<typeof DeletedSchema>;

export type Document = Static<typeof DocumentRecord>;
export type DocumentListItem = Static<typeof DocumentListItemSchema>;
export type CreatedDocument = Static<typeof CreatedDocumentSchema>;
export type DocumentList = Static<typeof DocumentListSchema>;
export type DocumentCreateParams = CreateDocumentBody;
export type DocumentUpdateParams = UpdateDocumentBody;
export type DocumentListParams = Partial<ListDocumentsQuery>;

export type Faq = Static<typeof FaqRecord>;
export type FaqList = Static<typeof FaqListSchema>;
export type FaqCreateParams = CreateFaqBody;
export type FaqUpdateParams = UpdateFaqBody;
export type FaqListParams = Partial<ListFaqsQuery>;

export type Conversation = Static<typeof ConversationRecord>;
export type ConversationListItem = Static<typeof ConversationListItemSchema>;
export type ConversationList = Static<typeof ConversationListSchema>;
export type ConversationListParams = Partial<ListConversationsQuery>;
export type CustomerErased = Static<typeof CustomerErasedSchema>;
export type Message = Static<typeof MessageSchema>;

export type AnalyticsOverview = Static<typeof Overview>;
export type AnalyticsOverviewParams = Partial<OverviewQuery>;
export type AnalyticsTopics = Static<typeof TopicList>;
export type AnalyticsTopicsParams = Partial<TopicsQuery>;

export type AssistantSettings = AssistantSettingsSchema;
export type AssistantSettingsUpdateParams = UpdateAssistantSettingsBody;
export type AssistantPreview = AssistantPreviewSchema;
export type AssistantPreviewParams = PreviewBody;

export type ChatStartParams = StartConversationBody;
export type ChatStarted = Static<typeof StartedConversation>;
export type ChatSendMessageParams = SendMessageBody;
export type ChatMessages = Static<typeof SentMessages>;
export type ChatContactParams = ContactBody;
export type ChatEscalateParams = EscalateBody;
export type ChatConversation = Static<typeof ConversationOnly>;

export type Webhook = Static<typeof WebhookRecord>;
export type WebhookList = Static<typeof WebhookListSchema>;
export type WebhookCreateParams = CreateWebhookBody;
export type WebhookUpdateParams = UpdateWebhookBody;
export type WebhookListParams = Partial<ListWebhooksQuery>;
export type WebhookTestParams = Static<typeof TestWebhookBody>;
export type WebhookRecoverParams = RecoverWebhookBody;
export type WebhookRecovery = Static<typeof RecoverResult>;
export type Delivery = Static<typeof DeliveryDetail>;
export type DeliveryListItem = Static<typeof DeliveryListItemSchema>;
export type DeliveryList = Static<typeof DeliveryListSchema>;
export type DeliveryListParams = Partial<ListDeliveriesQuery>;

export type Workflow = Static<typeof WorkflowRecord>;
export type WorkflowList = Static<typeof WorkflowListSchema>;
export type WorkflowCreateParams = CreateWorkflowBody;
export type WorkflowUpdateParams = UpdateWorkflowBody;
export type WorkflowListParams = Partial<ListWorkflowsQuery>;
export type WorkflowRun = Static<typeof WorkflowRunSchema>;
export type WorkflowRunList = Static<typeof WorkflowRunListSchema>;
export type WorkflowRunListParams = Partial<ListWorkflowRunsQuery>;

export type Rundown = RundownRecord;
export type RundownList = Static<typeof RundownListSchema>;
export type RundownCreateParams = CreateRundownBody;
export type RundownListParams = Partial<ListRundownsQuery>;

/**
 * An event of the feed (GET /v1/events): a delivery body of its kind plus the event's `id`, so the handler of
 * verified deliveries takes it too; `switch (e.event)` narrows `data`.
 */
export type Event = EventRecord;
export type EventList = EventListSchema;
/** `event`: one kind, several separated by commas, or a list of kinds (sent comma-separated). */
export type EventListParams = Partial<Omit<ListEventsQuery, 'event'>> & { event?: string | readonly Event['event'][] | undefined };

/** A verified webhook delivery's body; `event` tells the kinds apart (`switch (e.event)` narrows `data`). */
export type WebhookEvent = WebhookPayload;
export type WebhookEventKind = WebhookEvent['event'];
