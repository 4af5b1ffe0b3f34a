/**
 * The delivery engine: claims due deliveries under a lease, POSTs them through the sender, records each
 * attempt and applies the retry schedule and the disable rule.
 *
 * Exclusivity comes from the lease, not from the process: a delivery is sent only by the holder of its
 * lease (`lease_owner`), the lease lasts longer than one attempt can (2 × WEBHOOK_TIMEOUT + 1 s), and every
 * write after an attempt is conditional on still holding it. PostgreSQL workers claim with
 * `FOR UPDATE SKIP LOCKED`, so several `parley worker` processes share the queue without waiting on each
 * other; on SQLite the claim is one UPDATE statement, atomic under SQLite's single writer lock.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { sql, type Expression, type Kysely, type SqlBool, type Transaction } from 'kysely';
import type { Config } from '../../config.js';
import type { DialectName } from '../../db/database.js';
import { claimingRead } from '../../db/locks.js';
import { pageLimit } from '../../db/pagination.js';
import type { DB, DeliveriesTable } from '../../db/schema.js';
import { resourceError } from '../../db/resource-errors.js';
import { currentUnitOfWork, type UnitOfWork } from '../../db/unit-of-work.js';
import type { Clock } from '../../lib/clock.js';
import type { WorkerTask } from '../../worker/worker.js';
import { accountNotBeingDeleted, accountNotBeingDeletedPerRow } from '../accounts/accounts.repository.js';
import { nextAttemptDelay } from './retry.js';
import type { SendResult, WebhookSender } from './sender.js';
import { buildDeliveryHeaders } from './signing.js';
import { webhooksRepository } from './webhooks.repository.js';

export type AttemptKind = 'auto' | 'manual' | 'test';
export const ATTEMPT_KINDS: readonly AttemptKind[] = ['auto', 'manual', 'test'];
/**
 * What became of an attempt: `retrying` failed with another automatic attempt scheduled; `failed` failed with none
 * (an automatic attempt's last, which disables the webhook; a test send; a manual retry); `gone` the receiver
 * answered 410, which disables the webhook.
 */
export type AttemptOutcome = 'succeeded' | 'retrying' | 'failed' | 'gone';
export const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = ['succeeded', 'retrying', 'failed', 'gone'];

/**
 * How long a lease is renewed for while its attempt's record waits for the database (see `stalled`): well past the
 * worker's longest backoff between two tries (5 s), whatever WEBHOOK_TIMEOUT makes the usual lease.
 */
const STALLED_LEASE_MS = 30_000;
/** How long the worker's finished attempts wait for others to be recorded with (see `record`), and how many at most. */
const RECORD_WAIT_MS = 5;
const RECORD_BATCH = 64;
/** Successful attempts recorded by one UPDATE and one INSERT (flush). */
const SUCCESS_CHUNK = 16;
/** In an UPDATE of deliveries: its webhook still exists and is enabled. */
const webhookEnabled = sql<boolean>`exists (select 1 from webhooks w where w.id = deliveries.webhook_id and w.enabled = 1)`;

/** What an attempt needs, as read when the delivery was claimed (the lease keeps it current). */
export type ClaimedDelivery = Pick<
  DeliveriesTable,
  'id' | 'account_id' | 'webhook_id' | 'event' | 'event_id' | 'url' | 'secret' | 'body' | 'attempt_count' | 'auto_attempts'
> & {
  /** The webhook's secret now (null: the webhook is gone), which may differ from the one the delivery froze. */
  webhook_secret: string | null;
  /** The secret the webhook had before its last change, while WEBHOOK_SECRET_OVERLAP since that change lasts. */
  webhook_previous_secret: string | null;
};

const CLAIMED_COLUMNS = ['id', 'account_id', 'webhook_id', 'event', 'event_id', 'url', 'secret', 'body', 'attempt_count', 'auto_attempts'] as const;

/**
 * The columns a claim (or a request's lease) returns: the delivery's own, and the secrets a receiver may hold besides
 * the frozen one, read from the webhook by the same statement (a primary-key probe each), so an attempt costs no extra
 * round trip and every worker signs from what is stored. The previous secret's window is checked here, not left to
 * the sweep that clears it.
 */
function claimedColumns(now: number, overlapMs: number) {
  return [
    ...CLAIMED_COLUMNS,
    sql<string | null>`(select w.secret from webhooks w where w.id = deliveries.webhook_id)`.as('webhook_secret'),
    sql<string | null>`(select w.previous_secret from webhooks w where w.id = deliveries.webhook_id and w.secret_changed_at > ${now - overlapMs})`.as(
      'webhook_previous_secret',
    ),
  ] as const;
}

/**
 * The headers of one attempt. `X-Service-Signature` is the frozen secret's alone (the seed's scheme has one value, the
 * same on every attempt); `webhook-signature` carries a signature for every secret the receiver may be holding: the
 * frozen one, the webhook's current one (a delivery made before a rotation, retried after it) and, during the overlap,
 * the one it replaced (a receiver that has not switched yet).
 */
const attemptHeaders = (d: ClaimedDelivery, at: number) =>
  buildDeliveryHeaders({
    deliveryId: d.id,
    event: d.event,
    eventId: d.event_id,
    secret: d.secret,
    alsoSignWith: [d.webhook_secret, d.webhook_previous_secret],
    body: d.body,
    now: at,
  });

