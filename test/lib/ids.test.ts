import assert from 'node:assert/strict';
import { test } from 'node:test';
import { newId } from '../../src/lib/ids.js';

const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';
const decode = (s: string) => [...s].reduce((n, ch) => n * 32n + BigInt(ALPHABET.indexOf(ch)), 0n);

test('ids made in a tight loop are unpredictable: fresh random bits each, even within one millisecond', () => {
  const ids = Array.from({ length: 20_000 }, () => newId('conv'));
  assert.equal(new Set(ids).size, ids.length, 'no duplicates');
  for (const id of ids) assert.match(id, /^conv_[0-9a-hjkmnp-tv-z]{26}$/);
  const byMs = new Map<string, bigint[]>();
  for (const id of ids) {
    const time = id.slice(5, 15);
    byMs.set(time, [...(byMs.get(time) ?? []), decode(id.slice(15))]);
  }
  assert.ok([...byMs.values()].some((g) => g.length > 10), 'the loop made many ids in one millisecond');
  // Sorted within each millisecond, neighbours are about 2^80 / n apart; a counter would make them 1 apart.
  let closest = 2n ** 80n;
  for (const group of byMs.values()) {
    group.sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    for (let i = 1; i < group.length; i++) if (group[i]! - group[i - 1]! < closest) closest = group[i]! - group[i - 1]!;
  }
  assert.ok(closest > 2n ** 40n, `two ids of one millisecond have random parts only ${closest} apart`);
  // And the id made right after another is not the next value in any prefix's sequence.
  for (let i = 1; i < ids.length; i++) {
    const [a, b] = [decode(ids[i - 1]!.slice(15)), decode(ids[i]!.slice(15))];
    const delta = a > b ? a - b : b - a;
    assert.ok(delta > 1000n || ids[i - 1]!.slice(5, 15) !== ids[i]!.slice(5, 15), `${ids[i - 1]} then ${ids[i]}`);
  }
});

test('the random bits are spread over the whole 80-bit range', () => {
  const ids = Array.from({ length: 2_000 }, () => newId('msg', 0));
  // Each of the 16 random characters takes many values (a monotonic counter would only move the last ones).
  // 'msg_' + 10 time characters, then 16 random ones.
  for (let pos = 14; pos < 30; pos++) {
    const seen = new Set(ids.map((id) => id[pos]));
    assert.ok(seen.size >= 28, `character ${pos} takes ${seen.size} values`);
  }
});

test('ids sort by their creation millisecond', () => {
  const a = newId('doc', 1_000);
  const b = newId('doc', 1_001);
  assert.ok(a < b);
  assert.equal(newId('doc', Date.UTC(2026, 0, 1)).slice(4, 14), newId('faq', Date.UTC(2026, 0, 1)).slice(4, 14));
});

test('event and delivery ids of one millisecond count up from a fresh random start, so they sort as they were made', () => {
  for (const prefix of ['evt', 'dlv'] as const) {
    const ids = Array.from({ length: 1_000 }, () => newId(prefix, 5_000));
    for (let i = 1; i < ids.length; i++) assert.equal(decode(ids[i]!.slice(14)) - decode(ids[i - 1]!.slice(14)), 1n, `${ids[i - 1]} then ${ids[i]}`);
    // Each millisecond starts anew at random: the next one's first id is not the previous run + 1.
    const starts = Array.from({ length: 50 }, (_, i) => decode(newId(prefix, 6_000 + i).slice(14)));
    assert.ok(new Set(starts.map((s) => s >> 60n)).size > 10, 'the starts are spread over the range');
    // Another prefix's ids stay random within a millisecond.
    const convs = Array.from({ length: 100 }, () => decode(newId('conv', 5_000).slice(15)));
    assert.ok(convs.some((c, i) => i > 0 && c < convs[i - 1]!), 'conversation ids are not a sequence');
  }
});
