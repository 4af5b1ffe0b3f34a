/**
 * What GET /metrics reports (README "Metrics"). The parts of the service keep plain counters of what they do (the
 * delivery engine its attempts, the chat its replies, the rate limiter its refusals); this module reads them, the
 * process's own figures and the webhook queue in the database when a scrape comes, and writes them out.
 */
import { readFileSync } from 'node:fs';
import { monitorEventLoopDelay, performance, type IntervalHistogram } from 'node:perf_hooks';
import type { Kysely } from 'kysely';
import type { DialectName } from './db/database.js';
import type { DB } from './db/schema.js';
import { transactionRetries } from './db/unit-of-work.js';
import { createHttpMetrics } from './http/metrics.js';
import type { RateLimiter } from './http/rate-limit.js';
import type { Clock } from './lib/clock.js';
import type { Logger } from './lib/log.js';
import { Exposition, labelPairs } from './lib/prometheus.js';
import type { AssistantService } from './modules/assistant/assistant.service.js';
import type { ChatService } from './modules/chat/chat.service.js';
import type { ConversationsService } from './modules/conversations/conversations.service.js';
import type { RundownsService } from './modules/rundowns/rundowns.service.js';
import type { WebhooksService } from './modules/webhooks/webhooks.service.js';
import { ATTEMPT_KINDS, ATTEMPT_OUTCOMES, type DeliveryEngine } from './modules/webhooks/delivery.js';
import { deliveriesRepository } from './modules/webhooks/webhooks.repository.js';

/** Scrapes within this long of a database read share it: several Prometheus servers, or one per node, cost one read. */
export const QUEUE_CACHE_MS = 2_000;
/**
 * A scrape waits this long for the queue figures, then answers without them (parley_webhook_queue_up 0): a
 * database that stopped answering must not take the process figures down with it. The read goes on, and the
 * scrapes that follow wait for it rather than starting another.
 */
export const QUEUE_WAIT_MS = 2_000;
/** One warning per this period while the queue cannot be read. */
const QUEUE_WARN_INTERVAL_MS = 60_000;
/** The event-loop delay sampling period: the monitor's timer fires this often. */
const LAG_RESOLUTION_MS = 10;

type QueueFigures = Awaited<ReturnType<typeof deliveriesRepository.queueFigures>> & { now: number };

export interface MetricsParts {
  db: Kysely<DB>;
  dialect: DialectName;
  clock: Clock;
  log: Logger;
  deliveries: Pick<DeliveryEngine, 'attemptCounts'>;
  chat: Pick<ChatService, 'replies'>;
  assistant: Pick<AssistantService, 'llm'>;
  conversations: Pick<ConversationsService, 'erased'>;
  webhooks: Pick<WebhooksService, 'pruned'>;
  rundowns: Pick<RundownsService, 'counts'>;
}

