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

export function createWorker(tasks: WorkerTask[], log: Logger) {
  const controller = new AbortController();
  const states = new Map<WorkerTask, { timer: NodeJS.Timeout | null; running: Promise<void> | null; again: boolean }>();
  let started = false;

  const loop = (task: WorkerTask) => {
    const st = states.get(task)!;
    if (controller.signal.aborted) return;
    if (st.timer) clearTimeout(st.timer);
    st.timer = null;
    st.again = false;
    const p = task
      .run(controller.signal)
      .catch((err: unknown) => log.error({ err, task: task.name }, 'worker task failed'))
      .finally(() => {
        st.running = null;
        if (controller.signal.aborted) return;
        if (st.again) {
          setImmediate(() => loop(task));
          return;
        }
        st.timer = setTimeout(() => loop(task), task.intervalMs);
      });
    st.running = p;
  };

  const wakeOf = (task: WorkerTask) => () => {
    const st = states.get(task);
    if (!st || !started || controller.signal.aborted) return;
    if (st.running) st.again = true;
    else if (st.timer) loop(task);
  };

  for (const task of tasks) {
    states.set(task, { timer: null, running: null, again: false });
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
