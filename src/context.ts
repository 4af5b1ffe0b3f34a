import type { Config } from './config.js';
import type { Database } from './db/database.js';
import { createAnnouncer, deliveriesChannel, listen } from './db/notify.js';
import type { RateLimiter } from './http/rate-limit.js';
import type { Clock } from './lib/clock.js';
import { silentLogger, type Logger } from './lib/log.js';
import { createMetrics } from './metrics.js';
import { createIdempotencyRepository } from './http/idempotency.js';
import { createAccountsService } from './modules/accounts/accounts.service.js';
import { createAssistantService } from './modules/assistant/assistant.service.js';
import { createChatService } from './modules/chat/chat.service.js';
import { createAnalyticsService } from './modules/analytics/analytics.service.js';
import { createConversationsService } from './modules/conversations/conversations.service.js';
import { createDocumentsService } from './modules/documents/documents.service.js';
import { createFaqsService } from './modules/faqs/faqs.service.js';
import { createRundownsService } from './modules/rundowns/rundowns.service.js';
import { createDeliveryEngine } from './modules/webhooks/delivery.js';
import { createEventBus } from './modules/webhooks/events.js';
import { createFeedService } from './modules/webhooks/feed.service.js';
import { createUndiciSender } from './modules/webhooks/sender.js';
import { createFanout, createWebhooksService } from './modules/webhooks/webhooks.service.js';
import { createWorkflowsService } from './modules/workflows/workflows.service.js';

/** Everything a route or job needs, built once per process (or per test) from config, database and clock. */
export function createContext(config: Config, database: Database, clock: Clock, log: Logger = silentLogger) {
  const { db } = database;
  const PER_WEBHOOK = 16;
  // On PostgreSQL, workers in other processes hear of new deliveries at commit instead of at their next poll.
  const channel = database.dialect === 'postgres' ? deliveriesChannel(database.schema) : null;
  const deliveries = createDeliveryEngine({
    db,
    dialect: database.dialect,
    clock,
    config,
    // No cap per origin in the sender: the engine already bounds requests in flight (per webhook and per
    // worker), and a request that waited in the sender for a connection had its timeout running meanwhile:
    // several webhooks on one receiver host got timeouts, duplicates and disabling from a receiver that
    // answered every request in time.
    sender: createUndiciSender({ allowPrivate: config.webhookAllowPrivateUrls, connectionsPerOrigin: null }),
    perWebhook: PER_WEBHOOK,
    pollIntervalMs: config.workerPollIntervalMs,
    ...(channel ? { listen: (onNotify: () => void) => listen(database.url, channel, onNotify, log) } : {}),
    log,
  });
  // Every emit fans out to deliveries in the emitting transaction and wakes this process's worker.
  const fanout = createFanout({
    clock,
    retryDelaysMs: config.webhookRetryDelaysMs,
    onCreated: () => deliveries.kick(),
    ...(channel ? { announce: createAnnouncer(db, channel) } : {}),
  });
  const events = createEventBus({ now: () => clock.now(), fanout });
  // A failing LLM endpoint is answered by the default answerer; the operator still needs to hear of it.
  const assistant = createAssistantService(db, config, { clock, log: (msg, fields) => log.warn(fields, msg) });
  const workflows = createWorkflowsService(db, clock, events);
  const faqs = createFaqsService(db, clock);
  const analytics = createAnalyticsService(db, database.dialect);
  const rundowns = createRundownsService({ db, clock, events, analytics, faqs, intervalMs: config.rundownIntervalMs, backfill: config.rundownBackfill, log });
  const services = {
    accounts: createAccountsService(db, clock, { dialect: database.dialect, authCacheTtlMs: config.authCacheTtlMs, log }),
    documents: createDocumentsService(db, clock),
    faqs,
    assistant,
    chat: createChatService({ db, clock, events, assistant, workflows }),
    // Erasing a conversation rewords the rundowns that quote it.
    conversations: createConversationsService(db, events, rundowns),
    analytics,
    // A recover's deliveries wake the workers as an emit's do (here and, on PostgreSQL, in other processes).
    webhooks: createWebhooksService(db, clock, config, deliveries, () => fanout.delivered()),
    // Not `events`: ctx.events is the bus that writes them.
    eventFeed: createFeedService(db),
    workflows,
    rundowns,
  };
  const idempotency = createIdempotencyRepository(db);
  // Only with METRICS_TOKEN: without it nothing is served, so nothing is counted per request either.
  const metrics = config.metrics
    ? createMetrics({ db, dialect: database.dialect, clock, log, deliveries, chat: services.chat, assistant, conversations: services.conversations, webhooks: services.webhooks, rundowns })
    : null;
  return { config, database, db, clock, log, events, deliveries, services, idempotency, metrics };
}

export type AppContext = ReturnType<typeof createContext> & { limiter?: RateLimiter };
