import type { AppContext } from '../context.js';
import type { WorkerTask } from './worker.js';

/** Every background job of the service; `parley worker` and `parley serve` (unless --no-worker) run them. */
export function workerTasks(ctx: AppContext): WorkerTask[] {
  return [...ctx.deliveries.tasks];
}
