/**
 * parley/client: the official Node client of the Parley API v1 (docs/client.md). No dependencies at run time:
 * the global fetch and node:crypto. Its types come from the service's schemas, imported as types only.
 */
import { Analytics, Assistant, AssistantSettingsResource, Chat, Conversations, Documents, Events, Faqs, Rundowns, Webhooks, Workflows } from './resources.js';
import { Transport, type ParleyOptions, type RateLimit } from './transport.js';

export class Parley {
  readonly documents: Documents;
  readonly faqs: Faqs;
  readonly conversations: Conversations;
  readonly analytics: Analytics;
  readonly webhooks: Webhooks;
  readonly events: Events;
  readonly workflows: Workflows;
  readonly rundowns: Rundowns;
  readonly assistantSettings: AssistantSettingsResource;
  readonly assistant: Assistant;
  readonly chat: Chat;
  private readonly transport: Transport;

  constructor(options: ParleyOptions) {
    this.transport = new Transport(options);
    this.documents = new Documents(this.transport);
    this.faqs = new Faqs(this.transport);
    this.conversations = new Conversations(this.transport);
    this.analytics = new Analytics(this.transport);
    this.webhooks = new Webhooks(this.transport);
    this.events = new Events(this.transport);
    this.workflows = new Workflows(this.transport);
    this.rundowns = new Rundowns(this.transport);
    this.assistantSettings = new AssistantSettingsResource(this.transport);
    this.assistant = new Assistant(this.transport);
    this.chat = new Chat(this.transport);
  }

  /** The API root every path is under, with its `/v1`. */
  get baseUrl(): string {
    return this.transport.base;
  }

  /**
   * X-RateLimit-* of the latest answer that carried them (every authenticated one does; a 401 does not), or null
   * before the first. With calls in flight together, "latest" is the one that finished last.
   */
  get lastRateLimit(): RateLimit | null {
    return this.transport.lastRateLimit;
  }
}

export { ParleyConnectionError, ParleyError, ParleyTimeoutError, WebhookVerificationError, type ParleyErrorCode } from './errors.js';
export { DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT_MS, MAX_RETRY_AFTER_SECONDS, type ParleyOptions, type RateLimit, type RequestOptions } from './transport.js';
export { DEFAULT_TOLERANCE_SECONDS, verifyWebhook, type RawBody, type VerifyWebhookInput, type WebhookHeaders } from './webhooks.js';
export type { Analytics, Assistant, AssistantSettingsResource, Chat, Conversations, Deliveries, Documents, Events, Faqs, Rundowns, Webhooks, Workflows } from './resources.js';
export type * from './types.js';
export default Parley;
