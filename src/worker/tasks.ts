import type { AppContext } from '../context.js';
import type { WorkerTask } from './worker.js';

/** What a reply of the built-in answerer may take on a loaded machine (measured: over 5 s for a node's first reply). */
const REPLY_MARGIN_MS = 10_000;

/** Every background job of the service; `parley worker` and `parley serve` (unless --no-worker) run them. */
export function workerTasks(ctx: AppContext): WorkerTask[] {
  const idleMs = ctx.config.conversationIdleTimeoutMs;
  /**
   * A customer's message is written with its reply, so until the reply is ready the conversation still looks idle
   * since the message before: ended then, the message got "has ended". The sweeper waits the longest a reply can
   * take (the LLM's timeout, and a margin for the built-in answerer on a busy machine) past the idle deadline, but
   * at most a quarter of the timeout, so a short test timeout still ends conversations promptly.
   */
  const replyGraceMs = Math.min(Math.floor(idleMs / 4), (ctx.config.llm?.timeoutMs ?? 0) + REPLY_MARGIN_MS);
  return [
    ...ctx.deliveries.tasks,
    {
      name: 'conversation-idle-sweeper',
      // Checks several times per timeout so a conversation ends at most ~25% after its idle deadline and the grace.
      intervalMs: Math.min(30_000, Math.max(100, Math.floor(idleMs / 4))),
      async run(signal) {
        while (!signal.aborted && (await ctx.services.chat.endIdle(idleMs + replyGraceMs)) > 0) {
          /* keep going while full batches come back */
        }
      },
    },
    {
      name: 'idempotency-key-sweeper',
      // Keys are kept 24 hours; a minute late in deleting one changes nothing.
      intervalMs: 60_000,
      async run() {
        await ctx.idempotency.sweep(ctx.clock.now());
      },
    },
    {
      name: 'delivery-history-pruner',
      // Retention is counted in days: pruning every ten minutes keeps each run's batches small.
      intervalMs: 600_000,
      async run(signal) {
        const retention = ctx.config.deliveryRetentionMs;
        if (retention > 0) await ctx.services.webhooks.pruneHistory(ctx.clock.now() - retention, signal);
      },
    },
    {
      name: 'conversation-retention',
      // Retention is counted in days: every ten minutes is prompt enough and keeps each run small.
      intervalMs: 600_000,
      async run(signal) {
        const retention = ctx.config.conversationRetentionMs;
        if (retention > 0) await ctx.services.conversations.eraseEnded(ctx.clock.now() - retention, signal);
      },
    },
    {
      name: 'rundown-scheduler',
      // A window's rundown appears at most a quarter of an interval (and at most a minute) after it closes.
      intervalMs: Math.min(60_000, Math.max(100, Math.floor(ctx.config.rundownIntervalMs / 4))),
      async run(signal) {
        await ctx.services.rundowns.generateDue(signal);
      },
    },
  ];
}