export interface DeliveryEngineOptions {
  db: Kysely<DB>;
  dialect: DialectName;
  clock: Clock;
  config: Pick<Config, 'webhookTimeoutMs' | 'webhookRetryDelaysMs' | 'webhookSecretOverlapMs'>;
  sender: WebhookSender & { close?(): Promise<void> };
  /** Identifies this process in leases and attempt records. */
  ownerId?: string;
  /** Attempts in flight at once, overall (default 80), per webhook (default 16) and per account (default 64). */
  maxInFlight?: number;
  /** Attempts sent but not yet recorded, at most (default 256); new sends wait past it. */
  maxUnrecorded?: number;
  perWebhook?: number;
  perAccount?: number;
  /** Idle poll period (default 50 ms); an in-process emit wakes the engine sooner. */
  pollIntervalMs?: number;
  /**
   * Subscribes to "new deliveries were committed" from other processes (PostgreSQL LISTEN); started when a
   * worker runs this engine, stopped on close.
   */
  listen?: (onNotify: () => void) => { close(): Promise<void> };
  log?: { error(obj: unknown, msg?: string): void };
}

/** A count per key (a webhook, an account); a copy of `from` when given. */
function counts(from?: { entries(): Iterable<[string, number]> }) {
  const m = new Map<string, number>(from?.entries());
  return {
    get: (key: string) => m.get(key) ?? 0,
    add(key: string, n: number) {
      const c = (m.get(key) ?? 0) + n;
      if (c <= 0) m.delete(key);
      else m.set(key, c);
    },
    entries: () => m.entries(),
    /** The keys counted `n` or more. */
    atLeast: (n: number) => [...m].filter(([, c]) => c >= n).map(([k]) => k),
  };
}

/**
 * Whether the database refused the batch for something one record or one race could cause: a value (SQLSTATE class
 * 22), a constraint (23), a deadlock or serialization failure (40), a trigger's or a procedure's exception (P0); on
 * SQLite a constraint, a type mismatch or a value too big. Not a lost connection or a timeout: recorded one by one,
 * a batch would wait that out once per record, and every request waiting on the next flush with it.
 */
export function aboutOneRecord(err: unknown): boolean {
  const code = (err as { code?: unknown }).code;
  if (typeof code !== 'string') return false;
  if (code.startsWith('SQLITE_')) return code.startsWith('SQLITE_CONSTRAINT') || code === 'SQLITE_MISMATCH' || code === 'SQLITE_TOOBIG';
  return code.length === 5 && ['22', '23', '40', 'P0'].includes(code.slice(0, 2));
}

/**
 * Whether the connection a batch was written on was lost (the server restarted or failed over, a proxy or an operator
 * closed it): SQLSTATE class 08, an administrator's or a crash's shutdown (57P01–57P03), or the socket closing under
 * the query. The batch is then written once more on another connection. Not a timeout: a database that does not
 * answer would only be waited for twice.
 */
export function connectionLost(err: unknown): boolean {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e.code === 'string' && (e.code.startsWith('08') || ['57P01', '57P02', '57P03', 'ECONNRESET', 'EPIPE'].includes(e.code))) return true;
  return typeof e.message === 'string' && /^Connection terminated/.test(e.message);
}

/**
 * Whether the database could not take a batch of records for now, through no fault of theirs: it is full or out of
 * another resource, restarting, or the connection was lost (again, after writeBatch's second try) or refused. The
 * worker keeps such records and writes them later (see `stalled`).
 */
export function databaseUnavailable(err: unknown): boolean {
  return resourceError(err) !== null || connectionLost(err);
}

