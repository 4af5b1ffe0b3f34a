import { Type, type Static } from 'typebox';
import { NullableTimestamp, PageQuery, StringEnum, Timestamp } from '../../http/schemas.js';
import { MAX_WEBHOOK_URL_LENGTH } from './ssrf.js';
import { SUBSCRIBABLE_EVENTS, type SubscribableEvent } from './events.js';

export { SUBSCRIBABLE_EVENTS, type SubscribableEvent };

/** The seed's examples also use `conversation.escalated`; it is stored as the canonical `escalation`. */
export const EVENT_ALIASES: Record<string, SubscribableEvent> = { 'conversation.escalated': 'escalation' };

export const DELIVERY_STATUSES = ['pending', 'succeeded', 'failed', 'cancelled'] as const;

const Url = Type.String({ minLength: 1, maxLength: MAX_WEBHOOK_URL_LENGTH, description: 'absolute http(s) URL of the receiver' });
// Kinds are checked by the service so the error can list the valid ones and resolve aliases. CONTRACT §4 bounds
// the distinct kinds (≤ 20; there are fewer kinds than that); repeats are merged, so the list itself may repeat one,
// within a sanity bound.
const Events = Type.Array(Type.String({ minLength: 1, maxLength: 100 }), {
  minItems: 1,
  maxItems: 100,
  description: `event kinds: ${SUBSCRIBABLE_EVENTS.join(', ')} (conversation.escalated = escalation)`,
});
const Secret = Type.String({ minLength: 8, maxLength: 256, description: 'HMAC key of the signatures; never returned' });

export const CreateWebhookBody = Type.Object({ url: Url, events: Events, secret: Secret }, { additionalProperties: false });
export type CreateWebhookBody = Static<typeof CreateWebhookBody>;

export const UpdateWebhookBody = Type.Object(
  {
    url: Type.Optional(Url),
    events: Type.Optional(Events),
    secret: Type.Optional(Secret),
    enabled: Type.Optional(Type.Boolean({ description: 'false disables (cancelling pending deliveries); true re-enables' })),
  },
  { additionalProperties: false, minProperties: 1 },
);
export type UpdateWebhookBody = Static<typeof UpdateWebhookBody>;

export const ListWebhooksQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
export type ListWebhooksQuery = Static<typeof ListWebhooksQuery>;

export const WebhookRecord = Type.Object({
  id: Type.String(),
  url: Type.String(),
  events: Type.Array(Type.String()),
  enabled: Type.Boolean(),
  disabledReason: Type.Union([Type.String(), Type.Null()]),
  createdAt: Timestamp,
  updatedAt: Timestamp,
});

export const WebhookList = Type.Object({
  webhooks: Type.Array(WebhookRecord),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

export const Attempt = Type.Object({
  attempt: Type.Integer(),
  kind: StringEnum(['auto', 'manual', 'test'] as const),
  at: Timestamp,
  statusCode: Type.Union([Type.Integer(), Type.Null()]),
  durationMs: Type.Integer(),
  error: Type.Union([Type.String(), Type.Null()]),
});

export const AttemptDetail = Type.Object({
  ...Attempt.properties,
  responseBody: Type.Union([Type.String(), Type.Null()]),
});

export const DeliveryListItem = Type.Object({
  id: Type.String({ description: 'the X-Service-Delivery-Id / webhook-id of every attempt' }),
  event: Type.String(),
  status: StringEnum(DELIVERY_STATUSES),
  attempts: Type.Array(Attempt),
  nextAttemptAt: NullableTimestamp,
  createdAt: Timestamp,
});

export const DeliveryDetail = Type.Object({
  id: Type.String(),
  webhookId: Type.String(),
  eventId: Type.Union([Type.String(), Type.Null()]),
  event: Type.String(),
  status: StringEnum(DELIVERY_STATUSES),
  attempts: Type.Array(AttemptDetail),
  nextAttemptAt: NullableTimestamp,
  createdAt: Timestamp,
  updatedAt: Timestamp,
  body: Type.String({ description: 'the exact JSON body every attempt sends' }),
});

export const DeliveryList = Type.Object({
  deliveries: Type.Array(DeliveryListItem),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});

export const ListDeliveriesQuery = Type.Object(
  { status: Type.Optional(StringEnum([...DELIVERY_STATUSES, 'all'] as const, { default: 'all' })), ...PageQuery },
  { additionalProperties: false },
);
export type ListDeliveriesQuery = Static<typeof ListDeliveriesQuery>;

export const DeliveryParams = Type.Object(
  { id: Type.String({ minLength: 1, maxLength: 64 }), deliveryId: Type.String({ minLength: 1, maxLength: 64 }) },
  { additionalProperties: false },
);

export const TestWebhookBody = Type.Object(
  { message: Type.Optional(Type.String({ minLength: 1, maxLength: 1_000 })) },
  { additionalProperties: false },
);

/** At most this many deliveries per recover call: the rest is a `next` call away (webhooks.service.ts recover). */
export const RECOVER_MAX = 10_000;

const Instant = (description: string) =>
  Type.String({ minLength: 1, maxLength: 64, description: `${description}; ISO 8601 date (2026-01-01, midnight UTC) or date-time (2026-01-01T09:30:00Z)` });

export const RecoverWebhookBody = Type.Object(
  {
    since: Instant('events created at or after this time (at most DELIVERY_RETENTION ago, not in the future)'),
    until: Type.Optional(Instant('events created before this time (exclusive; default now, not in the future)')),
  },
  { additionalProperties: false },
);
export type RecoverWebhookBody = Static<typeof RecoverWebhookBody>;

export const RecoverResult = Type.Object({
  recovered: Type.Integer({ description: `new pending deliveries created by this call (at most ${RECOVER_MAX})` }),
  since: Timestamp,
  until: Timestamp,
  next: Type.Union([Timestamp, Type.Null()], {
    description: 'null when every missed event of the window was recovered; otherwise call again with this as `since` and the same `until`',
  }),
});
