import type { QueryValue, RequestOptions, Transport } from './transport.js';
import type * as T from './types.js';

/** An id as one path segment: an id with a `/` or `?` must not reach another route. */
const seg = (id: string) => encodeURIComponent(id);

interface Page {
  total: number;
  limit: number;
  offset: number;
}

/**
 * Every item from `query.offset` on, a page at a time (`query.limit` items a page, default 100, the most the API
 * gives). Lists are newest first and paged by offset, so a record created during the walk shifts later pages by
 * one: an item already yielded by the previous page is skipped rather than yielded twice. A record deleted during
 * the walk can shift one the other way and be missed; walk again for a consistent view. Items are told apart by
 * `keyOf` (their id; a workflow run, which has none, by its conversation).
 */
export async function* paginate<Q extends { limit?: number | undefined; offset?: number | undefined }, P extends Page, I>(
  list: (query: Q) => Promise<P>,
  items: (page: P) => I[],
  query: Q,
  keyOf: (item: I) => string = (item) => (item as { id: string }).id,
): AsyncGenerator<I, void, undefined> {
  const limit = query.limit ?? 100;
  let offset = query.offset ?? 0;
  let previous = new Set<string>();
  for (;;) {
    const page = await list({ ...query, limit, offset });
    const rows = items(page);
    for (const row of rows) if (!previous.has(keyOf(row))) yield row;
    offset += rows.length;
    if (rows.length === 0 || offset >= page.total) return;
    previous = new Set(rows.map(keyOf));
  }
}

type Query = Record<string, QueryValue>;

/** What a listable resource is made of: its path, its list's query, page and item, and its record. */
interface Listing {
  query: object;
  page: Page;
  item: { id: string };
  record: unknown;
}

/** list, iterate and get. */
class ListResource<L extends Listing> {
  constructor(
    protected readonly http: Transport,
    protected readonly path: string,
    private readonly items: (page: L['page']) => L['item'][],
  ) {}

  /** One page, as the API answers it. */
  list(query: L['query'] = {}, options?: RequestOptions): Promise<L['page']> {
    return this.http.get<L['page']>(this.path, query as Query, options);
  }

  /** Every item, page after page: `for await (const x of parley.….iterate({…}))`. */
  iterate(query: L['query'] = {}, options?: RequestOptions): AsyncGenerator<L['item'], void, undefined> {
    return paginate((q: L['query']) => this.list(q, options), this.items, query as { limit?: number; offset?: number });
  }

  get(id: string, options?: RequestOptions): Promise<L['record']> {
    return this.http.get<L['record']>(`${this.path}/${seg(id)}`, undefined, options);
  }
}

interface Writable extends Listing {
  create: object;
  created: unknown;
  update: object;
}

/** list, iterate, get, create, update (merges the given fields) and delete. */
class CrudResource<W extends Writable> extends ListResource<W> {
  create(body: W['create'], options?: RequestOptions): Promise<W['created']> {
    return this.http.post<W['created']>(this.path, body, options);
  }

  update(id: string, body: W['update'], options?: RequestOptions): Promise<W['record']> {
    return this.http.put<W['record']>(`${this.path}/${seg(id)}`, body, options);
  }

  delete(id: string, options?: RequestOptions): Promise<T.Deleted> {
    return this.http.delete<T.Deleted>(`${this.path}/${seg(id)}`, options);
  }
}

export class Documents extends CrudResource<{
  query: T.DocumentListParams;
  page: T.DocumentList;
  item: T.DocumentListItem;
  record: T.Document;
  create: T.DocumentCreateParams;
  created: T.CreatedDocument;
  update: T.DocumentUpdateParams;
}> {
  constructor(http: Transport) {
    super(http, '/documents', (p) => p.documents);
  }
}

export class Faqs extends CrudResource<{
  query: T.FaqListParams;
  page: T.FaqList;
  item: T.Faq;
  record: T.Faq;
  create: T.FaqCreateParams;
  created: T.Faq;
  update: T.FaqUpdateParams;
}> {
  constructor(http: Transport) {
    super(http, '/faqs', (p) => p.faqs);
  }
}

