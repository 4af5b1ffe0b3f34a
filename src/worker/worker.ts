import { AsyncResource } from 'node:async_hooks';
import type { Logger } from '../lib/log.js';

/** A periodic job: run() is called again intervalMs after the previous run finished (never overlapping). */
export interface WorkerTask {
  name: string;
  intervalMs: number;
  run(signal: AbortSignal): Promise<void>;
  /** Called once on shutdown after the loop stopped, e.g. to finish in-flight work and release leases. */
  drain?(): Promise<void>;
  /**
   * Receives a function that runs the task now instead of at the end of its interval (or right after the
   * run in progress), for work that arrives in-process (an emitted event) or frees up (a finished attempt).
   */
  bindWake?(wake: () => void): void;
}

/** A failing task (the database is down) retries at most this far apart, doubling from its interval. */
const MAX_FAILURE_BACKOFF_MS = 5_000;
/** While a task keeps failing, one log line per this period says so (instead of one per run). */
const FAILURE_LOG_INTERVAL_MS = 30_000;

interface TaskState {
  timer: NodeJS.Timeout | null;
  running: Promise<void> | null;
  again: boolean;
  failures: number;
  lastFailureLog: number;
}

export function createWorker(tasks: WorkerTask[], log: Logger) {
  const controller = new AbortController();
  const states = new Map<WorkerTask, TaskState>();
  let started = false;

  const failed = (task: WorkerTask, st: TaskState, err: unknown) => {
    st.failures++;
    const now = Date.now();
    if (st.failures === 1 || now - st.lastFailureLog >= FAILURE_LOG_INTERVAL_MS) {
      st.lastFailureLog = now;
      log.error({ err, task: task.name, consecutiveFailures: st.failures }, 'worker task failed');
    }
  };
  const succeeded = (task: WorkerTask, st: TaskState) => {
    if (st.failures > 0) log.info({ task: task.name, failuresBefore: st.failures }, 'worker task recovered');
    st.failures = 0;
  };

  const loop = (task: WorkerTask) => {
    const st = states.get(task)!;
    if (controller.signal.aborted) return;
    if (st.timer) clearTimeout(st.timer);
    st.timer = null;
    st.again = false;
    const p = task
      .run(controller.signal)
      .then(
        () => succeeded(task, st),
        (err: unknown) => failed(task, st, err),
      )
      .finally(() => {
        st.running = null;
        if (controller.signal.aborted) return;
        if (st.again && st.failures === 0) {
          setImmediate(() => loop(task));
          return;
        }
        // After failures, back off (doubling, up to MAX_FAILURE_BACKOFF_MS) instead of hammering a database
        // that is down and filling the log every poll interval.
        const delay = st.failures === 0 ? task.intervalMs : Math.max(task.intervalMs, Math.min(MAX_FAILURE_BACKOFF_MS, task.intervalMs * 2 ** st.failures));
        st.timer = setTimeout(() => loop(task), delay);
      });
    st.running = p;
  };

  // A wake comes from whatever emitted (often a request): the task's loop must not inherit that request's async
  // context (its unit of work, src/db/unit-of-work.ts) for the rest of its life, so it runs in the worker's own.
  const own = new AsyncResource('parley-worker');
  const wakeOf = (task: WorkerTask) => () => {
    const st = states.get(task);
    if (!st || !started || controller.signal.aborted) return;
    if (st.running) st.again = true;
    else if (st.timer) own.runInAsyncScope(() => loop(task));
  };

  for (const task of tasks) {
    states.set(task, { timer: null, running: null, again: false, failures: 0, lastFailureLog: 0 });
    task.bindWake?.(wakeOf(task));
  }

  return {
    start() {
      started = true;
      for (const task of tasks) loop(task);
      log.info({ tasks: tasks.map((t) => t.name) }, 'worker started');
    },
    /** Stops scheduling, waits for the runs in progress, then lets each task drain. */
    async stop() {
      controller.abort();
      for (const st of states.values()) {
        if (st.timer) clearTimeout(st.timer);
        st.timer = null;
      }
      await Promise.allSettled([...states.values()].map((st) => st.running));
      await Promise.allSettled(tasks.map((t) => t.drain?.()));
    },
  };
}
