import type { FastifyReply } from 'fastify';

/**
 * Serialised answers of an account's reads, each kept with the version of the account's data it was made from,
 * and given again only to a request that reads the same version. What makes this safe with other processes or
 * API nodes writing the same database (there is no message to any of them):
 *
 * - the version must grow with every committed change to what the answer shows, in the same transaction as the
 *   change, and never go back (the knowledge version: accountsRepository.bumpKnowledgeVersion, in every document
 *   and FAQ write; a backup is restored with the service stopped, README);
 * - the caller reads the version from the database on every request, BEFORE the data an answer is made from.
 *
 * Then an answer kept under version V was made from data read after V was, so it shows every change counted in V
 * (and perhaps later ones, committed before it was read). A write acknowledged to anyone before a request reads
 * the version is counted in the version that request reads, so the answer it is given shows that write.
 *
 * The size is bounded (the oldest answers not given lately go first); answers of older versions are never given again
 * and are replaced or pushed out in time.
 */
export interface VersionedAnswers {
  /** The answer kept for `key` of this account at exactly this version, if any. */
  get(accountId: string, version: number, key: string): string | undefined;
  /** Keeps `body` as the answer for `key` at `version`, read before the data it shows (see above). */
  set(accountId: string, version: number, key: string, body: string): void;
}

interface Kept {
  version: number;
  body: string;
  /** Given since it was kept or last passed over for eviction (a second chance: cheaper on a hit than re-inserting). */
  used: boolean;
}

/** `maxChars`: the total length of the kept answers; one longer than a sixteenth of it is not kept. */
export function createVersionedAnswers(maxChars = 8 * 1024 * 1024): VersionedAnswers {
  // Map iterates in insertion order: the oldest first.
  const kept = new Map<string, Kept>();
  let chars = 0;
  const maxEntry = maxChars / 16;
  return {
    get(accountId, version, key) {
      const e = kept.get(`${accountId}\0${key}`);
      if (e === undefined || e.version !== version) return undefined;
      e.used = true;
      return e.body;
    },
    set(accountId, version, key, body) {
      if (body.length > maxEntry) return;
      const k = `${accountId}\0${key}`;
      const e = kept.get(k);
      if (e !== undefined) {
        // Another request made it from a newer version meanwhile: that one serves more requests from now on.
        if (e.version > version) return;
        kept.delete(k);
        chars -= e.body.length;
      }
      // Room is made before the new answer goes in: in the map while the others were passed over, it came before
      // those sent to the back and, never given yet, was the one evicted whenever all the others had been given.
      // Oldest first; one given since it was last passed over goes to the back once. Ends: each pass clears the
      // marks, and the new answer alone fits.
      for (const [oldest, o] of kept) {
        if (chars + body.length <= maxChars) break;
        kept.delete(oldest);
        if (o.used) {
          o.used = false;
          kept.set(oldest, o);
        } else {
          chars -= o.body.length;
        }
      }
      kept.set(k, { version, body, used: false });
      chars += body.length;
    },
  };
}

/** What Fastify sends a serialised answer as. */
export const JSON_TYPE = 'application/json; charset=utf-8';

/**
 * A route plugin's kept reads: `send(accountId, key, reply, read)` answers 200 with the answer kept for `key` if
 * the account's version (from `versionOf`, read from the database first, before `read` runs) is still the one it
 * was made at, else with `read()` serialised by the route's own serializer (the same bytes Fastify would send),
 * kept. Each app (process, node) keeps its own.
 *
 * When `versionOf` answers a number (SQLite, read at once) and an answer is kept, it is sent there and then, and the
 * reply itself is answered: a route handler returns it without being `async`, and Fastify goes on with no promise,
 * where an async handler's chain of them (handler, this, the version read) had each cost a trip through the microtask
 * queue on every kept read.
 */
export function keptReads(versionOf: (accountId: string) => number | Promise<number>, answers: VersionedAnswers = createVersionedAnswers()) {
  async function make(accountId: string, version: number, key: string, reply: FastifyReply, read: () => Promise<unknown>) {
    // fast-json-stringify answers a string (the type allows the Buffer a custom serializer could give).
    const body = reply.serialize({ success: true, data: await read() }) as string;
    answers.set(accountId, version, key, body);
    return reply.type(JSON_TYPE).send(body);
  }
  const answer = (accountId: string, version: number, key: string, reply: FastifyReply, read: () => Promise<unknown>) => {
    const body = answers.get(accountId, version, key);
    // A JSON content type and a string: Fastify sends it as it is, with the headers it would have sent.
    return body === undefined ? make(accountId, version, key, reply, read) : reply.type(JSON_TYPE).send(body);
  };
  return function send(accountId: string, key: string, reply: FastifyReply, read: () => Promise<unknown>): FastifyReply | Promise<FastifyReply> {
    const version = versionOf(accountId);
    if (typeof version === 'number') return answer(accountId, version, key, reply, read);
    return version.then((v) => answer(accountId, v, key, reply, read));
  };
}
