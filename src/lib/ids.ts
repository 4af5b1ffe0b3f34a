import { randomFillSync } from 'node:crypto';

// Crockford base32, ULID layout: 48-bit ms time + 80 random bits. Ids sort by their creation millisecond.
const ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

function encodeTime(t: number): string {
  let out = '';
  for (let i = 0; i < 10; i++) {
    out = ALPHABET[t % 32]! + out;
    t = Math.floor(t / 32);
  }
  return out;
}

/** Random bytes drawn from the CSPRNG in blocks (one syscall per 409 ids); every byte is used once. */
const POOL = Buffer.alloc(4096);
let poolOffset = POOL.length;

/** 80 fresh random bits from the CSPRNG, as two 40-bit halves. */
function randomHalves(): [hi: number, lo: number] {
  if (poolOffset + 10 > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  const o = poolOffset;
  poolOffset += 10;
  return [POOL[o]! * 2 ** 32 + POOL.readUInt32BE(o + 1), POOL[o + 5]! * 2 ** 32 + POOL.readUInt32BE(o + 6)];
}

/** Two 40-bit halves as 16 base32 characters, 8 each. */
function encodeHalves(halves: readonly [number, number]): string {
  let out = '';
  for (let half of halves) {
    let chunk = '';
    for (let i = 0; i < 8; i++) {
      chunk = ALPHABET[half % 32]! + chunk;
      half = Math.floor(half / 32);
    }
    out += chunk;
  }
  return out;
}

/**
 * Every id gets fresh random bits: unlike a monotonic ULID (previous + 1 within a millisecond), knowing one id tells
 * nothing about the next, which matters because a conversation id is the capability a public (`pk_`) key reaches it
 * with. Such ids are therefore ordered by millisecond only; whatever needs a finer order has its own column
 * (messages.seq).
 */
const randomPart = () => encodeHalves(randomHalves());

/**
 * Prefixes whose ids are monotonic within a process and a millisecond (the previous id's random part + 1, a fresh
 * random start at each new millisecond). Events and deliveries are no capability (only their account's server keys
 * read them), and their lists order by (created_at, id): events emitted together (a conversation's start and its
 * greeting, a message and its reply) share a millisecond, and with random ids the feed and a webhook's delivery list
 * showed them in any order. Made by one process, they now sort as they were made; made by two in one millisecond,
 * each process's run stays in order.
 */
const SEQUENTIAL = new Map<IdPrefix, { at: number; halves: [number, number] }>([
  ['evt', { at: -1, halves: [0, 0] }],
  ['dlv', { at: -1, halves: [0, 0] }],
]);

function nextInSequence(state: { at: number; halves: [number, number] }, now: number): string {
  if (now !== state.at) {
    state.at = now;
    state.halves = randomHalves();
  } else if (state.halves[1] < 2 ** 40 - 1) {
    state.halves[1] += 1;
  } else if (state.halves[0] < 2 ** 40 - 1) {
    state.halves = [state.halves[0] + 1, 0];
  } else {
    // 2^80 ids in one millisecond is out of reach; a fresh start keeps ids unique, if not in order, should it happen.
    state.halves = randomHalves();
  }
  return encodeHalves(state.halves);
}

export type IdPrefix = 'acct' | 'key' | 'doc' | 'faq' | 'conv' | 'msg' | 'wh' | 'evt' | 'dlv' | 'wf' | 'rd';

/**
 * The smallest id of `prefix` made at `t`: every id made earlier sorts below it (ids made at `t` itself sort above),
 * so "made before t" is a range of the primary key.
 */
export function idFloor(prefix: IdPrefix, t: number): string {
  return `${prefix}_${encodeTime(t)}`;
}

export function newId(prefix: IdPrefix, now = Date.now()): string {
  const sequence = SEQUENTIAL.get(prefix);
  return `${prefix}_${encodeTime(now)}${sequence ? nextInSequence(sequence, now) : randomPart()}`;
}
