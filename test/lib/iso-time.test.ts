import assert from 'node:assert/strict';
import { test } from 'node:test';
import { parseIsoInstant } from '../../src/lib/iso-time.js';

const T = Date.UTC(2026, 2, 1);

test('accepted forms name the intended instant', () => {
  const cases: [string, number][] = [
    ['2026-03-01', T],
    ['2026-03-01T00:00:00Z', T],
    ['2026-03-01T00:00Z', T],
    ['2026-03-01T00:00:00', T], // no zone: UTC, never server-local time
    ['2026-03-01t00:00:00z', T],
    ['2026-03-01T00:00:00.000Z', T],
    ['2026-03-01T00:00:00.123Z', T + 123],
    ['2026-03-01T00:00:00,5Z', T + 500],
    ['2026-03-01T01:00:00+01:00', T],
    ['2026-03-01T01:00:00+0100', T],
    ['2026-03-01T01:00:00 01:00', T], // "+" decoded to a space by the query-string parser
    ['2026-02-28T19:00:00-05:00', T],
    ['2024-02-29', Date.UTC(2024, 1, 29)],
    ['0001-01-01T00:00:00Z', -62135596800000],
  ];
  for (const [text, ms] of cases) assert.equal(parseIsoInstant(text), ms, text);
});

test('finer than a millisecond rounds up, so half-open comparisons on whole ms stay exact', () => {
  assert.equal(parseIsoInstant('2026-03-01T00:00:00.0000001Z'), T + 1);
  assert.equal(parseIsoInstant('2026-03-01T00:00:00.123000000Z'), T + 123);
  assert.equal(parseIsoInstant('2026-03-01T00:00:00.123000001Z'), T + 124);
});

test('everything else is refused', () => {
  for (const text of [
    '',
    'yesterday',
    'March 1, 2026',
    '1772323200000',
    '2026-3-1',
    '2026-02-29',
    '2026-02-30',
    '2026-04-31',
    '2026-13-01',
    '2026-00-10',
    '2026-03-00',
    '2026-03-01T24:00:00Z',
    '2026-03-01T10:60:00Z',
    '2026-03-01T10:00:60Z',
    '2026-03-01Z',
    '2026-03-01T10:00:00+25:00',
    '2026-03-01T10:00:00.Z',
    '2026-03-01T10:00:00.1234567890Z',
    ' 2026-03-01',
    '2026-03-01T10',
  ]) {
    assert.equal(parseIsoInstant(text), null, JSON.stringify(text));
  }
});

test('leap days follow the proleptic Gregorian calendar in years 0000-0099 too (Date.UTC maps those onto 19xx)', () => {
  const leapDay = (y: number) => {
    const d = new Date(0);
    d.setUTCFullYear(y, 1, 29);
    return d.getTime();
  };
  for (const y of [0, 4, 96, 400, 2000, 2024]) {
    const text = `${String(y).padStart(4, '0')}-02-29`;
    assert.equal(parseIsoInstant(text), leapDay(y), text);
  }
  assert.equal(parseIsoInstant('0000-02-29T12:00:00Z'), leapDay(0) + 12 * 3_600_000);
  for (const text of ['0001-02-29', '0100-02-29', '0099-02-29', '1900-02-29', '2100-02-29', '0000-02-30']) {
    assert.equal(parseIsoInstant(text), null, text);
  }
});
