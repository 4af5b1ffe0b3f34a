import type { Kysely, Transaction } from 'kysely';
import type { DB } from '../../db/schema.js';
import { toIso } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';

/** What a webhook may subscribe to: the seed's kinds except `test` (sent only by the test action). */
export const SUBSCRIBABLE_EVENTS = [
  'conversation.started',
  'conversation.ended',
  'conversation.message',
  'escalation',
  'escalation.submitted',
  'workflow.triggered',
  'rundown.generated',
] as const;
export type SubscribableEvent = (typeof SUBSCRIBABLE_EVENTS)[number];

export const EVENT_KINDS = [...SUBSCRIBABLE_EVENTS, 'test'] as const;
export type EventKind = (typeof EVENT_KINDS)[number];

type Conn = Kysely<DB> | Transaction<DB>;

export interface EmittedEvent {
  id: string;
  kind: EventKind;
  /** The exact body bytes every delivery of this event sends. */
  body: string;
  createdAt: number;
}

/** Called after an event row is written, inside the same transaction (the webhooks module fans out deliveries). */
export type EventFanout = (conn: Conn, accountId: string, event: EmittedEvent) => Promise<void>;

/**
 * The transactional outbox: emit() must be called with the transaction of the change that caused the event,
 * so the event (and its deliveries) exist if and only if that change committed.
 */
export function createEventBus(opts: { now: () => number; fanout?: EventFanout }) {
  let fanout = opts.fanout;
  return {
    setFanout(f: EventFanout) {
      fanout = f;
    },
    async emit(conn: Conn, accountId: string, kind: EventKind, data: Record<string, unknown>): Promise<EmittedEvent> {
      const createdAt = opts.now();
      const event: EmittedEvent = {
        id: newId('evt', createdAt),
        kind,
        body: JSON.stringify({ event: kind, timestamp: toIso(createdAt), data }),
        createdAt,
      };
      await conn.insertInto('events').values({ id: event.id, account_id: accountId, kind, payload: event.body, created_at: createdAt }).execute();
      if (fanout) await fanout(conn, accountId, event);
      return event;
    },
  };
}

export type EventBus = ReturnType<typeof createEventBus>;
