import { randomBytes } from 'node:crypto';

// Crockford base32: ids sort lexicographically in creation order (ULID layout: 48-bit ms time + 80 bits).
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

let lastTime = -1;
let lastRandom: number[] = [];

function encodeTime(t: number): string {
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32]! + out;
    t = Math.floor(t / 32);
  }
  return out;
}

/** Monotonic within a millisecond, so two ids made in the same ms still sort in creation order. */
function nextRandom(t: number): number[] {
  if (t === lastTime) {
    for (let i = lastRandom.length - 1; i >= 0; i--) {
      if (lastRandom[i]! < 31) {
        lastRandom[i]!++;
        return lastRandom;
      }
      lastRandom[i] = 0;
    }
  }
  lastTime = t;
  const bytes = randomBytes(16);
  lastRandom = Array.from(bytes, (b) => b % 32);
  lastRandom[0] = lastRandom[0]! % 16; // headroom so the increment above practically never wraps
  return lastRandom;
}

export type IdPrefix = 'acct' | 'key' | 'doc' | 'faq' | 'conv' | 'msg' | 'wh' | 'evt' | 'dlv' | 'wf' | 'rd';

export function newId(prefix: IdPrefix, now = Date.now()): string {
  const t = Math.max(now, lastTime);
  return `${prefix}_${encodeTime(t)}${nextRandom(t).map((n) => ALPHABET[n]).join('')}`;
}
