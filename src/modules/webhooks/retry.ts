/**
 * Retry schedule for webhook deliveries.
 *
 * `WEBHOOK_RETRY_DELAYS` lists the delay before each attempt: entry i (0-based) is the delay before
 * attempt i+1, counted from the moment the event occurred (attempt 1) or attempt i failed (later ones).
 * The number of entries is the number of attempts; after the last one fails the delivery is `failed`.
 */

import { parseDurationList } from '../../lib/duration.js';

export const DEFAULT_RETRY_DELAYS = '0,5m,30m,2h,24h';

/** `"0,5m,30m,2h,24h"` → `[0, 300000, 1800000, 7200000, 86400000]`. Throws naming the bad entry. */
export function parseRetryDelays(input: string = DEFAULT_RETRY_DELAYS): number[] {
  return parseDurationList(input, 'WEBHOOK_RETRY_DELAYS');
}

export const DEFAULT_RETRY_DELAYS_MS: readonly number[] = Object.freeze(parseRetryDelays(DEFAULT_RETRY_DELAYS));

/** Total number of attempts a delivery gets. */
export function maxAttempts(delays: readonly number[]): number {
  return delays.length;
}

/** Delay before the first attempt (from the moment the delivery is created). */
export function initialDelay(delays: readonly number[]): number {
  return delays[0] ?? 0;
}

/**
 * Delay before the next attempt, given how many attempts have been made (and failed) so far;
 * `null` when none is left, i.e. the delivery is now `failed`.
 *   nextAttemptDelay([0, 5m, …], 0) → 0     (attempt 1)
 *   nextAttemptDelay([0, 5m, …], 1) → 5m    (attempt 2, 5 minutes after attempt 1 failed)
 *   nextAttemptDelay(5 entries, 5)  → null  (give up)
 */
export function nextAttemptDelay(delays: readonly number[], attemptsMade: number): number | null {
  if (!Number.isInteger(attemptsMade) || attemptsMade < 0) throw new Error('attemptsMade must be a non-negative integer');
  return attemptsMade < delays.length ? delays[attemptsMade]! : null;
}

/** When the next attempt is due (`from` + delay), or `null` when the delivery has exhausted its attempts. */
export function nextAttemptAt(delays: readonly number[], attemptsMade: number, from: Date = new Date()): Date | null {
  const d = nextAttemptDelay(delays, attemptsMade);
  return d === null ? null : new Date(from.getTime() + d);
}

/** True when a delivery that has made `attemptsMade` failed attempts must be marked `failed`. */
export function isExhausted(delays: readonly number[], attemptsMade: number): boolean {
  return attemptsMade >= delays.length;
}
