import type { Kysely } from 'kysely';
import type { DB } from '../../db/schema.js';
import { invalidRequest, notFound } from '../../http/errors.js';
import { parseTimeRange } from '../../http/time-range.js';
import { SUBSCRIBABLE_EVENTS } from './events.js';
import { feedRepository as repo } from './feed.repository.js';
import type { ListEventsQuery } from './feed.schemas.js';
import { knownEventKind, VALID_EVENT_KINDS } from './webhooks.service.js';

/** An event of the feed: its id and the exact body every webhook delivery of it sends (events.payload). */
export interface FeedEvent {
  id: string;
  body: string;
}

/**
 * `event`: one kind or several separated by commas, as webhooks name them (the alias resolved, repeats merged).
 * Undefined when it keeps every kind, so the list is read through the account's index rather than through each kind's.
 */
export function parseKinds(text: string | undefined): string[] | undefined {
  if (text === undefined) return undefined;
  const kinds: string[] = [];
  for (const raw of text.split(',')) {
    if (raw === '') throw invalidRequest(`query.event has an empty kind: separate kinds with single commas, none at either end; ${VALID_EVENT_KINDS}`);
    if (raw === 'test') {
      throw invalidRequest(`query.event "test" is not in the event feed: a test send (POST /webhooks/:id/test) is a delivery to one webhook, not an event; ${VALID_EVENT_KINDS}`);
    }
    const kind = knownEventKind(raw, 'query.event');
    if (!kinds.includes(kind)) kinds.push(kind);
  }
  return kinds.length === SUBSCRIBABLE_EVENTS.length ? undefined : kinds;
}

/**
 * GET /v1/events: the events the account's webhooks are (or would have been) sent, as stored by the event bus
 * (events.ts) for DELIVERY_RETENTION, so an integration can read back what its receiver missed.
 */
export function createFeedService(db: Kysely<DB>) {
  return {
    async list(accountId: string, q: ListEventsQuery) {
      const kinds = parseKinds(q.event);
      const range = parseTimeRange(q);
      const { rows, total } = await repo.page(db, accountId, { kinds, ...range, limit: q.limit, offset: q.offset });
      const events: FeedEvent[] = rows.map((r) => ({ id: r.id, body: r.payload }));
      return { events, total, limit: q.limit, offset: q.offset };
    },

    /** Another account's event is 404 like an unknown one. */
    async get(accountId: string, id: string): Promise<FeedEvent> {
      const row = await repo.find(db, accountId, id);
      if (!row) throw notFound('event', id);
      return { id: row.id, body: row.payload };
    },
  };
}

export type FeedService = ReturnType<typeof createFeedService>;
