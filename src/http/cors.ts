import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

/** The endpoints a public key may call: the ones the owner's chat widget calls from the customer's browser. */
const CHAT_PREFIX = '/v1/chat/';

const EXPOSED = 'X-Request-Id, X-RateLimit-Limit, X-RateLimit-Remaining, X-RateLimit-Reset, Retry-After, Idempotent-Replayed, Idempotency-Status';

/**
 * The CORS headers of a chat answer; also called for the refusals Fastify makes before any hook runs (a URL whose
 * percent-encoding does not decode), so a widget can read those too.
 */
export function addChatCors(req: FastifyRequest, reply: FastifyReply) {
  if (!req.url.startsWith(CHAT_PREFIX)) return;
  reply.header('access-control-allow-origin', '*');
  reply.header('access-control-expose-headers', EXPOSED);
}

/**
 * CORS for the chat channel only. A widget on the owner's site calls it cross-origin with a `pk_` key, so the
 * browser must be allowed to send the Authorization header and read the answer — errors included, or the widget
 * could not tell a rate limit from a network failure. Any origin is allowed: the key travels in a header, never
 * in a cookie, so a foreign page gains nothing it could not do with the key itself. Server endpoints get no CORS
 * headers at all: a server key does not belong in a browser.
 *
 * The headers of an answer are added by app.ts's onRequest hook (addChatCors), before authentication, so refused
 * requests carry them too; this registers the preflight.
 */
export function registerChatCors(app: FastifyInstance) {
  // The preflight: no key (browsers never send one with it), no body, nothing counted against a rate limit.
  app.options(`${CHAT_PREFIX}*`, { schema: { hide: true } }, (_req, reply) => {
    reply
      .code(204)
      .header('access-control-allow-methods', 'GET, POST')
      .header('access-control-allow-headers', 'Authorization, Content-Type, X-Request-Id, Idempotency-Key')
      .header('access-control-max-age', '600')
      .send();
  });
}
