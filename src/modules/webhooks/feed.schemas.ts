import { Type, type Static, type TObject, type TProperties } from 'typebox';
import { PageQuery } from '../../http/schemas.js';
import { TimeRangeQuery } from '../../http/time-range.js';
import { SUBSCRIBABLE_EVENTS, type SubscribableEvent } from './events.js';
import { EVENT_PAYLOADS } from './payloads.schemas.js';

export const ListEventsQuery = Type.Object(
  {
    event: Type.Optional(
      Type.String({
        minLength: 1,
        // Every kind once, commas between, with room for the alias: anything longer repeats or misspells.
        maxLength: 500,
        description:
          `only events of these kinds: one kind, or several separated by commas (an event of any of them matches); kinds: ${SUBSCRIBABLE_EVENTS.join(', ')} ` +
          '(conversation.escalated = escalation)',
      }),
    ),
    ...TimeRangeQuery,
    ...PageQuery,
  },
  { additionalProperties: false },
);
export type ListEventsQuery = Static<typeof ListEventsQuery>;

const EventId = Type.String({ description: 'the event id (evt_…); a webhook delivery of it has an id of its own (X-Service-Delivery-Id)' });

/** A delivery body with the event's id first: what the feed answers for one event of that kind. */
const withId = <P extends TProperties>(payload: TObject<P>) => Type.Object({ id: EventId, ...payload.properties }, { additionalProperties: false });

/** One feed item per kind: `test` is not among them, a test send being a delivery with no event. */
export const EVENT_RECORDS = {
  'conversation.started': withId(EVENT_PAYLOADS['conversation.started']),
  'conversation.message': withId(EVENT_PAYLOADS['conversation.message']),
  'conversation.ended': withId(EVENT_PAYLOADS['conversation.ended']),
  'conversation.erased': withId(EVENT_PAYLOADS['conversation.erased']),
  escalation: withId(EVENT_PAYLOADS.escalation),
  'escalation.submitted': withId(EVENT_PAYLOADS['escalation.submitted']),
  'workflow.triggered': withId(EVENT_PAYLOADS['workflow.triggered']),
  'rundown.generated': withId(EVENT_PAYLOADS['rundown.generated']),
} satisfies Record<SubscribableEvent, TObject>;

/**
 * An event as the feed gives it: `{id, event, timestamp, data}`, the body every webhook delivery of it sends (the
 * same bytes: feed.routes.ts eventJson) with the event's id added, so a receiver's handler takes either.
 */
export const EventRecord = Type.Union(Object.values(EVENT_RECORDS));
export type EventRecord = { [K in keyof typeof EVENT_RECORDS]: Static<(typeof EVENT_RECORDS)[K]> }[keyof typeof EVENT_RECORDS];

export const EventList = Type.Object({
  events: Type.Array(EventRecord),
  total: Type.Integer(),
  limit: Type.Integer(),
  offset: Type.Integer(),
});
export type EventList = Omit<Static<typeof EventList>, 'events'> & { events: EventRecord[] };
