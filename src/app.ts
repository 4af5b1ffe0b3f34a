import { randomUUID } from 'node:crypto';
import type { Duplex } from 'node:stream';
import swagger from '@fastify/swagger';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import Fastify, { type FastifyBaseLogger, type FastifyError, type FastifyReply, type FastifyServerOptions } from 'fastify';
import type { AppContext } from './context.js';
import { meterUnmatched, registerAuth } from './http/auth.js';
import { addChatCors, registerChatCors } from './http/cors.js';
import { idempotencyLeaseMs, registerIdempotency } from './http/idempotency.js';
import { createInflight, registerConnectionClosing } from './http/shutdown.js';
import { ApiError, errorHandler, failureBody, noRoute } from './http/errors.js';
import { RequestLog } from './http/request-log.js';
import { isForeignKeyViolation } from './db/foreign-key.js';
import { BAD_URL_MESSAGE, hooksOf, parseQuery, registerJsonParser, registerParamGuard, registerOptionalBody } from './http/json.js';
import { createRateLimiter, type RateLimiter } from './http/rate-limit.js';
import { registerMetricsRoute } from './http/metrics.js';
import { ErrorEnvelope, NoBody, NoQuery } from './http/schemas.js';
import { pageLimit } from './db/pagination.js';
import { assistantRoutes } from './modules/assistant/assistant.routes.js';
import { chatRoutes } from './modules/chat/chat.routes.js';
import { analyticsRoutes } from './modules/analytics/analytics.routes.js';
import { conversationsRoutes } from './modules/conversations/conversations.routes.js';
import { dashboardRoutes } from './modules/dashboard/dashboard.routes.js';
import { widgetRoutes } from './modules/widget/widget.routes.js';
import { documentsRoutes } from './modules/documents/documents.routes.js';
import { faqsRoutes } from './modules/faqs/faqs.routes.js';
import { rundownsRoutes } from './modules/rundowns/rundowns.routes.js';
import { webhooksRoutes } from './modules/webhooks/webhooks.routes.js';
import { feedRoutes } from './modules/webhooks/feed.routes.js';
import { workflowsRoutes } from './modules/workflows/workflows.routes.js';
import { EVENT_PAYLOADS } from './modules/webhooks/payloads.schemas.js';
import { DELIVERY_ID_HEADER, EVENT_HEADER, SIGNATURE_HEADER } from './modules/webhooks/signing.js';

export interface BuildAppOptions {
  logger?: FastifyServerOptions['logger'];
  /** The process's logger, shared with the services (takes precedence over `logger`). */
  loggerInstance?: FastifyBaseLogger;
  limiter?: RateLimiter;
}

const BODY_LIMIT = 1024 * 1024;

function makeAjv(coerce: boolean) {
  // Bodies are never coerced ("5" is not a number) and unknown fields are refused, not silently removed;
  // query strings and path parameters arrive as text, so they are coerced (an integer only from plain decimal
  // digits: registerParamGuard refuses `1e1`, `0x10`, ` 5` and `5.0` first, which Number() would read).
  const ajv = new Ajv.default({
    coerceTypes: coerce ? 'array' : false,
    useDefaults: true,
    removeAdditional: false,
    allErrors: false,
    strict: false,
  });
  addFormats.default(ajv);
  return ajv;
}

const HEADER_DOCS = {
  'X-Request-Id': { description: 'Identifies this request in the service logs (echoes a valid X-Request-Id sent by the client).', schema: { type: 'string' } },
  'X-RateLimit-Limit': { description: "The account's requests per minute.", schema: { type: 'integer' } },
  'X-RateLimit-Remaining': { description: 'Requests left in the current minute window.', schema: { type: 'integer' } },
  'X-RateLimit-Reset': { description: 'Unix time, in seconds, at which the minute window resets.', schema: { type: 'integer' } },
  'Retry-After': {
    description: 'Seconds to wait before retrying: on every 429, and on a 500 caused by the database being full, out of memory or connections, restarting or unreachable, or locked by another process (the same request works once it has recovered).',
    schema: { type: 'integer' },
  },
  'Idempotent-Replayed': {
    description: 'Present (`true`) when this answer is the kept answer of an earlier request with the same Idempotency-Key.',
    schema: { type: 'string', enum: ['true'] },
  },
  'Idempotency-Status': {
    description:
      'Present when the Idempotency-Key refused the request: `in-progress` (429: the first request with the key still runs; retry after Retry-After), ' +
      '`key-reused` (400: the key belongs to another request), `answer-lost` (400: it was carried out but its answer was lost; check the outcome, do not send it again).',
    schema: { type: 'string', enum: ['in-progress', 'key-reused', 'answer-lost'] },
  },
} as const;