export function createDeliveryEngine(opts: DeliveryEngineOptions) {
  const { db, dialect, clock, config, sender } = opts;
  const owner = opts.ownerId ?? `${hostname()}:${process.pid}:${randomBytes(3).toString('hex')}`;
  const maxInFlight = opts.maxInFlight ?? 80;
  const perWebhook = opts.perWebhook ?? 16;
  /**
   * An account's share of a worker, less than all of it: without it, an account whose receivers never answer (a
   * few webhooks, a burst of events) held every slot for the whole timeout, and other accounts' deliveries waited
   * minutes (a security audit: 0.3 s → 149 s for another account's escalation, eight hanging webhooks, 30 s
   * timeout). One account keeps the 64 it could use before (a lower share cost a single account with 20 webhooks
   * 15% of its throughput on PostgreSQL); the 16 beyond are the others'.
   */
  const perAccount = opts.perAccount ?? 64;
  const pollIntervalMs = opts.pollIntervalMs ?? 50;
  const timeoutMs = config.webhookTimeoutMs;
  const delays = config.webhookRetryDelaysMs;
  /**
   * Attempts sent whose record has not committed, at most: what a crash makes the next worker send again. Four
   * batches' worth, so a flush of one batch overlaps the sends of the next (at one batch, PostgreSQL's throughput
   * fell to a third: sends waited on every flush).
   */
  const maxUnrecorded = opts.maxUnrecorded ?? 256;
  /** Longer than one attempt can take, so a live holder never loses its lease mid-attempt. */
  const leaseMs = 2 * timeoutMs + 1_000;

  /** Attempts this process made, by kind and outcome (the metrics endpoint reads them). */
  const attemptCounts = Object.fromEntries(
    ATTEMPT_KINDS.map((k) => [k, Object.fromEntries(ATTEMPT_OUTCOMES.map((o) => [o, 0]))]),
  ) as Record<AttemptKind, Record<AttemptOutcome, number>>;
  const outcomeOf = (d: ClaimedDelivery, kind: AttemptKind, res: SendResult): AttemptOutcome =>
    res.ok ? 'succeeded' : res.gone ? 'gone' : kind === 'auto' && nextAttemptDelay(delays, d.auto_attempts + 1) !== null ? 'retrying' : 'failed';

  let closed = false;
  let wake: (() => void) | null = null;
  let backlog = false;
  const inFlight = new Set<Promise<void>>();
  /** Attempts started and not yet finished, per webhook and per account. */
  const perWebhookCount = counts();
  const perAccountCount = counts();
  /** Claimed but waiting for a slot (of the worker, the webhook or the account); `stale` once they outlived the claim's tick. */
  const queued: Array<{ d: ClaimedDelivery; stale: boolean; claimedAt: number }> = [];

  // ------------------------------------------------------------------------------------------ claim

  async function claim(limit: number, saturated: { webhooks: string[]; accounts: string[] }): Promise<ClaimedDelivery[]> {
    const now = clock.now();
    // One table walked in due order up to the LIMIT, the webhook and the account probed per row read: as joins,
    // PostgreSQL misjudged how many deliveries are due (status and next_attempt_at go together, its estimate
    // multiplies them: ~120 for 5,000 due), chose a hash join and sorted every due delivery on every claim (5–15 ms a
    // claim at 5,000–20,000 due against 0.2 ms; bench/webhooks/claim-plan.mjs, test/modules/webhooks/claim-plan.test.ts).
    let due = db
      .selectFrom('deliveries as d')
      .select('d.id')
      // Literal predicates (not bound parameters) so both planners match the partial index deliveries_due.
      .where(sql<boolean>`d.status = 'pending' and d.lease_owner is null`)
      .where('d.next_attempt_at', '<=', now)
      .where(sql<boolean>`(select w.enabled from webhooks w where w.id = d.webhook_id) = 1`)
      // An account being deleted sends nothing more (accounts.service.ts deleteAccount).
      .where(accountNotBeingDeletedPerRow('d.account_id'))
      .orderBy('d.next_attempt_at')
      .limit(pageLimit(limit));
    if (saturated.webhooks.length) due = due.where('d.webhook_id', 'not in', saturated.webhooks);
    if (saturated.accounts.length) due = due.where('d.account_id', 'not in', saturated.accounts);
    if (dialect === 'postgres') due = due.forUpdate(['d']).skipLocked();
    return db
      .updateTable('deliveries')
      .set({ lease_owner: owner, lease_expires_at: now + leaseMs, updated_at: now })
      .where('id', 'in', due)
      .returning(claimedColumns(now, config.webhookSecretOverlapMs))
      .execute();
  }

  async function releaseLease(leaseOwner: string, ids?: string[]) {
    let q = db.updateTable('deliveries').set({ lease_owner: null, lease_expires_at: null }).where('lease_owner', '=', leaseOwner);
    if (ids) q = q.where('id', 'in', ids);
    await q.execute();
  }

  // ---------------------------------------------------------------------------------------- attempt

  /**
   * One attempt of a delivery whose lease `leaseOwner` holds: send, then record it and move the delivery on.
   * Never throws for a receiver's failure; the attempt is returned as recorded.
   */
  async function attempt(d: ClaimedDelivery, kind: AttemptKind, leaseOwner: string): Promise<SendResult> {
    const startedAt = clock.now();
    const headers = attemptHeaders(d, startedAt);
    const res = await sender.send({ url: d.url, headers: { ...headers }, body: d.body, timeoutMs });
    await record(d, kind, leaseOwner, startedAt, res);
    return res;
  }

  interface Outcome {
    d: ClaimedDelivery;
    kind: AttemptKind;
    leaseOwner: string;
    at: number;
    res: SendResult;
    /** The request this attempt was made for (a test send or a manual retry with an Idempotency-Key), if any. */
    uow: UnitOfWork | undefined;
    done: (err?: unknown) => void;
  }
  let outbox: Outcome[] = [];
  /**
   * Why the worker's own records could not be written (the database is full, restarting…), while they wait in
   * `outbox` to be written again; null when records go through. Meanwhile nothing new is claimed or sent: the
   * receivers already have these attempts, and dropping their records (as before) made every one of them be sent
   * again at each lease's expiry for as long as the database stayed full. The delivery task retries them at its
   * failure backoff (worker.ts: up to 5 s apart, one log line per 30 s) and renews their leases, so no other worker
   * sends them again meanwhile.
   */
  let stalled: unknown = null;
  /** The flush running or waiting to run; `hurry` starts a waiting one at once. */
  let flushing: Promise<void> | null = null;
  let hurry: (() => void) | null = null;

  /**
   * Attempts finishing together are recorded in one transaction (group commit): a commit costs far more
   * than the few row writes of an attempt, and a crash before the flush only means the attempt is made again.
   *
   * The worker's own attempts wait up to RECORD_WAIT_MS for company: their HTTP slot is already free, so the
   * wait delays nothing but the release of their lease, and with one busy webhook the records otherwise
   * committed four or five at a time, one sync each (most of SQLite's time in the benchmark). An attempt a
   * request waits on (a test send, a manual retry) is recorded at once, with whatever is waiting.
   */
  function record(d: ClaimedDelivery, kind: AttemptKind, leaseOwner: string, at: number, res: SendResult): Promise<void> {
    // Counted once sent, whether or not its record commits: the receiver has had it either way.
    attemptCounts[kind][outcomeOf(d, kind, res)]++;
    return new Promise<void>((resolve, reject) => {
      // Only attempts a request makes itself: the worker's loop may have been woken from inside a request's context.
      const uow = kind === 'auto' ? undefined : currentUnitOfWork();
      outbox.push({ d, kind, leaseOwner, at, res, uow, done: (err) => (err ? reject(err) : resolve()) });
      // While records are stalled the worker's own wait for the delivery task's next retry; a request's goes now.
      if (!stalled || kind !== 'auto') scheduleFlush(kind !== 'auto' || outbox.length >= RECORD_BATCH);
    });
  }

  function scheduleFlush(urgent: boolean) {
    if (flushing) {
      if (urgent) hurry?.();
      return;
    }
    flushing = new Promise<void>((resolve) => {
      const timer = urgent || closed ? null : setTimeout(() => go(), RECORD_WAIT_MS);
      const go = () => {
        if (timer) clearTimeout(timer);
        hurry = null;
        resolve();
      };
      hurry = go;
      if (!timer) setImmediate(go);
    }).then(flush);
  }

  /** Writes the records of `list` in the transaction `trx`. */
  async function writeRecords(trx: Transaction<DB>, list: Outcome[]) {
    // The common case, this worker's attempts that succeeded, SUCCESS_CHUNK at a time in two statements (one
    // UPDATE, one multi-row INSERT): recorded one by one, two round trips each, they bounded a PostgreSQL
    // worker's rate once sends wait for records. Whole chunks only, since every statement text is prepared once
    // per connection on PostgreSQL (database.ts) and a text per batch size would fill that cache; the rest,
    // and every other outcome, one by one.
    const plain = list.filter((o) => o.kind === 'auto' && o.res.ok && !o.uow && o.leaseOwner === owner);
    const chunked = plain.slice(0, plain.length - (plain.length % SUCCESS_CHUNK));
    const inChunks = new Set(chunked);
    const single = list.filter((o) => !inChunks.has(o));
    await lockWebhooks(trx, single);
    for (let i = 0; i < chunked.length; i += SUCCESS_CHUNK) await writeSucceeded(trx, chunked.slice(i, i + SUCCESS_CHUNK));
    for (const o of single) await writeOutcome(trx, o);
    // A manual retry's key is marked committed with its attempt's record: once the attempt is recorded, a
    // retry of the request must not send again.
    for (const o of list) await o.uow?.beforeCommit(trx);
  }

  function recorded(o: Outcome) {
    o.d.attempt_count += 1;
    if (o.kind === 'auto') o.d.auto_attempts += 1;
    o.done();
  }

  /** Writes the records of `list` in one transaction. */
  const writeAlone = (list: Outcome[]) => db.transaction().execute((trx) => writeRecords(trx, list));

  /**
   * Writes the batch's records in one transaction, and once more on another connection if its connection was lost.
   * Written again, it is recorded once however the first COMMIT ended: every write is conditional on the deliveries'
   * leases, which a COMMIT that did go through released. Not written, every delivery of the batch would be sent again
   * when its lease expired.
   */
  async function writeBatch(batch: Outcome[]) {
    try {
      await writeAlone(batch);
    } catch (err) {
      if (!connectionLost(err)) throw err;
      await writeAlone(batch);
    }
  }

  async function flush(): Promise<void> {
    const batch = outbox;
    outbox = [];
    try {
      await writeBatch(batch);
      for (const o of batch) recorded(o);
      if (stalled) {
        stalled = null;
        schedulePump(); // the deliveries claimed before the stall go out now
      }
    } catch (err) {
      if (databaseUnavailable(err)) {
        // Kept, to be written once the database takes writes again. A request waiting on its attempt (a test send, a
        // manual retry) is answered with the error instead (a 500 with Retry-After): its lease expires as before.
        const kept = batch.filter((o) => o.kind === 'auto' && !o.uow);
        for (const o of batch) if (!kept.includes(o)) o.done(err);
        outbox = [...kept, ...outbox];
        stalled = kept.length || outbox.length ? err : null;
      } else if (batch.length === 1 || !aboutOneRecord(err)) {
        for (const o of batch) o.done(err);
      } else {
        // One record the database refuses (or a deadlock) rolled the whole batch back: every delivery in it would stay
        // pending without its attempt and be sent again when its lease expired. Each is recorded on its own instead,
        // so only the one at fault fails.
        for (const o of batch) {
          try {
            await writeAlone([o]);
            recorded(o);
          } catch (one) {
            o.done(one);
          }
        }
      }
    } finally {
      flushing = null;
      if (outbox.length && !stalled) scheduleFlush(outbox.some((o) => o.kind !== 'auto') || outbox.length >= RECORD_BATCH);
    }
  }

  /**
   * While records are stalled, the delivery task's turn: renews the leases of the attempts waiting to be recorded
   * (an UPDATE in place, which a full database still takes; if it does not, the sweep that would release them fails
   * too), then writes the records once more. Throws while they still cannot be written, so that the worker backs
   * off and logs it, instead of claiming and sending more.
   */
  async function retryStalled(): Promise<void> {
    while (flushing) await flushing;
    if (!stalled) return;
    const ids = outbox.filter((o) => o.leaseOwner === owner).map((o) => o.d.id);
    if (ids.length) {
      await db
        .updateTable('deliveries')
        .set({ lease_expires_at: clock.now() + Math.max(leaseMs, STALLED_LEASE_MS) })
        .where('id', 'in', ids)
        .where('lease_owner', '=', owner)
        .execute()
        .catch(() => undefined);
    }
    if (outbox.length) {
      scheduleFlush(true);
      while (flushing) await flushing;
    } else stalled = null;
    if (stalled) throw stalled;
  }

  /** Successful attempts of this worker, each under its lease: as writeOutcome would record them one by one. */
  async function writeSucceeded(trx: Kysely<DB>, list: Outcome[]) {
    const now = clock.now();
    // The holder of the lease is the only writer of these rows: the counts it read at the claim are current.
    const updated = await trx
      .updateTable('deliveries')
      .set({
        attempt_count: sql`attempt_count + 1` as never,
        auto_attempts: sql`auto_attempts + 1` as never,
        status: 'succeeded',
        next_attempt_at: null,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: now,
      })
      .where('id', 'in', list.map((o) => o.d.id))
      .where('lease_owner', '=', owner)
      .returning('id')
      .execute();
    const recorded = new Set(updated.map((r) => r.id));
    const rows = list.filter((o) => recorded.has(o.d.id)).map(attemptRow);
    if (rows.length) await trx.insertInto('delivery_attempts').values(rows).execute();
  }

  /** The attempt's record, as the delivery's attempt number `attempt_count + 1`. */
  const attemptRow = ({ d, kind, leaseOwner, at, res }: Outcome) => ({
    delivery_id: d.id,
    attempt: d.attempt_count + 1,
    kind,
    at,
    status_code: res.statusCode,
    duration_ms: res.durationMs,
    error: res.error,
    response_body: res.responseBody,
    worker: leaseOwner,
  });

  /**
   * Whether a retry is rescheduled: its webhook is enabled. On PostgreSQL the webhook row is read FOR SHARE, so a
   * disable or delete committing at the same moment is waited for and seen (a plain read saw the webhook as
   * enabled, rescheduled the delivery, and the disable's cancel, which leaves leased deliveries to their holder,
   * had skipped it: `pending` for a disabled webhook). The lock is already held by then (lockWebhooks). SQLite has
   * one writer.
   */
  const enabledNow =
    dialect === 'postgres' ? sql<boolean>`exists (select 1 from webhooks w where w.id = deliveries.webhook_id and w.enabled = 1 for share)` : webhookEnabled;

  /**
   * What recording the attempt does: the delivery's next status (null: unchanged; a failure to reschedule or to
   * settle reads the webhook with enabledNow) and whether it disables the webhook.
   */
  function settle({ d, kind, res }: Outcome, now: number) {
    const autoN = kind === 'auto' ? d.auto_attempts + 1 : d.auto_attempts;
    let disableReason: string | null = null;
    let next: { status: 'pending' | 'failed'; nextAt: number | null } | null = null;
    if (!res.ok) {
      if (res.gone) {
        next = { status: 'failed', nextAt: null };
        disableReason = `receiver answered 410 Gone to delivery ${d.id}`;
      } else if (kind === 'test') {
        next = { status: 'failed', nextAt: null }; // a test send is not retried
      } else if (kind === 'auto') {
        const delay = nextAttemptDelay(delays, autoN);
        if (delay === null) {
          next = { status: 'failed', nextAt: null };
          disableReason = `${autoN} failed attempts for delivery ${d.id} (last: ${res.error ?? 'failure'})`;
        } else next = { status: 'pending', nextAt: now + delay };
      }
    }
    return { autoN, next, disableReason };
  }

  /**
   * On PostgreSQL, the webhook rows the batch's records will read with enabledNow, locked before anything else and
   * in id order: FOR NO KEY UPDATE (what the disable's UPDATE takes) when one of them may disable its webhook, else
   * FOR SHARE. A record that read its webhook FOR SHARE and then disabled it had to upgrade that lock, and two
   * workers doing so for one webhook (two last failures together) each waited for the other's share: a deadlock,
   * one batch rolled back and its attempts made again. Taken up front and in order, these locks cannot form a cycle
   * (one batch waits for the other's commit), and the disable or delete of the API, which locks the webhook row
   * before the deliveries, orders the same way. Successes read no webhook: a batch of them takes nothing here.
   */
  async function lockWebhooks(trx: Kysely<DB>, outcomes: Outcome[]) {
    if (dialect !== 'postgres') return;
    const ids = new Set<string>();
    let disables = false;
    for (const o of outcomes) {
      if (o.res.ok) continue;
      const { next, disableReason } = settle(o, 0);
      if (next) ids.add(o.d.webhook_id);
      if (disableReason) disables = true;
    }
    if (!ids.size) return;
    const q = trx.selectFrom('webhooks').select('id').where(sql<boolean>`id = any(${[...ids]})`).orderBy('id');
    await (disables ? q.forNoKeyUpdate() : q.forShare()).execute();
  }

  async function writeOutcome(trx: Kysely<DB>, o: Outcome) {
    const { d, leaseOwner, res } = o;
    const now = clock.now();
    const n = d.attempt_count + 1;
    const { autoN, next, disableReason } = settle(o, now);
    // Conditional on the lease: an attempt whose lease was lost (which the lease length rules out for a
    // live process) is not recorded over another holder's. A delivery cancelled meanwhile stays cancelled
    // unless this attempt succeeded (the receiver did get it) or was its last (it failed every attempt: CONTRACT
    // §6 makes it `failed`; it was cancelled only because another delivery's last failure disabled the webhook
    // while this one's last attempt was on its way).
    const status = res.ok
      ? sql<string>`'succeeded'`
      : next?.status === 'failed'
        ? sql<string>`case when status in ('pending', 'cancelled') then 'failed' else status end`
        : next
          ? sql<string>`case when status = 'pending' and ${enabledNow} then ${next.status} when status = 'pending' then 'cancelled' else status end`
          : sql<string>`status`;
    const nextAt = res.ok
      ? null
      : next
        ? sql<number | null>`case when status = 'pending' and ${enabledNow} then cast(${next.nextAt} as bigint) else null end`
        : sql<number | null>`next_attempt_at`;
    const updated = await trx
      .updateTable('deliveries')
      .set({
        attempt_count: n,
        auto_attempts: autoN,
        status: status as never,
        next_attempt_at: nextAt as never,
        lease_owner: null,
        lease_expires_at: null,
        updated_at: now,
      })
      .where('id', '=', d.id)
      .where('lease_owner', '=', leaseOwner)
      .executeTakeFirst();
    if (Number(updated.numUpdatedRows) === 0) return;
    await trx.insertInto('delivery_attempts').values(attemptRow(o)).execute();
    if (disableReason) await webhooksRepository.disable(trx, d.account_id, d.webhook_id, disableReason, now);
  }

  // ------------------------------------------------------------------------------------------- pump

  const recording = new Set<Promise<void>>();

  function release(d: ClaimedDelivery) {
    perWebhookCount.add(d.webhook_id, -1);
    perAccountCount.add(d.account_id, -1);
  }

  /**
   * Sends, then frees the HTTP slot at once; recording runs on (group-committed) while the lease, held until
   * the record commits, keeps every other worker off this delivery.
   */
  function start(d: ClaimedDelivery, ready: Promise<boolean>) {
    perWebhookCount.add(d.webhook_id, 1);
    perAccountCount.add(d.account_id, 1);
    const p = (async () => {
      if (!(await ready)) return;
      const at = clock.now();
      const headers = attemptHeaders(d, at);
      const res = await sender.send({ url: d.url, headers: { ...headers }, body: d.body, timeoutMs });
      const r = record(d, 'auto', owner, at, res)
        .catch((err: unknown) => opts.log?.error({ err, deliveryId: d.id }, 'webhook attempt failed to record'))
        .finally(() => {
          recording.delete(r);
          // A slot held back for recording (below) is free again.
          if (queued.length) schedulePump();
          else if (backlog && !closed) wake?.();
        });
      recording.add(r);
    })()
      .catch((err: unknown) => opts.log?.error({ err, deliveryId: d.id }, 'webhook attempt failed'))
      .finally(() => {
        inFlight.delete(p);
        release(d);
        schedulePump();
        // Refill when the local queue runs low (claims are coalesced by the worker loop while one runs).
        if (backlog && !closed && queued.length < perWebhook / 2 && inFlight.size + queued.length <= maxInFlight / 2) wake?.();
      });
    inFlight.add(p);
  }

  /**
   * Deliveries that waited locally: still ours, pending, webhook enabled? One statement for the lot.
   *
   * While every lease still has more than an attempt's worth of time left, the check is a plain read: on
   * SQLite a write here meant one commit per delivery when a single webhook's backlog drains slot by slot,
   * and commits dominated the benchmark profile. Only when one of them waited longer is the check the
   * UPDATE that also renews the leases. Either way the check sits at the same point before the send.
   */
  async function recheckMany(items: Array<{ d: ClaimedDelivery; claimedAt: number }>): Promise<Set<string>> {
    const now = clock.now();
    const ids = items.map((q) => q.d.id);
    const renew = items.some((q) => q.claimedAt + leaseMs - now < timeoutMs + 1_000 + leaseMs / 4);
    const ok = renew
      ? await db
          .updateTable('deliveries')
          .set({ lease_expires_at: now + leaseMs })
          .where('id', 'in', ids)
          .where('lease_owner', '=', owner)
          .where(sql<boolean>`status = 'pending'`)
          .where(webhookEnabled)
          .where(accountNotBeingDeleted('deliveries.account_id'))
          .returning('id')
          .execute()
      : await db
          .selectFrom('deliveries')
          .select('id')
          .where('id', 'in', ids)
          .where('lease_owner', '=', owner)
          .where(sql<boolean>`status = 'pending'`)
          .where(webhookEnabled)
          .where(accountNotBeingDeleted('deliveries.account_id'))
          .execute();
    const okIds = new Set(ok.map((r) => r.id));
    const lost = ids.filter((id) => !okIds.has(id));
    if (lost.length) {
      // Released; those whose webhook was disabled or deleted while they waited here are cancelled (the
      // webhook's cancel leaves deliveries under a lease to their holder).
      await db
        .updateTable('deliveries')
        .set({
          status: sql`case when status = 'pending' and not ${webhookEnabled} then 'cancelled' else status end` as never,
          next_attempt_at: sql`case when status = 'pending' and not ${webhookEnabled} then null else next_attempt_at end` as never,
          lease_owner: null,
          lease_expires_at: null,
          updated_at: now,
        })
        .where('id', 'in', lost)
        .where('lease_owner', '=', owner)
        .execute();
    }
    return okIds;
  }

  /**
   * Attempts that finish in the same turn of the event loop (a receiver answers a burst) start their successors
   * with one pump, so the lease check of those that waited here is one statement for all of them, not one each.
   */
  let pumpScheduled = false;
  function schedulePump() {
    if (pumpScheduled) return;
    pumpScheduled = true;
    setImmediate(() => {
      pumpScheduled = false;
      pump();
    });
  }

  function pump() {
    // Sent now, an attempt could not be recorded either; flush() pumps again once records go through.
    if (stalled) return;
    const stale: Array<{ d: ClaimedDelivery; claimedAt: number }> = [];
    // Deliveries set aside for the lease check count towards their webhook's and account's limits at once:
    // counted only when they start (after the loop), a backlog of one webhook passed the check many times in one
    // pass and put more than perWebhook of its requests in flight.
    const asideByWebhook = counts();
    const asideByAccount = counts();
    const free = (d: ClaimedDelivery) =>
      perWebhookCount.get(d.webhook_id) + asideByWebhook.get(d.webhook_id) < perWebhook &&
      perAccountCount.get(d.account_id) + asideByAccount.get(d.account_id) < perAccount;
    for (let i = 0; i < queued.length && inFlight.size + stale.length < maxInFlight && recording.size < maxUnrecorded; ) {
      const item = queued[i]!;
      if (free(item.d)) {
        queued.splice(i, 1);
        if (item.stale) {
          stale.push(item);
          asideByWebhook.add(item.d.webhook_id, 1);
          asideByAccount.add(item.d.account_id, 1);
        } else start(item.d, Promise.resolve(true));
      } else i++;
    }
    if (stale.length) {
      const checked = recheckMany(stale).catch((err: unknown) => {
        opts.log?.error({ err }, 'webhook lease check failed');
        return new Set<string>();
      });
      for (const { d } of stale) start(d, checked.then((ok) => ok.has(d.id)));
    }
    for (const item of queued) item.stale = true;
  }

  async function run(signal?: AbortSignal) {
    if (closed || signal?.aborted) return;
    if (stalled) await retryStalled();
    // Deliveries waiting here for their webhook's or account's share take no slot from the others: counted, one
    // account's backlog claimed in one go (its events due first) left no room to claim anyone else's until its
    // receivers answered or timed out. The wait is bounded: a full pipeline is claimed no more (below), and at most
    // 4 × maxInFlight wait in all.
    const waiting = queued.filter((q) => perWebhookCount.get(q.d.webhook_id) < perWebhook && perAccountCount.get(q.d.account_id) < perAccount).length;
    const free = Math.min(maxInFlight - inFlight.size - waiting, 4 * maxInFlight - queued.length);
    // Attempts sent but not yet recorded are what a crash makes the next worker send again. Recording is slower
    // than sending in a burst, so without this bound that backlog grew without end (a crash audit on PostgreSQL
    // measured up to 12 s of unrecorded sends, over 2,000 deliveries sent twice): new sends wait for records.
    if (free <= 0 || recording.size >= maxUnrecorded) return;
    // A webhook or an account with a full pipeline (its share in flight and as many waiting here) gets no more for
    // now, so one receiver's or one account's backlog cannot fill this worker while others wait.
    const heldByWebhook = counts(perWebhookCount);
    const heldByAccount = counts(perAccountCount);
    for (const q of queued) {
      heldByWebhook.add(q.d.webhook_id, 1);
      heldByAccount.add(q.d.account_id, 1);
    }
    // An account's waiting line is kept to one webhook's share: a longer one would only hold leases.
    const saturated = { webhooks: heldByWebhook.atLeast(2 * perWebhook), accounts: heldByAccount.atLeast(perAccount + perWebhook) };
    const limit = Math.min(free, 100);
    const claimedAt = clock.now();
    const got = await claim(limit, saturated);
    if (closed) {
      await releaseLease(owner, got.map((d) => d.id));
      return;
    }
    backlog = got.length === limit || saturated.webhooks.length > 0 || saturated.accounts.length > 0;
    for (const d of got) queued.push({ d, stale: false, claimedAt });
    pump();
  }

  // ------------------------------------------------------------------------------------------ sweep

  /**
   * The ids of the deliveries a sweep statement changes. On PostgreSQL it skips rows another transaction holds (FOR
   * UPDATE SKIP LOCKED), as the claim does: the sweep's UPDATE locked rows in its scan's order, a worker's batch of
   * records (several statements) in another, and with two workers whose leases had expired under a slow machine the
   * two deadlocked (an audit with SIGKILLed workers saw the sweep fail so). A row skipped is one being written right
   * now; the next sweep, a few seconds on, sees it again if it still needs sweeping. SQLite has one writer.
   */
  const sweepable = (where: Expression<SqlBool>) => claimingRead(db, db.selectFrom('deliveries').select('id').where(where));

  async function sweep() {
    const now = clock.now();
    // Disabling or deleting a webhook cancels its pending deliveries, but on PostgreSQL an event committed
    // beside it can still insert one: the emitting transaction read the webhook as enabled before the change
    // committed, and the cancel could not see the row not yet committed. Such a delivery is never claimed (the
    // claim wants an enabled webhook), so it is cancelled here once due.
    await db
      .updateTable('deliveries')
      .set({ status: 'cancelled', next_attempt_at: null, updated_at: now })
      .where('id', 'in', sweepable(sql<boolean>`status = 'pending' and lease_owner is null and next_attempt_at <= ${now} and not ${webhookEnabled}`))
      .execute();
    // A test send interrupted by a crash is not retried: it failed.
    await db
      .updateTable('deliveries')
      .set({ status: 'failed', lease_owner: null, lease_expires_at: null, updated_at: now })
      .where('id', 'in', sweepable(sql<boolean>`status = 'pending' and next_attempt_at is null and lease_owner is not null and lease_expires_at < ${now}`))
      .execute();
    const r = await db
      .updateTable('deliveries')
      .set({ lease_owner: null, lease_expires_at: null })
      .where('id', 'in', sweepable(sql<boolean>`lease_owner is not null and lease_expires_at < ${now}`))
      .executeTakeFirst();
    if (Number(r.numUpdatedRows) > 0) wake?.();
    // Rotated secrets whose overlap is over are no longer signed with (the claim checks the window itself): not kept
    // longer than they serve.
    await webhooksRepository.forgetPreviousSecrets(db, now - config.webhookSecretOverlapMs);
  }

  // ----------------------------------------------------------------------------------------- public

  let listener: { close(): Promise<void> } | null = null;
  let kickTimers: NodeJS.Timeout[] = [];
  /** An emit in this process: run soon, and again shortly after, since its transaction may not have committed yet. */
  function kick() {
    if (!wake || closed || kickTimers.length) return;
    const fire = () => wake?.();
    kickTimers = [1, 8, 30].map((ms, i, all) =>
      setTimeout(() => {
        fire();
        if (i === all.length - 1) kickTimers = [];
      }, ms),
    );
    for (const t of kickTimers) t.unref();
  }

  /** Graceful stop: no new claims, in-flight attempts finish (bounded by the timeout), leases released. */
  async function close() {
    if (closed) return;
    closed = true;
    await listener?.close();
    for (const t of kickTimers) clearTimeout(t);
    kickTimers = [];
    const queuedIds = queued.splice(0).map((q) => q.d.id);
    if (queuedIds.length) await releaseLease(owner, queuedIds);
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      Promise.allSettled([...inFlight]),
      new Promise<void>((resolve) => {
        timer = setTimeout(resolve, timeoutMs + 1_000);
      }),
    ]);
    clearTimeout(timer);
    hurry?.();
    while (flushing) await flushing;
    if (stalled) {
      // One last try; records the database still refuses are given up: those deliveries are sent again once their
      // leases expire (at least once), rather than holding the shutdown.
      await retryStalled().catch(() => undefined);
      const err = stalled;
      stalled = null;
      for (const o of outbox.splice(0)) o.done(err);
    }
    await Promise.allSettled([...recording]);
    while (flushing) await flushing;
    await releaseLease(owner).catch(() => undefined);
    await sender.close?.();
  }

  const deliveryTask: WorkerTask = {
    name: 'webhook-deliveries',
    intervalMs: pollIntervalMs,
    run,
    bindWake(fn) {
      wake = fn;
      // Only a process that runs the deliveries listens; an API-only node just announces.
      if (opts.listen && !listener && !closed) listener = opts.listen(() => wake?.());
    },
    drain: close,
  };
  const sweeperTask: WorkerTask = {
    name: 'webhook-lease-sweeper',
    intervalMs: Math.max(250, Math.min(10_000, Math.floor(leaseMs / 4))),
    run: sweep,
  };

  return {
    owner,
    leaseMs,
    tasks: [deliveryTask, sweeperTask],
    kick,
    run,
    sweep,
    close,
    /** Takes the lease of one delivery for a synchronous attempt (manual retry, test send); null when busy. */
    async acquire(deliveryId: string): Promise<{ d: ClaimedDelivery; leaseOwner: string } | null> {
      const now = clock.now();
      const leaseOwner = `${owner}:api:${randomBytes(3).toString('hex')}`;
      const d = await db
        .updateTable('deliveries')
        .set({ lease_owner: leaseOwner, lease_expires_at: now + leaseMs })
        .where('id', '=', deliveryId)
        .where((eb) => eb.or([eb('lease_owner', 'is', null), eb('lease_expires_at', '<', now)]))
        .returning(claimedColumns(now, config.webhookSecretOverlapMs))
        .executeTakeFirst();
      return d ? { d, leaseOwner } : null;
    },
    attempt,
    /** Attempts this process has made since it started, by kind and outcome. */
    attemptCounts: attemptCounts as Readonly<Record<AttemptKind, Readonly<Record<AttemptOutcome, number>>>>,
    get inFlight() {
      return inFlight.size + queued.length;
    },
    /** Attempts sent whose records wait for the database to take writes again (0 unless it is full or unavailable). */
    get unrecorded() {
      return stalled ? outbox.length : 0;
    },
  };
}

export type DeliveryEngine = ReturnType<typeof createDeliveryEngine>;
