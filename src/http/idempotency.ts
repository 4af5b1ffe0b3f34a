import { createHash } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { Kysely, Transaction } from 'kysely';
import type { Config } from '../config.js';
import type { DB } from '../db/schema.js';
import { openUnitOfWork } from '../db/unit-of-work.js';
import type { Clock } from '../lib/clock.js';
import type { Logger } from '../lib/log.js';
import { ApiError, invalidRequest } from './errors.js';
import { hooksOf } from './json.js';
import type { Inflight } from './shutdown.js';

/**
 * `Idempotency-Key` on POST requests, as Stripe does it. The first request with a key runs and its answer is kept
 * for 24 hours; a request with the same key and the same method, path and body gets that answer again (with
 * `Idempotent-Replayed: true`) instead of running twice, so a client that lost an answer to a timeout or a dropped
 * connection can retry a create without creating twice. The same key with a different request is a 400. A retry
 * that arrives while the first request still runs waits for it (up to a second), then gets a 429 to retry later.
 *
 * What is kept: every answer the endpoint gave, 4xx included (the same request would get the same refusal). Not
 * kept: refusals before the endpoint ran (authentication, rate limit, validation: nothing was attempted, so the key
 * stays free) and 5xx answers of requests that wrote nothing (the key is released, so a retry runs again).
 *
 * The key is taken in its own statement before the endpoint runs and the answer is written after it. Between the
 * two, every write transaction the endpoint starts marks the key committed as its last statement
 * (src/db/unit-of-work.ts), so the mark commits exactly when a write does. That settles the cases where the
 * outcome would otherwise be unknown: the process dies between the commit and the answer's write, or the request
 * fails after its commit (a 5xx, or a connection lost during a COMMIT that happened anyway). A retry then gets a 400
 * saying the request was carried out and its answer lost, instead of running it a second time; a key left without
 * a mark once the lease is over is taken over and run again, since nothing was written.
 */

export const IDEMPOTENCY_TTL_MS = 24 * 3_600_000;
const HEADER = 'idempotency-key';
/** Printable ASCII, as Stripe allows: UUIDs, ULIDs, "order-1234-create"… */
const VALID_KEY = /^[\x21-\x7e][\x20-\x7e]{0,254}$/;
/** How long a retry waits for the first request with its key to finish before it is told to come back. */
const WAIT_FOR_FIRST_MS = 1_000;
const POLL_MS = 20;

declare module 'fastify' {
  interface FastifyRequest {
    /** Set while this request holds an Idempotency-Key whose answer it must record. */
    idempotency: Claim | null;
  }
}

export interface Claim {
  accountId: string;
  key: string;
  lockedAt: number;
  /** Ends the request's unit of work (src/db/unit-of-work.ts) once the answer is kept. */
  endUnitOfWork?: () => void;
}

/** The longest a request can legitimately run: a claim older than this was left by a process that died. */
export function idempotencyLeaseMs(config: Pick<Config, 'webhookTimeoutMs' | 'llm'>): number {
  return Math.max(60_000, config.webhookTimeoutMs + 10_000, (config.llm?.timeoutMs ?? 0) + 10_000);
}