/** Every POST takes an Idempotency-Key (src/http/idempotency.ts). */
const IDEMPOTENCY_KEY_PARAM = {
  in: 'header',
  name: 'Idempotency-Key',
  required: false,
  description:
    'Makes a retry safe: a request with the same key, method, path and body within 24 hours gets the first answer again (Idempotent-Replayed: true) instead of running twice. The same key with a different request is a 400; while the first request still runs, a 429.',
  schema: { type: 'string', minLength: 1, maxLength: 255 },
};
const ref = (name: keyof typeof HEADER_DOCS) => ({ $ref: `#/components/headers/${name}` });

/** Stable names for generated clients' methods (test/http/openapi.test.ts requires one for every route). */
const OPERATION_IDS: Record<string, string> = Object.fromEntries([
  ['get /documents', 'listDocuments'], ['post /documents', 'createDocument'], ['get /documents/{id}', 'getDocument'],
  ['put /documents/{id}', 'updateDocument'], ['delete /documents/{id}', 'deleteDocument'],
  ['get /faqs', 'listFaqs'], ['post /faqs', 'createFaq'], ['get /faqs/{id}', 'getFaq'], ['put /faqs/{id}', 'updateFaq'], ['delete /faqs/{id}', 'deleteFaq'],
  ['get /settings/assistant', 'getAssistantSettings'], ['put /settings/assistant', 'updateAssistantSettings'], ['post /assistant/preview', 'previewAssistantReply'],
  ['post /chat/conversations', 'startChatConversation'], ['get /chat/conversations/{id}', 'getChatConversation'],
  ['post /chat/conversations/{id}/messages', 'sendChatMessage'], ['post /chat/conversations/{id}/contact', 'leaveChatContact'],
  ['post /chat/conversations/{id}/escalate', 'escalateChatConversation'], ['post /chat/conversations/{id}/end', 'endChatConversation'],
  ['get /conversations', 'listConversations'], ['get /conversations/{id}', 'getConversation'], ['delete /conversations/{id}', 'deleteConversation'], ['delete /conversations', 'deleteCustomerConversations'],
  ['get /analytics/overview', 'getAnalyticsOverview'], ['get /analytics/topics', 'getAnalyticsTopics'],
  ['get /webhooks', 'listWebhooks'], ['post /webhooks', 'createWebhook'], ['get /webhooks/{id}', 'getWebhook'],
  ['put /webhooks/{id}', 'updateWebhook'], ['delete /webhooks/{id}', 'deleteWebhook'], ['post /webhooks/{id}/test', 'testWebhook'],
  ['get /webhooks/{id}/deliveries', 'listWebhookDeliveries'], ['get /webhooks/{id}/deliveries/{deliveryId}', 'getWebhookDelivery'],
  ['post /webhooks/{id}/deliveries/{deliveryId}/retry', 'retryWebhookDelivery'], ['post /webhooks/{id}/recover', 'recoverWebhook'],
  ['get /events', 'listEvents'], ['get /events/{id}', 'getEvent'],
  ['get /workflows', 'listWorkflows'], ['post /workflows', 'createWorkflow'], ['get /workflows/{id}', 'getWorkflow'],
  ['put /workflows/{id}', 'updateWorkflow'], ['delete /workflows/{id}', 'deleteWorkflow'], ['get /workflows/{id}/runs', 'listWorkflowRuns'],
  ['get /rundowns', 'listRundowns'], ['post /rundowns', 'createRundown'], ['get /rundowns/{id}', 'getRundown'],
]);

/**
 * OpenAPI 3.1's `webhooks`: what the service POSTs to a receiver, one operation per event kind, its body the
 * kind's schema (payloads.schemas.ts, which the client library's types and the delivery tests use too) and the
 * headers every delivery carries (signing.ts).
 */
