import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox';
import type { AppContext } from '../../context.js';
import { IdParams, responses } from '../../http/schemas.js';
import { JSON_TYPE } from '../../http/versioned-answers.js';
import { EventList, EventRecord, ListEventsQuery } from './feed.schemas.js';
import type { FeedEvent } from './feed.service.js';

/**
 * The stored delivery body with the event's id spliced in front of its fields, rather than the body parsed and
 * serialised again by the route's schema, which writes fields in the schema's order, not the delivery's: a
 * receiver comparing (or hashing) what the feed and a delivery gave must find the same bytes. The bus writes
 * every body as `{"event":…}` (events.ts prepare); anything else is re-serialised rather than spliced into broken
 * JSON.
 */
export function eventJson(e: FeedEvent): string {
  if (e.body.startsWith('{"event":')) return `{"id":${JSON.stringify(e.id)},${e.body.slice(1)}`;
  return JSON.stringify({ id: e.id, ...(JSON.parse(e.body) as object) });
}

export const feedRoutes =
  (ctx: AppContext): FastifyPluginAsyncTypebox =>
  async (app) => {
    const svc = ctx.services.eventFeed;
    const tags = ['Events'];
    // Events are what webhooks deliver: reading them back is webhook reading (CONTRACT §2's scopes are closed).
    const read = { scope: 'webhooks:read' as const };

    app.get('/events', {
      config: read,
      schema: {
        tags,
        summary: "The account's events, newest first: what its webhooks are sent, kept for DELIVERY_RETENTION",
        description:
          'Every event the account emitted, whether or not a webhook subscribed to it, as {id, event, timestamp, data}: the body a webhook delivery of it ' +
          'sends (the same bytes) with the event id. Test sends are deliveries, not events, and are not listed. Events of an erased conversation are gone ' +
          '(its conversation.erased stays). `event` keeps one kind or several separated by commas; `from` (inclusive) and `to` (exclusive) bound the timestamp.',
        querystring: ListEventsQuery,
        response: responses(200, EventList),
      },
      handler: async (req, reply) => {
        const page = await svc.list(req.auth.accountId, req.query);
        const events = page.events.map(eventJson).join(',');
        return reply.type(JSON_TYPE).send(`{"success":true,"data":{"events":[${events}],"total":${page.total},"limit":${page.limit},"offset":${page.offset}}}`);
      },
    });

    app.get('/events/:id', {
      config: read,
      schema: { tags, summary: 'One event, as the list gives it', params: IdParams, response: responses(200, EventRecord, [404]) },
      handler: async (req, reply) => {
        const event = await svc.get(req.auth.accountId, req.params.id);
        return reply.type(JSON_TYPE).send(`{"success":true,"data":${eventJson(event)}}`);
      },
    });
  };