export function createIdempotencyRepository(db: Kysely<DB>) {
  const byKey = (accountId: string, key: string) =>
    db.selectFrom('idempotency_keys').selectAll().where('account_id', '=', accountId).where('key', '=', key);
  return {
    /** Takes the key for a request now starting; false when someone holds or held it. */
    async claim(row: { accountId: string; key: string; fingerprint: string; method: string; path: string; now: number }): Promise<boolean> {
      const r = await db
        .insertInto('idempotency_keys')
        .values({
          account_id: row.accountId,
          key: row.key,
          fingerprint: row.fingerprint,
          method: row.method,
          path: row.path,
          status_code: null,
          response: null,
          created_at: row.now,
          locked_at: row.now,
          committed_at: null,
        })
        .onConflict((oc) => oc.columns(['account_id', 'key']).doNothing())
        .executeTakeFirst();
      return Number(r.numInsertedOrUpdatedRows ?? 0) === 1;
    },
    find: (accountId: string, key: string) => byKey(accountId, key).executeTakeFirst(),
    /** Takes over a claim left without an answer, unless another request took it first. */
    async takeOver(accountId: string, key: string, lockedAt: number, now: number): Promise<boolean> {
      const r = await db
        .updateTable('idempotency_keys')
        .set({ locked_at: now })
        .where('account_id', '=', accountId)
        .where('key', '=', key)
        .where('locked_at', '=', lockedAt)
        .where('status_code', 'is', null)
        .where('committed_at', 'is', null)
        .executeTakeFirst();
      return Number(r.numUpdatedRows) === 1;
    },
    /** Inside the request's write transaction: the key's request has written something, as of this commit. */
    async markCommitted(trx: Transaction<DB>, c: Claim, now: number) {
      await trx
        .updateTable('idempotency_keys')
        .set({ committed_at: now })
        .where('account_id', '=', c.accountId)
        .where('key', '=', c.key)
        .where('locked_at', '=', c.lockedAt)
        .where('committed_at', 'is', null)
        .execute();
    },
    async record(c: Claim, statusCode: number, response: string) {
      await db
        .updateTable('idempotency_keys')
        .set({ status_code: statusCode, response })
        .where('account_id', '=', c.accountId)
        .where('key', '=', c.key)
        .where('locked_at', '=', c.lockedAt)
        .execute();
    },
    /** Frees the key (an expired row), if it is still the same claim. */
    async release(accountId: string, key: string, lockedAt: number) {
      await db.deleteFrom('idempotency_keys').where('account_id', '=', accountId).where('key', '=', key).where('locked_at', '=', lockedAt).execute();
    },
    /**
     * After a 5xx: frees the key if the request wrote nothing, so a retry runs it again. If it did commit a write
     * (a failure after it, or a connection lost during COMMIT that committed anyway), the key stays taken with its
     * lease ended, and a retry is told the request was carried out rather than running it twice.
     */
    async abandon(c: Claim) {
      const r = await db
        .deleteFrom('idempotency_keys')
        .where('account_id', '=', c.accountId)
        .where('key', '=', c.key)
        .where('locked_at', '=', c.lockedAt)
        .where('committed_at', 'is', null)
        .executeTakeFirst();
      if (Number(r.numDeletedRows) > 0) return;
      await db.updateTable('idempotency_keys').set({ locked_at: 0 }).where('account_id', '=', c.accountId).where('key', '=', c.key).where('locked_at', '=', c.lockedAt).execute();
    },
    /** Deletes keys older than the TTL; returns how many. */
    async sweep(now: number): Promise<number> {
      const r = await db.deleteFrom('idempotency_keys').where('created_at', '<=', now - IDEMPOTENCY_TTL_MS).executeTakeFirst();
      return Number(r.numDeletedRows);
    },
  };
}

export type IdempotencyRepository = ReturnType<typeof createIdempotencyRepository>;

/**
 * JSON with every object's keys sorted, so `{"a":1,"b":2}` and `{"b":2,"a":1}` give the same text. Recursive:
 * the body parser refuses bodies nesting deeper than MAX_BODY_DEPTH (src/http/json.ts), and this only sees
 * parsed bodies.
 */
export function canonicalJson(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'null';
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  const keys = Object.keys(value).sort();
  return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`).join(',')}}`;
}

/** The hash both fingerprints share: method, path with query, then the body's text. */
const fingerprintOf = (method: string, url: string, bodyText: string) =>
  createHash('sha256').update(`${method} ${url}\n`).update(bodyText).digest('hex');

/**
 * What makes two requests "the same request": method, path with query, and the parsed body, its object keys
 * in sorted order (the order a client serialises them in carries no meaning).
 */
export function requestFingerprint(method: string, url: string, body: unknown): string {
  return fingerprintOf(method, url, canonicalJson(body ?? null));
}

/**
 * The fingerprint before key order was canonicalised (the body's keys as sent). Keys stored by that version
 * live 24 hours; a retry of such a request must still match its own key. Only computed on a mismatch, and
 * removable once no key older than the canonical fingerprint can remain (24 h after the upgrade).
 */
function legacyFingerprint(method: string, url: string, body: unknown): string {
  return fingerprintOf(method, url, JSON.stringify(body ?? null));
}

/**
 * The path kept with a key: the URL with its escapes decoded (but those of / ? # and the like), as the router decodes
 * the ids in it. Erasing a conversation deletes the answers kept for requests to its path; sent to
 * `/v1/chat/conversations/conv%5F…/messages`, a message reached the conversation but its answer did not match.
 */
function keptPath(url: string): string {
  try {
    return decodeURI(url);
  } catch {
    return url; // a malformed escape names no conversation
  }
}

/** How many times a header was sent: Node joins a repeated custom header into one "a, b" value. */
function headerCount(rawHeaders: string[], name: string): number {
  let n = 0;
  for (let i = 0; i < rawHeaders.length; i += 2) if (rawHeaders[i]!.toLowerCase() === name) n++;
  return n;
}