function deliveryOperations() {
  const header = (description: string) => ({ required: true, schema: { type: 'string' }, description });
  const parameters = Object.entries({
    [SIGNATURE_HEADER]:
      'sha256=<lowercase hex HMAC-SHA256 of the raw body, keyed with the UTF-8 bytes of the secret the delivery was made with>: one value, the same on every attempt (after a secret change, retries of earlier deliveries still carry the old secret\'s)',
    [EVENT_HEADER]: 'the event kind, as in the body',
    [DELIVERY_ID_HEADER]: 'the delivery id, the same on every attempt: deduplicate on it',
    'webhook-id': 'Standard Webhooks: the delivery id',
    'webhook-timestamp': 'Standard Webhooks: Unix seconds of this attempt',
    'webhook-signature':
      'Standard Webhooks: one or more space-separated v1,<base64 HMAC-SHA256 of "{webhook-id}.{webhook-timestamp}.{body}">, one per secret the receiver may hold: the secret the delivery was made with, the webhook\'s current one when it differs, and for WEBHOOK_SECRET_OVERLAP (24 h by default) after a secret change the one it replaced. Accept the request if any matches',
  }).map(([name, description]) => ({ name, in: 'header', ...header(description) }));
  return Object.fromEntries(
    Object.entries(EVENT_PAYLOADS).map(([kind, schema]) => [
      kind,
      {
        post: {
          summary: kind === 'test' ? 'A test delivery (POST /webhooks/{id}/test)' : `The ${kind} event`,
          parameters,
          requestBody: { required: true, content: { 'application/json': { schema } } },
          responses: {
            '200': { description: 'Received: any 2xx within WEBHOOK_TIMEOUT (30 s) counts; anything else is retried, and 410 disables the webhook.' },
          },
        },
      },
    ]),
  );
}

/**
 * Each operation gets its operationId. Response headers are not part of the route schemas (Fastify's
 * serializer would see them), so they are added to the document here: X-Request-Id on every response; the
 * rate-limit headers on every response of an authenticated request (a 401 was not counted); Retry-After on
 * 429 (CONTRACT §3) and on 500 (sent when the database is out of a resource: src/db/resource-errors.ts); on POST, the Idempotency-Key request header, Idempotent-Replayed on answers that can be
 * replayed and Idempotency-Status on the 400 and 429 a key can cause.
 */
function documentHeaders<T>(doc: T): T {
  const d = doc as {
    components?: Record<string, unknown>;
    webhooks?: Record<string, unknown>;
    paths?: Record<string, Record<string, { parameters?: unknown[]; responses?: Record<string, { headers?: Record<string, unknown> }> }>>;
  };
  d.components = { ...d.components, headers: HEADER_DOCS };
  d.webhooks = deliveryOperations();
  for (const [path, item] of Object.entries(d.paths ?? {})) {
    for (const [method, op] of Object.entries(item)) {
      const operationId = OPERATION_IDS[`${method} ${path}`];
      if (operationId) (op as { operationId?: string }).operationId = operationId;
      if (method === 'post') op.parameters = [...(op.parameters ?? []), IDEMPOTENCY_KEY_PARAM];
      for (const [status, response] of Object.entries(op.responses ?? {})) {
        response.headers = {
          'X-Request-Id': ref('X-Request-Id'),
          ...(status === '401'
            ? {}
            : { 'X-RateLimit-Limit': ref('X-RateLimit-Limit'), 'X-RateLimit-Remaining': ref('X-RateLimit-Remaining'), 'X-RateLimit-Reset': ref('X-RateLimit-Reset') }),
          ...(status === '429' || status === '500' ? { 'Retry-After': ref('Retry-After') } : {}),
          ...(method === 'post' && status !== '401' && status !== '429' && !status.startsWith('5') ? { 'Idempotent-Replayed': ref('Idempotent-Replayed') } : {}),
          ...(method === 'post' && (status === '400' || status === '429') ? { 'Idempotency-Status': ref('Idempotency-Status') } : {}),
          ...response.headers,
        };
      }
    }
  }
  return doc;
}

