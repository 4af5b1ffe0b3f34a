import assert from 'node:assert/strict';
import { Webhook } from 'standardwebhooks';
import { verify as octokitVerify } from '@octokit/webhooks-methods';
import type { TestApp } from '../../helpers/app.js';
import { writeTransaction } from '../../../src/db/unit-of-work.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { createWorker } from '../../../src/worker/worker.js';
import type { Received } from './helpers.js';

export const quietLog = { info() {}, warn(obj: unknown) { console.error(obj); }, error(obj: unknown) { console.error(obj); } };

/** Runs the app's own worker tasks in this process (what `parley serve` does). */
export function startWorker(t: TestApp) {
  const w = createWorker(workerTasks(t.ctx), quietLog);
  w.start();
  return w;
}

export async function waitFor<T>(fn: () => T | Promise<T>, what: string, timeoutMs = 10_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v as NonNullable<T>;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Emits as the API's services do: in a write transaction (whose commit announces new deliveries on PostgreSQL). */
export async function emit(t: TestApp, accountId: string, kind: any, data: Record<string, unknown>) {
  return writeTransaction(t.ctx.db, (trx) => t.ctx.events.emit(trx, accountId, kind, data));
}

/** Both receiver-side libraries accept what a real receiver got. */
export async function assertVerifies(r: Received, secret: string) {
  const body = r.body.toString('utf8');
  const sig = r.headers['x-service-signature'] as string;
  assert.match(sig, /^sha256=[0-9a-f]{64}$/);
  assert.equal(await octokitVerify(secret, body, sig), true, 'octokit verify');
  assert.equal(await octokitVerify(`${secret}x`, body, sig), false);
  const wh = new Webhook(Buffer.from(secret, 'utf8').toString('base64'));
  const headers = {
    'webhook-id': r.headers['webhook-id'] as string,
    'webhook-timestamp': r.headers['webhook-timestamp'] as string,
    'webhook-signature': r.headers['webhook-signature'] as string,
  };
  assert.deepEqual(wh.verify(body, headers), JSON.parse(body));
  assert.throws(() => wh.verify(`${body} `, headers));
  assert.equal(r.headers['content-type'], 'application/json');
  assert.equal(r.headers['webhook-id'], r.headers['x-service-delivery-id']);
}
