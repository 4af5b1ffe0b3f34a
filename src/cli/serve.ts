import type { Config } from '../config.js';
import { buildApp } from '../app.js';
import { createContext, type AppContext } from '../context.js';
import { startMetricsServer } from '../http/metrics.js';
import { createLogger, type Logger } from '../lib/log.js';
import type { ProcessClock } from '../db/server-clock.js';
import { workerTasks } from '../worker/tasks.js';
import { createWorker } from '../worker/worker.js';
import { openClock, openMigrated, StartupError } from './database.js';

function listenProblem(err: NodeJS.ErrnoException, at: { host: string; port: number }, names = 'HOST, PORT'): string {
  const where = `${at.host}:${at.port} (${names})`;
  switch (err.code) {
    case 'EADDRINUSE':
      return `cannot listen on ${where}: the port is already in use`;
    case 'EADDRNOTAVAIL':
      return `cannot listen on ${where}: the address is not one of this machine's`;
    case 'EACCES':
      return `cannot listen on ${where}: permission denied (ports below 1024 need privileges)`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `cannot listen on ${where}: the host name does not resolve`;
    default:
      return `cannot listen on ${where}: ${err.message}`;
  }
}

const SHUTDOWN_DEADLINE_MS = 10_000;

/**
 * How long shutdown may take: 10 s, or, where this process makes webhook attempts, long enough for one to run
 * its full WEBHOOK_TIMEOUT and be recorded; cut short, it would be sent again after its lease expires.
 */
export function shutdownDeadline(config: Config, worker: boolean): number {
  return worker ? Math.max(SHUTDOWN_DEADLINE_MS, config.webhookTimeoutMs + 5_000) : SHUTDOWN_DEADLINE_MS;
}

