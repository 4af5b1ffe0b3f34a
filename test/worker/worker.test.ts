import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createWorker } from '../../src/worker/worker.js';

// No database: the worker loop is plain scheduling, the same whatever runs inside the task.
test('a failing task backs off (doubling from its interval) and logs once, not once per run; recovery is logged', async () => {
  const runs: number[] = [];
  const logs: { level: string; msg: string | undefined; obj: any }[] = [];
  const log = {
    info: (obj: object, msg?: string) => void logs.push({ level: 'info', msg, obj }),
    warn: (obj: object, msg?: string) => void logs.push({ level: 'warn', msg, obj }),
    error: (obj: object, msg?: string) => void logs.push({ level: 'error', msg, obj }),
  };
  const worker = createWorker(
    [
      {
        name: 'flaky',
        intervalMs: 10,
        async run() {
          runs.push(Date.now());
          if (runs.length <= 5) throw new Error('database is down');
        },
      },
    ],
    log,
  );
  worker.start();
  const deadline = Date.now() + 5_000;
  while (runs.length < 8 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  await worker.stop();
  assert.ok(runs.length >= 8, `runs: ${runs.length}`);
  const gaps = runs.slice(1).map((t, i) => t - runs[i]!);
  // Failures 1..5 wait 20, 40, 80, 160, 320 ms; after the success it is back to the 10 ms interval.
  assert.ok(gaps[3]! >= 150 && gaps[4]! >= 300, `backoff gaps: ${gaps.join(', ')}`);
  assert.ok(gaps[6]! < 100, `back to the interval after recovery: ${gaps.join(', ')}`);
  const errors = logs.filter((l) => l.level === 'error');
  assert.equal(errors.length, 1, 'one error line for five consecutive failures');
  assert.equal(errors[0]!.obj.consecutiveFailures, 1);
  const recovered = logs.find((l) => l.msg === 'worker task recovered');
  assert.equal(recovered?.obj.failuresBefore, 5);
});
