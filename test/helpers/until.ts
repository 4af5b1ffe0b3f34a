import assert from 'node:assert/strict';

/**
 * Polls `fn` every 10 ms until it answers something truthy, and answers that; fails naming `what` after
 * `timeoutMs`. For pages driven in jsdom, which render after their fetches resolve: waiting for what should appear
 * instead of sleeping a fixed time.
 */
export async function until<T>(fn: () => T | null | undefined | false, what: string, timeoutMs = 8_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = fn();
    if (v) return v;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