function onShutdown(deadlineMs: number, fn: () => Promise<void>) {
  let stopping = false;
  const handler = (signal: string) => {
    if (stopping) return;
    stopping = true;
    process.stderr.write(`parley: ${signal} received, shutting down\n`);
    // In-flight requests and webhook attempts get a bounded time to finish: a database or a receiver that
    // stopped answering must not keep the process from stopping. What is cut short is safe: an unfinished
    // request was never answered, an unrecorded attempt is made again when its lease expires.
    setTimeout(() => {
      process.stderr.write(`parley: shutdown did not finish within ${Math.round(deadlineMs / 1000)} s; exiting\n`);
      process.exit(1);
    }, deadlineMs).unref();
    fn().then(
      () => process.exit(0),
      (err: unknown) => {
        process.stderr.write(`parley: shutdown failed: ${(err as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => handler('SIGTERM'));
  process.on('SIGINT', () => handler('SIGINT'));
}

/**
 * The database as a long-running process opens it: migrated, lost connections logged rather than fatal, and
 * queries bounded by DATABASE_QUERY_TIMEOUT once the migrations (which may take longer) are done; with the clock the
 * process tells time by (on PostgreSQL the server's, shared by every node: src/db/server-clock.ts).
 */
async function openFor(config: Config, log: Logger) {
  const { database, applied } = await openMigrated(config, {
    onConnectionError: (err) => log.warn({ err: err.message }, 'PostgreSQL connection lost; the pool opens a new one on next use'),
    checkpoints: {
      // The WAL keeps every write since the last checkpoint: while checkpoints fail it only grows.
      onError: (message, { code, failures }) =>
        log.error(
          { err: message, code, consecutiveFailures: failures },
          code === 'SQLITE_FULL'
            ? 'SQLite WAL checkpoint failed: the disk is full; the write-ahead log (the -wal file) grows until space is freed, and writes fail once it cannot'
            : 'SQLite WAL checkpoint failed; the write-ahead log (the -wal file) grows until checkpoints work again',
        ),
      onRecovered: (failures) => log.info({ failuresBefore: failures }, 'SQLite WAL checkpoints work again'),
    },
  });
  // An upgrade changes the database for good (migrations are forward-only): it is said, not done silently.
  if (applied.length) {
    log.info({ applied }, 'database migrated');
    process.stderr.write(`parley: applied database migrations ${applied.join(', ')}\n`);
  }
  database.setQueryTimeout(config.databaseQueryTimeoutMs);
  let time: ProcessClock;
  try {
    time = await openClock(database, log);
  } catch (err) {
    await database.close().catch(() => undefined);
    throw err;
  }
  return {
    database,
    clock: time.clock,
    async close() {
      time.stop();
      await database.close();
    },
  };
}

/** The metrics on a port of their own (METRICS_PORT), if set; the caller closes the rest when this fails. */
async function listenForMetrics(ctx: AppContext, log: Logger) {
  const m = ctx.config.metrics;
  if (!ctx.metrics || !m || m.port === null) return null;
  const stopLagMonitor = ctx.metrics.start();
  try {
    const server = await startMetricsServer({ host: m.host, port: m.port, token: m.token, source: ctx.metrics, log });
    return {
      url: server.url,
      async close() {
        await server.close();
        stopLagMonitor();
      },
    };
  } catch (err) {
    stopLagMonitor();
    throw new StartupError(listenProblem(err as NodeJS.ErrnoException, { host: m.host, port: m.port }, 'METRICS_HOST, METRICS_PORT'));
  }
}

export async function serve(config: Config, opts: { worker: boolean; json: boolean }) {
  const log = createLogger(config.logLevel);
  const opened = await openFor(config, log);
  const { database } = opened;
  const ctx = createContext(config, database, opened.clock, log);
  // On PostgreSQL the deployment may have several API nodes: without Redis each keeps its own rate-limit
  // counters, so N nodes let an account make N times its plan's requests. Said once, at start.
  if (database.dialect === 'postgres' && !config.redisUrl) {
    log.warn({}, 'REDIS_URL is not set: rate limits are counted per API node (with several nodes, an account gets its limit on each)');
  }
  const app = await buildApp(ctx, { loggerInstance: log });
  const worker = opts.worker ? createWorker(workerTasks(ctx), log) : null;

  let address: string;
  try {
    address = await app.listen({ port: config.port, host: config.host });
  } catch (err) {
    // Close what is open (database, Redis, the checkpoint thread) so the process ends instead of idling.
    await app.close().catch(() => undefined);
    await opened.close().catch(() => undefined);
    throw new StartupError(listenProblem(err as NodeJS.ErrnoException, config));
  }
  let metricsServer: Awaited<ReturnType<typeof listenForMetrics>>;
  try {
    metricsServer = await listenForMetrics(ctx, log);
  } catch (err) {
    await app.close().catch(() => undefined);
    await opened.close().catch(() => undefined);
    throw err;
  }
  // Before saying it listens: a process manager (or a test) may send SIGTERM as soon as it reads that line, and a
  // signal with no handler yet ends the process at once instead of shutting it down (seen: 3 kills in 8).
  onShutdown(shutdownDeadline(config, opts.worker), async () => {
    // Stop taking requests first, then let the worker finish its in-flight attempts and release its leases.
    await app.close();
    await worker?.stop();
    await metricsServer?.close();
    await opened.close();
  });
  worker?.start();
  // After listening: a port already taken is the one thing to say then, not followed by advice about accounts.
  const accounts = await ctx.db.selectFrom('accounts').select('id').limit(1).execute();
  if (accounts.length === 0) {
    process.stderr.write(
      'parley: the database has no account yet. Create one and its key with:\n' +
        '  npx parley init                      (account on the pro plan + server key, printed once)\n' +
        'or\n  npx parley accounts create --name "Acme" --plan pro\n  npx parley keys create --account <acct_id>\n',
    );
  }
  const metricsUrl = metricsServer?.url ?? (config.metrics ? `${address}/metrics` : null);
  if (opts.json) {
    process.stdout.write(`${JSON.stringify({ listening: address, api: `${address}/v1`, worker: opts.worker, ...(metricsUrl ? { metrics: metricsUrl } : {}) })}\n`);
  } else {
    process.stderr.write(`parley: listening on ${address}/v1 (${database.dialect}${opts.worker ? ', worker on' : ', API only'})\n`);
    if (metricsServer) process.stderr.write(`parley: metrics on ${metricsServer.url}\n`);
  }
}

export async function runWorker(config: Config, opts: { json: boolean }) {
  const log = createLogger(config.logLevel);
  const opened = await openFor(config, log);
  const { database } = opened;
  const ctx = createContext(config, database, opened.clock, log);
  const worker = createWorker(workerTasks(ctx), log);
  let metricsServer: Awaited<ReturnType<typeof listenForMetrics>>;
  try {
    metricsServer = await listenForMetrics(ctx, log);
  } catch (err) {
    await opened.close().catch(() => undefined);
    throw err;
  }
  // Before saying it started, as for serve.
  onShutdown(shutdownDeadline(config, true), async () => {
    // Scraped until the attempts in flight are done: the last figures include them.
    await worker.stop();
    await metricsServer?.close();
    await opened.close();
  });
  worker.start();
  if (opts.json) process.stdout.write(`${JSON.stringify({ worker: 'started', dialect: database.dialect, ...(metricsServer ? { metrics: metricsServer.url } : {}) })}\n`);
  else if (metricsServer) process.stderr.write(`parley: metrics on ${metricsServer.url}\n`);
}