export function registerIdempotency(app: FastifyInstance, opts: { repo: IdempotencyRepository; clock: Clock; leaseMs: number; log: Logger; inflight: Inflight }) {
  const { repo, clock, leaseMs, log, inflight } = opts;
  app.decorateRequest('idempotency', null);

  /** 'run': this request holds the key and runs; 'replayed': the kept answer was sent. */
  /**
   * Which of the key's states refused a request, for clients to act on without reading the message: the spec's
   * closed set of error codes has none finer than INVALID_REQUEST and RATE_LIMITED. `in-progress` (429: the first
   * request is still running; retry after Retry-After), `key-reused` (400: the key belongs to another request; a
   * bug in the client), `answer-lost` (400: carried out, answer lost; check the outcome, do not resend).
   */
  const STATUS_HEADER = 'idempotency-status';

  async function begin(req: FastifyRequest, reply: FastifyReply, key: string): Promise<'run' | 'replayed'> {
    const accountId = req.auth.accountId;
    const fingerprint = requestFingerprint(req.method, req.url, req.body);
    const path = keptPath(req.url);
    const waitUntil = performance.now() + WAIT_FOR_FIRST_MS;
    for (;;) {
      const now = clock.now();
      if (await repo.claim({ accountId, key, fingerprint, method: req.method, path, now })) {
        req.idempotency = { accountId, key, lockedAt: now };
        return 'run';
      }
      const row = await repo.find(accountId, key);
      if (!row) continue; // released or swept meanwhile: claim again
      if (row.created_at <= now - IDEMPOTENCY_TTL_MS) {
        await repo.release(accountId, key, row.locked_at);
        continue;
      }
      if (row.fingerprint !== fingerprint && row.fingerprint !== legacyFingerprint(req.method, req.url, req.body)) {
        const same = row.method === req.method && row.path === path;
        throw new ApiError(
          'INVALID_REQUEST',
          `header.Idempotency-Key ${JSON.stringify(key)} was already used for ${same ? 'a request with a different body' : `${row.method} ${row.path}`}; ` +
            'a key stands for one request for 24 hours, so send a new key with a new request',
          { [STATUS_HEADER]: 'key-reused' },
        );
      }
      if (row.status_code !== null) {
        reply.code(row.status_code).header('idempotent-replayed', 'true').type('application/json; charset=utf-8').send(row.response ?? '');
        return 'replayed';
      }
      if (row.locked_at <= now - leaseMs) {
        if (row.committed_at !== null) {
          // Its write committed but no answer was kept (the process died first, or the request failed after it):
          // running it again would repeat the write.
          throw new ApiError(
            'INVALID_REQUEST',
            `header.Idempotency-Key ${JSON.stringify(key)}: the request sent with this key was carried out, but its answer was lost ` +
              '(the service stopped or failed before answering); it is not run again. Check the outcome (list or get the resource), then use a new key',
            { [STATUS_HEADER]: 'answer-lost' },
          );
        }
        // Left by a process that died before it wrote anything: it runs again.
        if (await repo.takeOver(accountId, key, row.locked_at, now)) {
          req.idempotency = { accountId, key, lockedAt: now };
          return 'run';
        }
        continue;
      }
      if (performance.now() >= waitUntil) {
        throw new ApiError('RATE_LIMITED', `a request with Idempotency-Key ${JSON.stringify(key)} is still being processed; retry once it has finished`, {
          'retry-after': 1,
          [STATUS_HEADER]: 'in-progress',
        });
      }
      await sleep(POLL_MS);
    }
  }

  // Callback hooks: requests without the header (nearly all) pay one property check, no promise. Attached to
  // the POST routes alone (below), so the other routes do not run them at all.
  const preHandler = (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    const raw = req.headers[HEADER];
    if (raw === undefined || req.method !== 'POST' || !req.auth) return done();
    // Sent twice, Node hands over "k1, k2", which would pass as one key: count the raw header lines instead.
    const key = Array.isArray(raw) || headerCount(req.raw.rawHeaders, HEADER) > 1 ? undefined : raw.trim();
    if (key === undefined || !VALID_KEY.test(key)) {
      return done(invalidRequest('header.Idempotency-Key must be one value of 1 to 255 printable ASCII characters'));
    }
    begin(req, reply, key).then(
      (outcome) => {
        if (outcome !== 'run') return;
        const claim = req.idempotency!;
        // Every write transaction the endpoint starts marks the key committed as its last statement.
        claim.endUnitOfWork = openUnitOfWork({ beforeCommit: (trx) => repo.markCommitted(trx, claim, clock.now()) }, () => done());
      },
      (err: Error) => done(err),
    );
  };

  const onSend = (req: FastifyRequest, reply: FastifyReply, payload: unknown, done: (err: Error | null, payload?: unknown) => void) => {
    const claim = req.idempotency;
    if (!claim) return done(null, payload);
    req.idempotency = null;
    const status = reply.statusCode;
    const body = typeof payload === 'string' ? payload : Buffer.isBuffer(payload) ? payload.toString('utf8') : payload == null ? '' : null;
    // Counted like a handler: shutdown closes the database after it.
    const write = inflight.track(status >= 500 || body === null ? repo.abandon(claim) : repo.record(claim, status, body));
    write.then(
      () => {
        claim.endUnitOfWork?.();
        done(null, payload);
      },
      (err: unknown) => {
        claim.endUnitOfWork?.();
        // The answer still goes out; a retry after the lease runs the request again.
        log.error({ err, reqId: req.id }, 'could not record the answer of a request with an Idempotency-Key');
        done(null, payload);
      },
    );
  };

  app.addHook('onRoute', (route) => {
    if (!hooksOf(route.method).includes('POST')) return;
    route.preHandler = [...hooksOf(route.preHandler), preHandler] as typeof route.preHandler;
    route.onSend = [...hooksOf(route.onSend), onSend] as typeof route.onSend;
  });
}