/**
 * A body with no required field (and no "at least one field" rule) may be left out (registerOptionalBody reads it
 * as `{}`), so the published document does not require one: @fastify/swagger marks every request body required.
 */
function markOptionalBodies<T>(doc: T): T {
  type BodySchema = { required?: unknown[]; minProperties?: number };
  const paths = (doc as { paths?: Record<string, Record<string, { requestBody?: { required?: boolean; content?: Record<string, { schema?: BodySchema }> } }>> })
    .paths;
  // A required field, or "at least one field" (PUT), needs a body.
  const needsBody = (s: BodySchema | undefined) => (s?.required?.length ?? 0) > 0 || (s?.minProperties ?? 0) > 0;
  for (const item of Object.values(paths ?? {})) {
    for (const op of Object.values(item)) {
      const body = op.requestBody;
      if (body && !Object.values(body.content ?? {}).some((c) => needsBody(c.schema))) body.required = false;
    }
  }
  return doc;
}

/**
 * TypeBox types `limit`/`offset` as required so handlers see numbers, and ajv fills their defaults in; for a
 * client they are optional, so the published document says so.
 */
function markDefaultedParamsOptional<T>(doc: T): T {
  const paths = (doc as { paths?: Record<string, Record<string, { parameters?: { required?: boolean; in: string; schema?: { default?: unknown } }[] }>> })
    .paths;
  for (const item of Object.values(paths ?? {})) {
    for (const op of Object.values(item)) {
      for (const p of op.parameters ?? []) if (p.in === 'query' && p.schema?.default !== undefined) p.required = false;
    }
  }
  return doc;
}