export class Workflows extends CrudResource<{
  query: T.WorkflowListParams;
  page: T.WorkflowList;
  item: T.Workflow;
  record: T.Workflow;
  create: T.WorkflowCreateParams;
  created: T.Workflow;
  update: T.WorkflowUpdateParams;
}> {
  constructor(http: Transport) {
    super(http, '/workflows', (p) => p.workflows);
  }

  /** One page of the workflow's runs (the conversations that fired it, what it extracted), newest first. */
  runs(id: string, query: T.WorkflowRunListParams = {}, options?: RequestOptions): Promise<T.WorkflowRunList> {
    return this.http.get<T.WorkflowRunList>(`${this.path}/${seg(id)}/runs`, query as Query, options);
  }

  /** Every run of the workflow, page after page. A workflow fires once per conversation: runs are told apart by it. */
  iterateRuns(id: string, query: T.WorkflowRunListParams = {}, options?: RequestOptions): AsyncGenerator<T.WorkflowRun, void, undefined> {
    return paginate((q: T.WorkflowRunListParams) => this.runs(id, q, options), (p) => p.runs, query, (r) => r.conversationId);
  }
}

export class Conversations extends ListResource<{ query: T.ConversationListParams; page: T.ConversationList; item: T.ConversationListItem; record: T.Conversation }> {
  constructor(http: Transport) {
    super(http, '/conversations', (p) => p.conversations);
  }

  /** Erases the conversation and what Parley keeps of it (messages, events, deliveries not yet sent). */
  delete(id: string, options?: RequestOptions): Promise<T.Deleted> {
    return this.http.delete<T.Deleted>(`/conversations/${seg(id)}`, options);
  }

  /**
   * Erases every conversation of one customer (each as `delete` does); answers how many, 0 when none are left, so
   * a retry after a lost answer succeeds.
   */
  deleteByCustomer(customerId: string, options?: RequestOptions): Promise<T.CustomerErased> {
    return this.http.delete<T.CustomerErased>('/conversations', options, { customerId });
  }
}

export class Rundowns extends ListResource<{ query: T.RundownListParams; page: T.RundownList; item: T.Rundown; record: T.Rundown }> {
  constructor(http: Transport) {
    super(http, '/rundowns', (p) => p.rundowns);
  }

  /** Makes a rundown of [from, to) now (files its suggested FAQs as pending, emits rundown.generated). */
  create(body: T.RundownCreateParams, options?: RequestOptions): Promise<T.Rundown> {
    return this.http.post<T.Rundown>(this.path, body, options);
  }
}

/**
 * The account's events, newest first, kept for DELIVERY_RETENTION: what its webhooks were (or would have been) sent,
 * to catch up after an outage (docs/webhooks.md "Event feed").
 */
export class Events extends ListResource<{ query: T.EventListParams; page: T.EventList; item: T.Event; record: T.Event }> {
  constructor(http: Transport) {
    super(http, '/events', (p) => p.events);
  }

  override list(query: T.EventListParams = {}, options?: RequestOptions): Promise<T.EventList> {
    const { event, ...rest } = query;
    return this.http.get<T.EventList>(this.path, { ...rest, event: typeof event === 'object' ? event.join(',') : event }, options);
  }
}

/** A webhook's delivery history; every method takes the webhook's id first. */
export class Deliveries {
  constructor(private readonly http: Transport) {}

  list(webhookId: string, query: T.DeliveryListParams = {}, options?: RequestOptions): Promise<T.DeliveryList> {
    return this.http.get<T.DeliveryList>(`/webhooks/${seg(webhookId)}/deliveries`, query as Query, options);
  }

  iterate(webhookId: string, query: T.DeliveryListParams = {}, options?: RequestOptions): AsyncGenerator<T.DeliveryListItem, void, undefined> {
    return paginate((q: T.DeliveryListParams) => this.list(webhookId, q, options), (p) => p.deliveries, query);
  }

  /** One delivery with the exact body it sends and the response bodies of its attempts. */
  get(webhookId: string, deliveryId: string, options?: RequestOptions): Promise<T.Delivery> {
    return this.http.get<T.Delivery>(`/webhooks/${seg(webhookId)}/deliveries/${seg(deliveryId)}`, undefined, options);
  }

  /** A fresh attempt now (recorded as a manual attempt); answers the delivery. */
  retry(webhookId: string, deliveryId: string, options?: RequestOptions): Promise<T.Delivery> {
    return this.http.post<T.Delivery>(`/webhooks/${seg(webhookId)}/deliveries/${seg(deliveryId)}/retry`, undefined, options);
  }
}

