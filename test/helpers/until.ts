import assert from 'node:assert/strict';

/**
 * Polls `fn` (which may answer a promise) every `everyMs` until it answers something truthy, and answers that; fails
 * naming `what` after `timeoutMs`. Waiting for what should happen instead of sleeping a fixed time: pages driven in
 * jsdom, which render after their fetches resolve; child processes and the rows they write.
 */
export async function until<T>(fn: () => T | null | undefined | false | Promise<T | null | undefined | false>, what: string, timeoutMs = 8_000, everyMs = 10): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}
