import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { ConfigError, loadConfig, MAX_RUNDOWN_BACKFILL } from '../../../src/config.js';
import { windowsToSchedule } from '../../../src/modules/rundowns/rundowns.service.js';
import { DAY, HOUR, T0 } from './helpers.js';

describe('RUNDOWN_BACKFILL', () => {
  test('a week of daily windows by default; 0 and the maximum are taken', () => {
    assert.equal(loadConfig({}).rundownBackfill, 7);
    assert.equal(loadConfig({ RUNDOWN_BACKFILL: '' }).rundownBackfill, 7, 'empty is unset, as for every variable');
    assert.equal(loadConfig({ RUNDOWN_BACKFILL: '0' }).rundownBackfill, 0);
    assert.equal(MAX_RUNDOWN_BACKFILL, 1000);
    assert.equal(loadConfig({ RUNDOWN_BACKFILL: '1000' }).rundownBackfill, 1000);
  });

  test('anything but a whole number from 0 to 1000 is refused, naming the variable', () => {
    for (const bad of ['1001', '-1', '7d', '2.5', ' 7', '0x10', 'week', '1e3']) {
      assert.throws(
        () => loadConfig({ RUNDOWN_BACKFILL: bad }),
        (err: unknown) => err instanceof ConfigError && err.message.includes(`RUNDOWN_BACKFILL=${JSON.stringify(bad)}: must be an integer from 0 to 1000`),
        bad,
      );
    }
  });

  test('the windows a run looks at: that many before the last complete one, oldest first', () => {
    const now = T0 + 5 * DAY + HOUR;
    assert.deepEqual(windowsToSchedule(now, DAY, 0), [{ from: T0 + 4 * DAY, to: T0 + 5 * DAY, last: true }]);
    assert.deepEqual(
      windowsToSchedule(now, DAY, 2),
      [2, 3, 4].map((d) => ({ from: T0 + d * DAY, to: T0 + (d + 1) * DAY, last: d === 4 })),
    );
    // Exactly at a window's end, that window is complete.
    assert.deepEqual(windowsToSchedule(T0 + HOUR, HOUR, 1), [{ from: T0 - HOUR, to: T0, last: false }, { from: T0, to: T0 + HOUR, last: true }]);
  });
});
