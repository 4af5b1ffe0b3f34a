import type { AppContext } from '../context.js';
import type { WorkerTask } from './worker.js';

/** Every background job of the service; `parley worker` and `parley serve` (unless --no-worker) run them. */
export function workerTasks(ctx: AppContext): WorkerTask[] {
  const idleMs = ctx.config.conversationIdleTimeoutMs;
  return [
    ...ctx.deliveries.tasks,
    {
      name: 'conversation-idle-sweeper',
      // Checks several times per timeout so a conversation ends at most ~25% after its idle deadline.
      intervalMs: Math.min(30_000, Math.max(100, Math.floor(idleMs / 4))),
      async run(signal) {
        while (!signal.aborted && (await ctx.services.chat.endIdle(idleMs)) > 0) {
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