export class Webhooks extends CrudResource<{
  query: T.WebhookListParams;
  page: T.WebhookList;
  item: T.Webhook;
  record: T.Webhook;
  create: T.WebhookCreateParams;
  created: T.Webhook;
  update: T.WebhookUpdateParams;
}> {
  readonly deliveries: Deliveries;

  constructor(http: Transport) {
    super(http, '/webhooks', (p) => p.webhooks);
    this.deliveries = new Deliveries(http);
  }

  /** Sends a `test` event to the webhook now, whatever it subscribes to, and answers the delivery. */
  test(id: string, body: T.WebhookTestParams = {}, options?: RequestOptions): Promise<T.Delivery> {
    return this.http.post<T.Delivery>(`/webhooks/${seg(id)}/test`, body, options);
  }

  /**
   * New deliveries, sent by the worker, of every event of [since, until) the webhook missed (none pending or
   * succeeded), e.g. after an outage; the webhook must be enabled. At most 10,000 per call: while `next` is not null,
   * call again with `{since: next, until}`.
   */
  recover(id: string, body: T.WebhookRecoverParams, options?: RequestOptions): Promise<T.WebhookRecovery> {
    return this.http.post<T.WebhookRecovery>(`/webhooks/${seg(id)}/recover`, body, options);
  }
}

export class Analytics {
  constructor(private readonly http: Transport) {}

  /** Headline figures over conversations created in [from, to). */
  overview(query: T.AnalyticsOverviewParams = {}, options?: RequestOptions): Promise<T.AnalyticsOverview> {
    return this.http.get<T.AnalyticsOverview>('/analytics/overview', query, options);
  }

  /** The most frequent topics in [from, to) (`limit` default 10). */
  topics(query: T.AnalyticsTopicsParams = {}, options?: RequestOptions): Promise<T.AnalyticsTopics> {
    return this.http.get<T.AnalyticsTopics>('/analytics/topics', query, options);
  }
}

export class AssistantSettingsResource {
  constructor(private readonly http: Transport) {}

  get(options?: RequestOptions): Promise<T.AssistantSettings> {
    return this.http.get<T.AssistantSettings>('/settings/assistant', undefined, options);
  }

  /** Merges the given fields (name, greeting, tone). */
  update(body: T.AssistantSettingsUpdateParams, options?: RequestOptions): Promise<T.AssistantSettings> {
    return this.http.put<T.AssistantSettings>('/settings/assistant', body, options);
  }
}

/** The assistant, tried without a conversation. */
export class Assistant {
  constructor(private readonly http: Transport) {}

  /**
   * What the assistant would answer to `content` (after `history`), and the published sources that match it best,
   * also when it would not answer. Writes nothing; needs `documents:read`.
   */
  preview(body: T.AssistantPreviewParams, options?: RequestOptions): Promise<T.AssistantPreview> {
    return this.http.post<T.AssistantPreview>('/assistant/preview', body, options);
  }
}

/** The customer chat channel: any key with the `chat` scope, a public `pk_` key included. */
export class Chat {
  constructor(private readonly http: Transport) {}

  /** Starts a conversation; the answer includes the assistant's greeting. */
  start(body: T.ChatStartParams = {}, options?: RequestOptions): Promise<T.ChatStarted> {
    return this.http.post<T.ChatStarted>('/chat/conversations', body, options);
  }

  /** The conversation as the customer sees it. */
  get(id: string, options?: RequestOptions): Promise<T.ChatConversation> {
    return this.http.get<T.ChatConversation>(`/chat/conversations/${seg(id)}`, undefined, options);
  }

  /** Sends the customer's message; answers `[customerMessage, assistantMessage]`. */
  sendMessage(id: string, body: T.ChatSendMessageParams, options?: RequestOptions): Promise<T.ChatMessages> {
    return this.http.post<T.ChatMessages>(`/chat/conversations/${seg(id)}/messages`, body, options);
  }

  /** Leaves contact details for a person to follow up (emits escalation.submitted). */
  contact(id: string, body: T.ChatContactParams, options?: RequestOptions): Promise<T.ChatConversation> {
    return this.http.post<T.ChatConversation>(`/chat/conversations/${seg(id)}/contact`, body, options);
  }

  /** Hands the conversation to a person (emits escalation). */
  escalate(id: string, body: T.ChatEscalateParams = {}, options?: RequestOptions): Promise<T.ChatConversation> {
    return this.http.post<T.ChatConversation>(`/chat/conversations/${seg(id)}/escalate`, body, options);
  }

  end(id: string, options?: RequestOptions): Promise<T.ChatConversation> {
    return this.http.post<T.ChatConversation>(`/chat/conversations/${seg(id)}/end`, undefined, options);
  }
}