let version: string | undefined;
/** The package's version: ../package.json from both src/ and dist/. */
function packageVersion(): string {
  version ??= (JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8')) as { version: string }).version;
  return version;
}

export function createMetrics(parts: MetricsParts) {
  const { db, dialect, clock, log } = parts;
  const http = createHttpMetrics();
  /** Set once the API is served from this process: the request, rate-limit and chat figures are its. */
  let api: { limiter: RateLimiter } | null = null;

  // ------------------------------------------------------------------------------------ event loop

  let lag: IntervalHistogram | null = null;
  let users = 0;
  /** Starts the event-loop delay monitor (a timer firing every LAG_RESOLUTION_MS) while someone serves the metrics. */
  function start() {
    if (users++ === 0) {
      lag = monitorEventLoopDelay({ resolution: LAG_RESOLUTION_MS });
      lag.enable();
    }
    let stopped = false;
    return () => {
      if (stopped) return;
      stopped = true;
      if (--users === 0) {
        lag?.disable();
        lag = null;
      }
    };
  }

  function processFigures(out: Exposition) {
    out.single('parley_process_uptime_seconds', 'gauge', 'Seconds since the process started.', Math.round(process.uptime() * 1000) / 1000);
    const cpu = process.cpuUsage();
    out.single('parley_process_cpu_seconds_total', 'counter', 'CPU time the process has used (user and system).', (cpu.user + cpu.system) / 1e6);
    const mem = process.memoryUsage();
    out.single('parley_process_resident_memory_bytes', 'gauge', 'Resident set size of the process.', mem.rss);
    out.single('parley_process_heap_used_bytes', 'gauge', 'V8 heap in use.', mem.heapUsed);
    out.single(
      'parley_event_loop_busy_seconds_total',
      'counter',
      'Time the event loop spent running callbacks rather than waiting; its rate is the event-loop utilisation (0-1).',
      performance.eventLoopUtilization().active / 1000,
    );
    if (!lag) return;
    // How much later than asked the monitor's timer fired: the delay every callback met. Over the time since the
    // previous scrape (the histogram starts again after each), so each series is recent whatever the scrape interval.
    const late = (ns: number) => (lag!.count === 0 ? 0 : Math.max(0, ns / 1e6 - LAG_RESOLUTION_MS) / 1000);
    const p50 = late(lag.percentile(50));
    const p99 = late(lag.percentile(99));
    const max = late(lag.max);
    lag.reset();
    out.single('parley_event_loop_lag_p50_seconds', 'gauge', 'Median event-loop delay since the previous scrape.', p50);
    out.single('parley_event_loop_lag_p99_seconds', 'gauge', '99th percentile of the event-loop delay since the previous scrape.', p99);
    out.single('parley_event_loop_lag_max_seconds', 'gauge', 'Longest event-loop delay since the previous scrape.', max);
  }

  // ------------------------------------------------------------------------------------ webhook queue

  let cached: { at: number; figures: QueueFigures } | null = null;
  let reading: Promise<QueueFigures> | null = null;
  let lastWarn = -Infinity;

  function readQueue(): Promise<QueueFigures> {
    reading ??= (async () => {
      const now = clock.now();
      try {
        const figures = { ...(await deliveriesRepository.queueFigures(db, now)), now };
        cached = { at: now, figures };
        return figures;
      } catch (err) {
        if (performance.now() - lastWarn >= QUEUE_WARN_INTERVAL_MS) {
          lastWarn = performance.now();
          log.warn({ err: (err as Error).message }, 'metrics: cannot read the webhook queue from the database');
        }
        throw err;
      } finally {
        reading = null;
      }
    })();
    return reading;
  }

  /** The queue as read at most QUEUE_CACHE_MS ago; null when the database did not answer within QUEUE_WAIT_MS. */
  async function queue(): Promise<QueueFigures | null> {
    // The service's clock (a test's fake one) rather than a monotonic one: a step back of the wall clock makes the
    // age negative, and the figures are read again.
    const age = cached ? clock.now() - cached.at : -1;
    if (cached && age >= 0 && age < QUEUE_CACHE_MS) return cached.figures;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<null>((resolve) => {
      timer = setTimeout(() => resolve(null), QUEUE_WAIT_MS).unref();
    });
    try {
      return await Promise.race([readQueue(), late]);
    } catch {
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  function queueFigures(out: Exposition, q: QueueFigures | null) {
    out.single('parley_webhook_queue_up', 'gauge', 'Whether the webhook queue figures below could be read from the database for this scrape (1) or not (0).', q ? 1 : 0);
    if (!q) return;
    out.single('parley_webhook_deliveries_pending', 'gauge', 'Deliveries still to be made, by any node: waiting for their time, due, or being attempted.', q.waiting + q.leased);
    out.single('parley_webhook_deliveries_due', 'gauge', 'Pending deliveries whose next attempt time has passed and that no worker has taken yet.', q.due);
    out.single('parley_webhook_deliveries_in_flight', 'gauge', "Pending deliveries a worker holds (an attempt under way, or a stopped worker's lease not yet expired).", q.leased);
    const oldest = q.oldestNextAttemptAt;
    out.single(
      'parley_webhook_oldest_due_delivery_age_seconds',
      'gauge',
      'How long the longest-waiting due delivery has been due (0 when none is): how far the workers are behind.',
      oldest !== null && oldest <= q.now ? (q.now - oldest) / 1000 : 0,
    );
    out.single('parley_webhooks_disabled', 'gauge', 'Webhooks disabled, by their owner or after failing deliveries.', q.disabledWebhooks);
  }

  // ------------------------------------------------------------------------------------ counters of the parts

  function webhookAttempts(out: Exposition) {
    out.family(
      'parley_webhook_attempts_total',
      'counter',
      'Delivery attempts this process made, by kind (auto: the worker; manual: a retry through the API; test) and outcome (succeeded; retrying: failed, another attempt scheduled; failed: failed, none scheduled; gone: answered 410, webhook disabled).',
    );
    for (const kind of ATTEMPT_KINDS) {
      for (const outcome of ATTEMPT_OUTCOMES) out.sample('parley_webhook_attempts_total', labelPairs({ kind, outcome }), parts.deliveries.attemptCounts[kind][outcome]);
    }
  }

  /** What erasure and retention removed (the API erases on request; the worker applies the retention settings). */
  function removals(out: Exposition) {
    out.family('parley_conversations_erased_total', 'counter', 'Conversations this process erased, by reason (request: DELETE /v1/conversations/:id; retention: CONVERSATION_RETENTION).');
    for (const [reason, n] of Object.entries(parts.conversations.erased)) out.sample('parley_conversations_erased_total', labelPairs({ reason }), n);
    out.family('parley_history_pruned_total', 'counter', 'Finished webhook deliveries and emitted events this process deleted under DELIVERY_RETENTION, by kind.');
    for (const [kind, n] of Object.entries(parts.webhooks.pruned)) out.sample('parley_history_pruned_total', labelPairs({ kind }), n);
    out.family('parley_db_transaction_retries_total', 'counter', 'PostgreSQL write transactions this process ran again after losing a deadlock or a serialization failure, by reason.');
    for (const [reason, n] of Object.entries(transactionRetries)) out.sample('parley_db_transaction_retries_total', labelPairs({ reason }), n);
  }

  /** The worker's scheduled rundowns (and the API's manual ones): what was built, thrown away, claimed. */
  function rundowns(out: Exposition) {
    const c = parts.rundowns.counts;
    out.family(
      'parley_rundowns_built_total',
      'counter',
      "Rundown digests this process built (read a window's conversations for), by trigger (schedule: the worker's scheduler; manual: POST /v1/rundowns), including those then thrown away or whose build failed.",
    );
    for (const [trigger, n] of Object.entries(c.built)) out.sample('parley_rundowns_built_total', labelPairs({ trigger }), n);
    out.single(
      'parley_rundowns_discarded_total',
      'counter',
      "Scheduled rundown digests this process built and threw away because another worker had stored the window's rundown first (a claim that expired while its holder was still building, or a worker without claims).",
      c.discarded,
    );
    out.family(
      'parley_rundown_claims_total',
      'counter',
      "Scheduled rundown windows this process's scheduler tried to claim before building, by outcome (taken; held: another worker was building it, so the window and the account's later ones were left to that worker).",
    );
    for (const [outcome, n] of Object.entries(c.claims)) out.sample('parley_rundown_claims_total', labelPairs({ outcome }), n);
    out.single(
      'parley_rundowns_failed_total',
      'counter',
      "Scheduled rundown windows whose build failed in this process (each logged as 'scheduled rundown failed'); the next run tries them again. A database out of space or another resource stops the run instead and is not counted here.",
      c.failed,
    );
  }

  function apiFigures(out: Exposition, limiter: RateLimiter) {
    http.collect(out);
    out.family('parley_rate_limit_refusals_total', 'counter', "Requests refused with 429 by the rate limiter, by budget (account; public: its public keys' share; client: one client's allowance with public keys) and window.");
    for (const budget of ['account', 'public', 'client'] as const) {
      for (const window of ['minute', 'day'] as const) out.sample('parley_rate_limit_refusals_total', labelPairs({ budget, window }), limiter.refusals[budget][window]);
    }
    if (limiter.shared) {
      out.single(
        'parley_rate_limit_redis_fallback',
        'gauge',
        'Whether this node counts rate limits on its own because Redis is failing (1) or shares them through Redis (0).',
        limiter.fallingBack ? 1 : 0,
      );
    }
    out.family(
      'parley_assistant_replies_total',
      'counter',
      "Replies to customers' chat messages, by kind and by who wrote them (llm; builtin: the built-in answerer and rules; workflow: an owner's workflow).",
    );
    for (const [kind, byAuthor] of Object.entries(parts.chat.replies)) {
      for (const [by, n] of Object.entries(byAuthor)) out.sample('parley_assistant_replies_total', labelPairs({ kind, by }), n);
    }
    const llm = parts.assistant.llm;
    if (!llm.configured) return;
    out.family('parley_llm_failures_total', 'counter', 'Replies the LLM was asked for and did not give (the built-in answerer replied instead), by reason.');
    for (const [reason, n] of Object.entries(llm.failures)) out.sample('parley_llm_failures_total', labelPairs({ reason }), n);
    out.single('parley_llm_paused', 'gauge', 'Whether the LLM is being left alone for a while after repeated failures (1) or called (0).', llm.paused ? 1 : 0);
  }

  return {
    http,
    start,
    /** The app serving the API in this process: its requests and rate limiter are reported from now on. */
    servesApi(limiter: RateLimiter) {
      api = { limiter };
    },
    async render(): Promise<string> {
      const q = await queue();
      const out = new Exposition();
      out.family('parley_info', 'gauge', 'Always 1; the labels name the version and the database dialect.').sample('parley_info', labelPairs({ version: packageVersion(), dialect }), 1);
      processFigures(out);
      if (api) apiFigures(out, api.limiter);
      webhookAttempts(out);
      removals(out);
      rundowns(out);
      queueFigures(out, q);
      return out.text();
    },
  };
}

export type Metrics = ReturnType<typeof createMetrics>;
