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

/**
 * 80 fresh random bits as 16 base32 characters. Every id gets its own: unlike a monotonic ULID (previous + 1
 * within a millisecond), knowing one id tells nothing about the next, which matters because a conversation id
 * is the capability a public (`pk_`) key reaches it with. Ids are therefore ordered by millisecond only;
 * whatever needs a finer order has its own column (messages.seq).
 */
function randomPart(): string {
  if (poolOffset + 10 > POOL.length) {
    randomFillSync(POOL);
    poolOffset = 0;
  }
  const b = POOL;
  const o = poolOffset;
  poolOffset += 10;
  let out = '';
  // 10 bytes = 80 bits = two 40-bit halves, each 8 base32 characters.
  for (const start of [o, o + 5]) {
    let hi = b[start]! * 2 ** 32 + b.readUInt32BE(start + 1);
    let chunk = '';
    for (let i = 0; i < 8; i++) {
      chunk = ALPHABET[hi % 32]! + chunk;
      hi = Math.floor(hi / 32);
    }
    out += chunk;
  }
  return out;
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
  return `${prefix}_${encodeTime(now)}${randomPart()}`;
}
