import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SyncedClock, type ReferenceClock } from '../../src/lib/clock.js';
import { until } from '../helpers/until.js';

/**
 * A simulated pair of machines: this process's clock (`local`, moved by hand) and a reference `skew` ms ahead of it.
 * Each reading takes `up` ms to reach the reference and `down` ms to come back, from the script of the current sync.
 */
function simulated(start = 1_000_000) {
  const sim = {
    local: start,
    skew: 0,
    /** [up, down] of each reading of the next sync. */
    script: [] as Array<[number, number]>,
    sessions: 0,
    readings: 0,
    fail: false,
  };
  const reference: ReferenceClock = {
    async session(fn) {
      sim.sessions++;
      if (sim.fail) throw new Error('connection refused');
      let i = 0;
      return fn(async () => {
        const [up, down] = sim.script[i++ % sim.script.length]!;
        sim.readings++;
        sim.local += up;
        // The reference's time, with µs as PostgreSQL gives them.
        const at = sim.local + sim.skew + 0.25;
        sim.local += down;
        return at;
      });
    },
  };
  return { sim, reference, local: () => sim.local };
}

test('the offset is the reference time at the round trip’s midpoint, from the reading with the shortest round trip', async () => {
  const { sim, reference, local } = simulated();
  sim.skew = 90_000;
  // Round trips 50, 2, 30, 25, 50. The 25 ms one is symmetric (exact offset) but the 2 ms one bounds the error best
  // (±1 ms) and wins; the slow asymmetric ones would be off by 15 ms or more.
  sim.script = [[40, 10], [2, 0], [30, 0], [5, 20], [25, 25]];
  const clock = new SyncedClock({ reference, local, samples: 5 });
  const s = await clock.sync();
  assert.equal(sim.sessions, 1, 'one session per sync');
  assert.equal(sim.readings, 5);
  assert.equal(s.roundTripMs, 2);
  // 90 000 + (up − down) / 2 + 0.25, rounded to whole ms.
  assert.equal(s.offsetMs, 90_001);
  assert.equal(clock.now(), sim.local + 90_001);
  assert.ok(Number.isInteger(clock.now()));

  // A skew the other way (this machine ahead), symmetric delays: exact.
  const other = simulated();
  other.sim.skew = -61_234;
  other.sim.script = [[7, 7], [3, 3], [9, 1]];
  const behind = new SyncedClock({ reference: other.reference, local: other.local, samples: 3 });
  assert.deepEqual(await behind.sync(), { offsetMs: -61_234, roundTripMs: 6 });
  assert.equal(behind.now(), other.sim.local - 61_234);
});

test('now() never steps back: a re-sync that lowers the offset holds it until the corrected time catches up', async () => {
  const { sim, reference, local } = simulated();
  sim.script = [[1, 1]];
  sim.skew = 10_000;
  const clock = new SyncedClock({ reference, local, samples: 1 });
  await clock.sync();
  sim.local += 100;
  const before = clock.now();
  assert.equal(before, sim.local + 10_000);
  // The reference is now 3 s less ahead (this machine's clock was stepped forward, say).
  sim.skew = 7_000;
  await clock.sync();
  assert.equal(clock.now(), before, 'held, not stepped back');
  sim.local += 2_000;
  assert.equal(clock.now(), before);
  sim.local += 1_500;
  // 3 s after the re-sync's offset would have taken it back, it moves again, at the corrected time.
  assert.equal(clock.now(), sim.local + 7_000);
  assert.ok(clock.now() > before);
  // A raised offset applies at once (forward is always allowed).
  sim.skew = 20_000;
  await clock.sync();
  assert.equal(clock.now(), sim.local + 20_000);
});

test('now() is whole ms, never decreasing, and equal to local + offset whenever that is not behind, whatever the syncs and steps', async () => {
  const step = fc.oneof(
    fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: -5_000, max: 5_000 }) }),
    fc.record({ kind: fc.constant('sync' as const), skew: fc.integer({ min: -200_000, max: 200_000 }), up: fc.integer({ min: 0, max: 50 }), down: fc.integer({ min: 0, max: 50 }) }),
  );
  await fc.assert(
    fc.asyncProperty(fc.array(step, { maxLength: 40 }), async (steps) => {
      const { sim, reference, local } = simulated();
      const clock = new SyncedClock({ reference, local, samples: 1 });
      let previous = -Infinity;
      let offset = 0;
      for (const s of steps) {
        if (s.kind === 'advance') sim.local += s.ms;
        else {
          sim.skew = s.skew;
          sim.script = [[s.up, s.down]];
          offset = (await clock.sync()).offsetMs;
        }
        const t = clock.now();
        assert.ok(Number.isInteger(t));
        assert.ok(t >= previous, `stepped back from ${previous} to ${t}`);
        assert.equal(t, Math.max(previous, sim.local + offset));
        previous = t;
      }
    }),
    { numRuns: 300 },
  );
});

test('start syncs at once, then every interval; a failed re-sync keeps the last offset and is reported; stop ends it', async () => {
  const { sim, reference, local } = simulated();
  sim.script = [[1, 1]];
  sim.skew = 5_000;
  const syncs: number[] = [];
  const errors: unknown[] = [];
  const clock = new SyncedClock({ reference, local, samples: 2, intervalMs: 5, onSync: (s) => syncs.push(s.offsetMs), onError: (e) => errors.push(e) });
  try {
    assert.deepEqual(await clock.start(), { offsetMs: 5_000, roundTripMs: 2 });
    sim.skew = 6_000;
    await until(() => syncs.includes(6_000), 'a periodic re-sync');
    sim.fail = true;
    await until(() => errors.length >= 2, 'failed re-syncs reported');
    assert.match(String(errors[0]), /connection refused/);
    assert.equal(clock.now(), sim.local + 6_000, 'the last offset stays in use');
    sim.fail = false;
    sim.skew = 7_000;
    await until(() => syncs.includes(7_000), 're-syncs resume after failures');
  } finally {
    clock.stop();
  }
  const sessions = sim.sessions;
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(sim.sessions, sessions, 'no sync after stop');
});

test('a first sync that fails fails start (the caller must not run on its own clock), and leaves no timer behind', async () => {
  const { sim, reference, local } = simulated();
  sim.fail = true;
  const clock = new SyncedClock({ reference, local, intervalMs: 5 });
  await assert.rejects(clock.start(), /connection refused/);
  sim.fail = false;
  await new Promise((r) => setTimeout(r, 30));
  assert.equal(sim.sessions, 1);
});
