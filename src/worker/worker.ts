import type { FastifyBaseLogger } from 'fastify';

/** A periodic job: run() is called again intervalMs after the previous run finished (never overlapping). */
export interface WorkerTask {
  name: string;
  intervalMs: number;
  run(signal: AbortSignal): Promise<void>;
  /** Called once on shutdown after the loop stopped, e.g. to finish in-flight work and release leases. */
  drain?(): Promise<void>;
}

export interface Logger {
  info(obj: unknown, msg?: string): void;
  error(obj: unknown, msg?: string): void;
}

export function createWorker(tasks: WorkerTask[], log: Logger | FastifyBaseLogger) {
  const controller = new AbortController();
  const timers = new Set<NodeJS.Timeout>();
  const running = new Set<Promise<void>>();

  const loop = (task: WorkerTask) => {
    if (controller.signal.aborted) return;
    const p = task
      .run(controller.signal)
      .catch((err: unknown) => log.error({ err, task: task.name }, 'worker task failed'))
      .finally(() => {
        running.delete(p);
        if (controller.signal.aborted) return;
        const t = setTimeout(() => {
          timers.delete(t);
          loop(task);
        }, task.intervalMs);
        timers.add(t);
      });
    running.add(p);
  };

  return {
    start() {
      for (const task of tasks) loop(task);
      log.info({ tasks: tasks.map((t) => t.name) }, 'worker started');
    },
    /** Stops scheduling, waits for the runs in progress, then lets each task drain. */
    async stop() {
      controller.abort();
      for (const t of timers) clearTimeout(t);
      timers.clear();
      await Promise.allSettled([...running]);
      await Promise.allSettled(tasks.map((t) => t.drain?.()));
    },
  };
}
