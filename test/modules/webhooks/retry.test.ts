import { test } from 'node:test';
import assert from 'node:assert/strict';
import {
  DEFAULT_RETRY_DELAYS_MS,
  initialDelay,
  isExhausted,
  maxAttempts,
  nextAttemptAt,
  nextAttemptDelay,
  parseRetryDelays,
} from '../../../src/modules/webhooks/retry.js';
import { parseDuration } from '../../../src/lib/duration.js';
import { loadConfig } from '../../../src/config.js';

test('parseRetryDelays: the default schedule', () => {
  const d = parseRetryDelays('0,5m,30m,2h,24h');
  assert.deepEqual(d, [0, 300_000, 1_800_000, 7_200_000, 86_400_000]);
  assert.deepEqual(parseRetryDelays(), d);
  assert.deepEqual([...DEFAULT_RETRY_DELAYS_MS], d);
  assert.equal(maxAttempts(d), 5);
  assert.equal(initialDelay(d), 0);
});

test('parseRetryDelays: units and whitespace', () => {
  assert.deepEqual(parseRetryDelays(' 0 , 250ms, 1s,1.5m , 1h '), [0, 250, 1000, 90_000, 3_600_000]);
  assert.deepEqual(parseRetryDelays('100'), [100]); // a bare number is milliseconds
  assert.deepEqual(parseRetryDelays('2S,3M'), [2000, 180_000]);
});

test('parseRetryDelays: errors name the bad entry', () => {
  assert.throws(() => parseRetryDelays('0,5x,30m'), /entry 2 "5x"/);
  assert.throws(() => parseRetryDelays('0,,30m'), /entry 2 is empty/);
  assert.throws(() => parseRetryDelays('-5m'), /entry 1 "-5m"/);
  assert.throws(() => parseRetryDelays('1w'), /entry 1 "1w"/);
  assert.throws(() => parseRetryDelays(''), /at least one/);
});

test('parseDuration (WEBHOOK_TIMEOUT)', () => {
  assert.equal(parseDuration('30s'), 30_000);
  assert.equal(parseDuration('1500ms'), 1500);
  assert.equal(parseDuration('thirty'), null);
  assert.equal(parseDuration('2H'), 7_200_000);
  assert.equal(parseDuration('30d'), 30 * 86_400_000);
});

test('config reads WEBHOOK_RETRY_DELAYS with the same parser and names the bad entry', () => {
  assert.deepEqual(loadConfig({ WEBHOOK_RETRY_DELAYS: '0,50ms,1s,2m,3h' }).webhookRetryDelaysMs, [0, 50, 1000, 120_000, 10_800_000]);
  // five attempts, as the spec's schedule: the fifth failure disables the webhook
  assert.throws(() => loadConfig({ WEBHOOK_RETRY_DELAYS: '0,1s,2s' }), /WEBHOOK_RETRY_DELAYS: must list 5 delays.*got 3/);
  assert.throws(() => loadConfig({ WEBHOOK_RETRY_DELAYS: '0,1s,2s,3s,4s,5s' }), /got 6/);
  assert.throws(() => loadConfig({ WEBHOOK_RETRY_DELAYS: '0,5x' }), /entry 2 "5x"/);
});

test('nextAttemptDelay: attempt n+1 is scheduled delays[n] after attempt n failed; none after the 5th', () => {
  const d = parseRetryDelays('0,5m,30m,2h,24h');
  assert.equal(nextAttemptDelay(d, 0), 0); // attempt 1: immediately
  assert.equal(nextAttemptDelay(d, 1), 5 * 60_000); // attempt 2
  assert.equal(nextAttemptDelay(d, 2), 30 * 60_000);
  assert.equal(nextAttemptDelay(d, 3), 2 * 3_600_000);
  assert.equal(nextAttemptDelay(d, 4), 24 * 3_600_000); // attempt 5
  assert.equal(nextAttemptDelay(d, 5), null); // 5 failures → failed
  assert.equal(isExhausted(d, 4), false);
  assert.equal(isExhausted(d, 5), true);
  assert.throws(() => nextAttemptDelay(d, -1));
  const from = new Date('2024-01-01T00:00:00.000Z');
  assert.equal(nextAttemptAt(d, 1, from)?.toISOString(), '2024-01-01T00:05:00.000Z');
  assert.equal(nextAttemptAt(d, 5, from), null);
});