export async function buildApp(ctx: AppContext, opts: BuildAppOptions = {}) {
  const metrics = ctx.metrics;
  /** A request no route matched, counted as its answer goes out (matched ones are counted by their route's hook). */
  const countUnmatched = (req: { method: string }, reply: FastifyReply) => metrics?.http.unmatched(req.method, reply.statusCode, reply.elapsedTime);
  const trust = ctx.config.trustProxy;
  const app = Fastify({
    ...(opts.loggerInstance ? { loggerInstance: opts.loggerInstance } : { logger: opts.logger ?? false }),
    logController: new RequestLog(),
    // Only the per-client rate limit of public keys reads the client's address (req.ip).
    // A hop count as Fastify reads a number (its types take only the other forms): the n proxies nearest are trusted.
    trustProxy: typeof trust === 'number' ? (_address: string, hop: number) => hop < trust : trust,
    bodyLimit: BODY_LIMIT,
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && /^[\w.-]{1,128}$/.test(given) ? given : `req_${randomUUID()}`;
    },
    requestIdHeader: false,
    routerOptions: { querystringParser: parseQuery },
    return503OnClosing: false,
    ajv: { customOptions: { removeAdditional: false } },
    // Without this, Fastify answers an undecodable URL (`/v1/documents/%E0%A4%A`) or an over-long path
    // parameter itself, outside the envelope and without x-request-id.
    frameworkErrors: (err, req, reply) => {
      reply.header('x-request-id', req.id);
      reply.header('x-content-type-options', 'nosniff');
      addChatCors(req, reply as FastifyReply);
      const message =
        err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? 'a path parameter is longer than 100 characters' : BAD_URL_MESSAGE;
      (reply as FastifyReply).code(400).type('application/json').send(failureBody('INVALID_REQUEST', message));
      countUnmatched(req, reply as FastifyReply);
    },
    // Node's HTTP parser refuses some requests before Fastify sees them (a control character in a header,
    // headers over 16 KiB, a request that never finishes arriving); Fastify's default answer is not the envelope.
    clientErrorHandler: (err: NodeJS.ErrnoException, socket: Duplex) => {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const message =
        err.code === 'HPE_HEADER_OVERFLOW'
          ? 'the request headers are too large'
          : err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
            ? 'the request did not arrive in time'
            : 'the HTTP request is malformed';
      const body = JSON.stringify(failureBody('INVALID_REQUEST', message));
      if (socket.writable) {
        socket.write(
          `HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
        );
      }
      socket.destroy();
    },
  }).withTypeProvider<TypeBoxTypeProvider>();
  // First, so every route registered below gets its counting hook.
  if (metrics) {
    metrics.http.register(app);
    const stopLagMonitor = metrics.start();
    app.addHook('onClose', async () => stopLagMonitor());
  }

  // Fastify parses text/plain bodies by default; the API only speaks JSON, so a text body must be refused as
  // a wrong content type rather than reaching validation as a string.
  app.removeContentTypeParser('text/plain');
  registerJsonParser(app);
  registerParamGuard(app);
  // Unknown fields are refused everywhere (README "Validation"): an API route that declares no querystring takes
  // none, and a write (POST, PUT, DELETE) that declares no body takes an empty one. Hidden routes (health, the
  // OpenAPI document, CORS preflights, the dashboard) are tooling, not API, and keep ignoring them.
  app.addHook('onRoute', (route) => {
    const schema = route.schema as { hide?: boolean; querystring?: unknown; body?: unknown } | undefined;
    if (!schema || schema.hide) return;
    if (schema.querystring === undefined) schema.querystring = NoQuery;
    if (schema.body === undefined && hooksOf(route.method).some((m) => m === 'POST' || m === 'PUT' || m === 'DELETE')) schema.body = NoBody;
  });
  // The OpenAPI document names the scope each operation needs (OpenAPI 3.1 lets a bearer requirement list roles),
  // so a generated client or a reader knows which key to use before meeting a 403.
  app.addHook('onRoute', (route) => {
    const { scope, alsoScope } = (route.config as { scope?: string; alsoScope?: string } | undefined) ?? {};
    const schema = route.schema as { hide?: boolean; security?: unknown; description?: string } | undefined;
    if (!scope || !schema || schema.hide) return;
    schema.security = [{ bearer: alsoScope ? [scope, alsoScope] : [scope] }];
    // A GET's schema object is shared with the HEAD route Fastify adds for it, so this hook sees it twice.
    const needs = alsoScope ? `Needs an API key with the \`${scope}\` scope and the \`${alsoScope}\` scope.` : `Needs an API key with the \`${scope}\` scope.`;
    if (schema.description?.endsWith(needs)) return;
    schema.description = `${schema.description ? `${schema.description}\n\n` : ''}${needs}`;
  });
  // After the hook above: a route given NoBody there takes no body at all, so it gets the optional-body hook too.
  registerOptionalBody(app);

  const bodyAjv = makeAjv(false);
  const textAjv = makeAjv(true);
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : textAjv).compile(schema));

  const limiter =
    opts.limiter ??
    ctx.limiter ??
    createRateLimiter({
      redisUrl: ctx.config.redisUrl,
      keyPrefix: ctx.config.redisKeyPrefix,
      publicSharePercent: ctx.config.publicKeyRateShare,
      publicPerClient: ctx.config.publicKeyRatePerClient,
      log: ctx.log,
    });
  if (!opts.limiter && !ctx.limiter) app.addHook('onClose', () => limiter.close());
  // Finishes in-flight webhook attempts, releases leases and closes the outbound connection pool.
  app.addHook('onClose', () => ctx.deliveries.close());
  // Every write's handler is counted while it runs. Closing, the server waits for its sockets only (a client that
  // hung up leaves its handler running); this waits for the handlers too, so the caller can close the database
  // after app.close(). Registered after the hooks above: onClose hooks run last-registered first, after the server
  // has stopped taking requests, so the handlers finish before deliveries and the limiter close. Reads are left
  // out: they lose nothing if cut short, and counting them cost a GET ~7% more CPU (bench/http).
  const inflight = createInflight();
  app.addHook('onRoute', (route) => {
    if (hooksOf(route.method).every((m) => m === 'GET' || m === 'HEAD')) return;
    const handler = route.handler;
    route.handler = function (req, reply) {
      const out = handler.call(this, req, reply);
      if (out instanceof Promise) inflight.track(out);
      return out;
    } as typeof route.handler;
  });
  app.addHook('onClose', () => inflight.drained());
  registerConnectionClosing(app);

  // Callback hooks rather than async ones: no promise and microtask hop on every request. One hook for the headers
  // every answer carries, the chat channel's CORS ones included (src/http/cors.ts): it runs before any route's
  // authentication (a route's own hooks run after the global ones), so refusals carry them too.
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('x-request-id', req.id);
    // Every answer is JSON (or a dashboard file of its declared type); a 404 echoes the path it was asked for, so
    // a browser must not guess another type for it.
    reply.header('x-content-type-options', 'nosniff');
    addChatCors(req, reply);
    done();
  });
  app.setErrorHandler((err: FastifyError, req, reply) => {
    // A key remembered by the key cache (AUTH_CACHE_TTL) can outlive its account's deletion (`parley accounts delete`
    // in another process), or the start of it: its writes then fail on the account's foreign key, or on that of a row
    // the deletion took meanwhile (a conversation), which is that key being no longer valid, not a server error. Its
    // account's keys are forgotten here at once.
    if (!req.is404 && req.auth && isForeignKeyViolation(err)) {
      const { accountId } = req.auth;
      return ctx.services.accounts.accountUsable(accountId).then(
        (usable) => {
          if (usable) return errorHandler(err, req, reply);
          ctx.services.accounts.forgetAccountKeys(accountId);
          return errorHandler(new ApiError('UNAUTHORIZED', 'invalid or revoked API key (its account was deleted)') as unknown as FastifyError, req, reply);
        },
        () => errorHandler(err, req, reply),
      );
    }
    // An unknown route whose body failed to parse never reaches the not-found handler: it is counted (and past the
    // limit refused) here, as every request to an unknown path with a valid key is.
    if (!req.is404) return errorHandler(err, req, reply);
    return meterUnmatched(req, reply, ctx.services.accounts, limiter)
      .then(
        () => errorHandler(err, req, reply),
        (limited: FastifyError) => errorHandler(limited, req, reply),
      )
      .then((sent) => {
        countUnmatched(req, reply);
        return sent;
      });
  });
  app.setNotFoundHandler(async (req, reply) => {
    await meterUnmatched(req, reply, ctx.services.accounts, limiter);
    throw noRoute(req);
  });
  app.addSchema(ErrorEnvelope);

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: { title: 'Parley API', version: '1.0.0', description: 'Conversational support service: REST API v1' },
      servers: [{ url: '/v1' }],
      components: { securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API_KEY>' } } },
      security: [{ bearer: [] }],
    },
    // Shared schemas get a component named after their $id (the default names them def-0, def-1…).
    refResolver: { buildLocalReference: (json, _base, _fragment, i) => (typeof json.$id === 'string' ? json.$id : `def-${i}`) },
    transformObject: (doc) => documentHeaders(markOptionalBodies(markDefaultedParamsOptional('openapiObject' in doc ? doc.openapiObject : doc.swaggerObject))),
  });

  registerChatCors(app);
  registerAuth(app, ctx.services.accounts, limiter);
  if (metrics) {
    metrics.servesApi(limiter);
    registerMetricsRoute(app, metrics, ctx.config.metrics!.token);
  }
  registerIdempotency(app, { repo: ctx.idempotency, clock: ctx.clock, leaseMs: idempotencyLeaseMs(ctx.config), log: ctx.log, inflight });

  await app.register(
    async (v1) => {
      v1.get('/openapi.json', { schema: { hide: true } }, async () => app.swagger());
      v1.get('/health', { schema: { hide: true } }, async () => {
        await ctx.db.selectFrom('accounts').select('id').limit(pageLimit(1)).execute();
        return { success: true, data: { status: 'ok' } };
      });
      await v1.register(documentsRoutes(ctx));
      await v1.register(faqsRoutes(ctx));
      await v1.register(assistantRoutes(ctx));
      await v1.register(chatRoutes(ctx));
      await v1.register(conversationsRoutes(ctx));
      await v1.register(analyticsRoutes(ctx));
      await v1.register(webhooksRoutes(ctx));
      await v1.register(feedRoutes(ctx));
      await v1.register(workflowsRoutes(ctx));
      await v1.register(rundownsRoutes(ctx));
    },
    { prefix: '/v1' },
  );
  // The staff dashboard is a static client of the API above, so it lives beside it, not under /v1.
  await app.register(dashboardRoutes());
  // The customer chat widget's script, for the owner's site: a static client of /v1/chat.
  await app.register(widgetRoutes());

  return app;
}

export type App = Awaited<ReturnType<typeof buildApp>>;
