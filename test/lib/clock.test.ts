import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { toIso } from '../../src/lib/clock.js';

const reference = (ms: number) => new Date(ms).toISOString();

test('toIso answers exactly what Date#toISOString answers, over the whole fast range and beyond', () => {
  fc.assert(
    fc.property(fc.integer({ min: -8.64e15, max: 8.64e15 }), (ms) => {
      assert.equal(toIso(ms), reference(ms));
    }),
    { numRuns: 20_000 },
  );
  // Consecutive calls on the same and on alternating days (the day-prefix reuse must never leak across days).
  fc.assert(
    fc.property(fc.array(fc.integer({ min: 0, max: 253_402_300_799_999 }), { minLength: 2, maxLength: 30 }), (xs) => {
      for (const ms of xs) assert.equal(toIso(ms), reference(ms));
    }),
  );
});

test('toIso at the edges: epoch, leap days, century rules, end of 9999, fractions and invalid times', () => {
  const cases = [
    0, 1, 999, 86_399_999, 86_400_000, Date.UTC(2000, 1, 29, 23, 59, 59, 999), Date.UTC(1900 + 200, 1, 28), Date.UTC(2100, 2, 1),
    Date.UTC(2024, 1, 29, 12), Date.UTC(2026, 11, 31, 23, 59, 59, 999), 253_402_300_799_999, 253_402_300_800_000, -1, 1.5,
  ];
  for (const ms of cases) assert.equal(toIso(ms), reference(ms), String(ms));
  assert.throws(() => toIso(NaN), RangeError);
  assert.throws(() => toIso(8.64e15 + 1), RangeError);
});
