import { PostgresAdapter, sql, type Kysely, type QueryCreator, type Transaction } from 'kysely';
import type { DB, DeliveriesTable, DeliveryAttemptsTable, DeliveryStatus, WebhooksTable } from '../../db/schema.js';
import { claimingRead, keySharingRead, lockingRead } from '../../db/locks.js';
import { countAlone, newestFirstPage, pageLimit, totalColumn, totalOf } from '../../db/pagination.js';

type Conn = Kysely<DB> | Transaction<DB>;

export const webhooksRepository = {
  async list(db: Conn, accountId: string, f: { limit: number; offset: number }) {
    return newestFirstPage(db.selectFrom('webhooks').where('account_id', '=', accountId), f);
  },
  /** `lock`: the read of an update, locked until its transaction ends (locks.ts). */
  find(db: Conn, accountId: string, id: string, lock = false) {
    const q = db.selectFrom('webhooks').selectAll().where('account_id', '=', accountId).where('id', '=', id);
    return (lock ? lockingRead(db, q) : q).executeTakeFirst();
  },
  /** Whether the webhook is there, kept there until the transaction ends (locks.ts keySharingRead). */
  async exists(db: Conn, accountId: string, id: string) {
    return (await keySharingRead(db, db.selectFrom('webhooks').select('id').where('account_id', '=', accountId).where('id', '=', id)).executeTakeFirst()) !== undefined;
  },
  /**
   * The webhooks an event fans out to: enabled ones of the account (subscriptions filtered by the caller). The
   * query, not run: the event bus may read it in a larger statement.
   */
  enabled(db: QueryCreator<DB>, accountId: string) {
    return db.selectFrom('webhooks').select(['id', 'url', 'secret', 'events']).where('account_id', '=', accountId).where('enabled', '=', 1);
  },
  async count(db: Conn, accountId: string) {
    const r = await db.selectFrom('webhooks').select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  insert(db: Conn, row: WebhooksTable) {
    return db.insertInto('webhooks').values(row).execute();
  },
  async update(db: Conn, accountId: string, id: string, patch: Partial<Omit<WebhooksTable, 'id' | 'account_id' | 'created_at'>>) {
    const r = await db.updateTable('webhooks').set(patch).where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
  async delete(db: Conn, accountId: string, id: string) {
    const r = await db.deleteFrom('webhooks').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
  /**
   * Clears the previous secret of every webhook whose secret changed at or before `changedBefore` (its overlap is over),
   * and answers how many. The claim already ignores such a secret (delivery.ts), so this only keeps it from being
   * stored longer than it serves. On PostgreSQL a webhook another transaction holds is skipped, not waited for (the
   * next sweep takes it): waiting here while a worker's batch of records locks webhooks in id order could deadlock.
   * `updated_at` stays: the owner changed nothing.
   */
  async forgetPreviousSecrets(db: Kysely<DB>, changedBefore: number) {
    const due = db.selectFrom('webhooks').select('id').where('previous_secret', 'is not', null).where('secret_changed_at', '<=', changedBefore);
    // Looked for first, with a plain read: this runs at every sweep, almost always for nothing, and on SQLite an
    // UPDATE takes the database's one write lock even when it changes no row.
    if (!(await due.limit(1).executeTakeFirst())) return 0;
    const expired = claimingRead(db, due);
    const r = await db
      .updateTable('webhooks')
      .set({ previous_secret: null })
      .where('id', 'in', expired)
      .where('secret_changed_at', '<=', changedBefore)
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  },
  /** Disables a webhook (if still enabled) and cancels its pending deliveries; true when it was enabled. */
  async disable(db: Conn, accountId: string, id: string, reason: string, now: number) {
    const r = await db
      .updateTable('webhooks')
      .set({ enabled: 0, disabled_reason: reason, updated_at: now })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('enabled', '=', 1)
      .executeTakeFirst();
    await deliveriesRepository.cancelPending(db, accountId, id, now);
    return Number(r.numUpdatedRows) > 0;
  },
};

/** The accounts whose deletion has started (accounts.deletion_started_at): their deliveries are never sent. */
const BEING_DELETED = sql`select id from accounts where deletion_started_at is not null`;

/**
 * deliveriesRepository.queueFigures's statement (its plans are tested). With `leavingOutDeleted`, for when there are
 * accounts being deleted, their waiting deliveries (never claimed) are left out, in the same statement, so those
 * counted and those subtracted are of one snapshot: theirs are counted, and the earliest of the others found, through
 * deliveries_due, reading each pending row for its account: 4-7 times the plain statement on SQLite, twice on
 * PostgreSQL, only while a deletion runs (an index carrying the account would halve it on SQLite but means rebuilding
 * the claim's index; BENCHMARKS.md). The leased ones stay: a delivery a worker claimed before the deletion started may
 * still be sent.
 */
export const queueFiguresQuery = (now: number, leavingOutDeleted = false) => {
  const less = (figure: 'waiting' | 'due') => (leavingOutDeleted ? sql` - gone.${sql.ref(figure)}` : sql``);
  const others = leavingOutDeleted ? sql` and account_id not in (${BEING_DELETED})` : sql``;
  const gone = leavingOutDeleted
    ? sql`
  from (
    select count(*) as waiting, coalesce(sum(case when next_attempt_at <= ${now} then 1 else 0 end), 0) as due
    from deliveries where status = 'pending' and lease_owner is null and account_id in (${BEING_DELETED})
  ) gone`
    : sql``;
  return sql<{
    waiting: number | string;
    due: number | string;
    oldest: number | string | null;
    leased: number | string;
    disabled: number | string;
  }>`
  select
    (select count(*) from deliveries where status = 'pending' and lease_owner is null)${less('waiting')} as waiting,
    (select count(*) from deliveries where status = 'pending' and lease_owner is null and next_attempt_at <= ${now})${less('due')} as due,
    (select next_attempt_at from deliveries where status = 'pending' and lease_owner is null and next_attempt_at is not null${others}
      order by next_attempt_at limit 1) as oldest,
    (select count(*) from deliveries where lease_owner is not null and status = 'pending') as leased,
    (select count(*) from webhooks where enabled = 0) as disabled${gone}`;
};

/** Every column of a delivery, in the order an INSERT ... SELECT writes them. */
const DELIVERY_COLUMNS = [
  'id', 'account_id', 'webhook_id', 'event_id', 'event', 'url', 'secret', 'body', 'status', 'attempt_count', 'auto_attempts',
  'next_attempt_at', 'lease_owner', 'lease_expires_at', 'created_at', 'updated_at',
] as const satisfies ReadonlyArray<keyof DeliveriesTable>;

/** Events of [since, until), by created_at (Unix ms). */
export interface EventWindow {
  since: number;
  until: number;
}

/**
 * The account's events created in the window, of these kinds, that have neither a pending nor a succeeded delivery to
 * the webhook, oldest first (the query, not run): what a recover sends again. `kinds` must not be empty.
 *
 * The check is a scalar subquery, not NOT EXISTS: PostgreSQL turns NOT EXISTS into an anti-join, and with the row
 * counts mis-estimated (tables not yet analysed, or a webhook that had no deliveries when they last were, until a
 * recover wrote thousands) it chose a nested loop that scanned all the webhook's deliveries once per event: 6.5 s for
 * 10,000 events, with the webhook locked. A scalar subquery stays a probe per event, and the index on (event_id,
 * webhook_id) answers it by both columns whatever the estimates (migration 0014).
 */
function missedEvents(db: QueryCreator<DB>, accountId: string, webhookId: string, kinds: readonly string[], w: EventWindow) {
  return db
    .selectFrom('events')
    .where('events.account_id', '=', accountId)
    .where('events.created_at', '>=', w.since)
    .where('events.created_at', '<', w.until)
    .where('events.kind', 'in', kinds)
    .where((eb) =>
      eb(
        eb
          .selectFrom('deliveries')
          .select(sql<number>`1`.as('one'))
          .whereRef('deliveries.event_id', '=', 'events.id')
          .where('deliveries.webhook_id', '=', webhookId)
          .where('deliveries.status', 'in', ['pending', 'succeeded'])
          .limit(1),
        'is',
        null,
      ),
    )
    .orderBy('events.created_at')
    .orderBy('events.id');
}

export const deliveriesRepository = {
  /** How many events missedEvents finds, counting no further than `limit`. */
  async countMissed(db: Conn, accountId: string, webhookId: string, kinds: readonly string[], w: EventWindow, limit: number) {
    const page = missedEvents(db, accountId, webhookId, kinds, w).select('events.id').limit(limit);
    const r = await db.selectFrom(page.as('m')).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    return Number(r.n);
  },
  /** The creation time of the first event missedEvents finds, or null. */
  async firstMissed(db: Conn, accountId: string, webhookId: string, kinds: readonly string[], w: EventWindow) {
    const r = await missedEvents(db, accountId, webhookId, kinds, w).select('events.created_at').limit(1).executeTakeFirst();
    return r ? Number(r.created_at) : null;
  },
  /**
   * A new pending delivery to the webhook, with its URL and secret as given, for each of the first `ids.length` events
   * missedEvents finds, in their order, each taking the next of `ids`; answers how many were written. The bodies are
   * copied by the statement, never read into the process (an escalation's carries its whole transcript). On
   * PostgreSQL the events are read FOR KEY SHARE (locks.ts keySharingRead): an erasure deleting one of them waits for
   * this commit and then deletes the delivery too, and an event an erasure has deleted, uncommitted, is waited for
   * and left out. Rows are locked in id order (events' ids sort by created_at), the order an erasure locks them in.
   */
  async insertRecovered(
    trx: Transaction<DB>,
    accountId: string,
    hook: Pick<WebhooksTable, 'id' | 'url' | 'secret'>,
    kinds: readonly string[],
    w: EventWindow,
    ids: readonly string[],
    at: { now: number; due: number },
  ) {
    if (ids.length === 0) return 0;
    const picked = keySharingRead(
      trx,
      missedEvents(trx, accountId, hook.id, kinds, w).select(['events.id', 'events.account_id', 'events.kind', 'events.payload', 'events.created_at']).limit(ids.length),
    );
    const n = sql<number>`row_number() over (order by e.created_at, e.id)`;
    // The n-th event takes the n-th id: a text array on PostgreSQL, a JSON array on SQLite (which has no arrays).
    const id =
      trx.getExecutor().adapter instanceof PostgresAdapter
        ? sql<string>`(cast(${ids} as text[]))[${n}]`
        : sql<string>`json_extract(${JSON.stringify(ids)}, '$[' || (${n} - 1) || ']')`;
    const r = await trx
      .insertInto('deliveries')
      .columns(DELIVERY_COLUMNS)
      .expression(
        sql`select ${id}, e.account_id, cast(${hook.id} as text), e.id, e.kind, cast(${hook.url} as text), cast(${hook.secret} as text), e.payload,
          'pending', 0, 0, cast(${at.due} as bigint), null, null, cast(${at.now} as bigint), cast(${at.now} as bigint)
          from (${picked}) e`,
      )
      .executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0);
  },
  /**
   * Finished deliveries (succeeded, failed, cancelled) made before `before`, with their attempts: at most `limit`,
   * oldest first, by the primary key (ids sort by creation time: `floor` is ids.ts idFloor). On PostgreSQL rows
   * another worker is pruning are skipped, not waited for. So is a finished delivery whose lease a manual retry holds:
   * deleted under it, the attempt was sent but not recorded and the retry answered 404 (a dead holder's lease is
   * swept, and the row pruned at a later run). Answers how many deliveries were deleted.
   */
  async pruneFinished(trx: Transaction<DB>, floor: string, before: number, limit: number) {
    const q = trx
      .selectFrom('deliveries')
      .select('id')
      .where('id', '<', floor)
      .where('created_at', '<', before)
      .where('status', '<>', 'pending')
      .where('lease_owner', 'is', null)
      .orderBy('id')
      .limit(limit);
    const ids = (await claimingRead(trx, q).execute()).map((r) => r.id);
    await deliveriesRepository.deleteWithAttempts(trx, ids);
    return ids.length;
  },
  /** Deletes these deliveries and their attempts. */
  async deleteWithAttempts(db: Conn, ids: readonly string[]) {
    if (ids.length === 0) return;
    await db.deleteFrom('delivery_attempts').where('delivery_id', 'in', ids).execute();
    await db.deleteFrom('deliveries').where('id', 'in', ids).execute();
  },
  /**
   * Emitted events made before `before` (their deliveries carry their bodies), as pruneFinished, except those with
   * a delivery still pending: erasing a conversation finds its deliveries through its events (deliveries_event_webhook), and
   * one still retrying past the retention would otherwise be missed and sent after the erasure.
   */
  async pruneEvents(trx: Transaction<DB>, floor: string, before: number, limit: number) {
    const q = trx
      .selectFrom('events')
      .select('id')
      .where('id', '<', floor)
      .where('created_at', '<', before)
      .where(({ not, exists, selectFrom }) =>
        not(exists(selectFrom('deliveries').select('deliveries.id').whereRef('deliveries.event_id', '=', 'events.id').where('deliveries.status', '=', 'pending'))),
      )
      .orderBy('id')
      .limit(limit);
    const ids = (await claimingRead(trx, q).execute()).map((r) => r.id);
    if (ids.length) await trx.deleteFrom('events').where('id', 'in', ids).execute();
    return ids.length;
  },
  /** The insert (not run: the fan-out may run it in a larger statement). */
  insertQuery(db: QueryCreator<DB>, rows: DeliveriesTable[]) {
    return db.insertInto('deliveries').values(rows);
  },
  /**
   * PostgreSQL (not run): the pending deliveries of the events that `emitted`, a WITH query of the same statement,
   * inserted (returning `id`, `kind`, `payload`, `created_at`), one per event and webhook of `subscribers` (the
   * account's enabled ones, `enabled` above: the query the caller counts them with) subscribed to its kind, each
   * with the webhook's URL and secret and the event's body, as the fan-out writes them. Each takes one of `ids`.
   * Parameters are cast: in an INSERT ... SELECT PostgreSQL types a bare one text.
   */
  insertSubscribed(
    db: QueryCreator<DB>,
    accountId: string,
    subscribers: ReturnType<typeof webhooksRepository.enabled>,
    emitted: string,
    ids: readonly string[],
    at: { now: number; delayMs: number },
  ) {
    return db
      .insertInto('deliveries')
      .columns(DELIVERY_COLUMNS)
      .expression(
        sql`select (${ids}::text[])[row_number() over ()], ${accountId}::text, w.id, e.id, e.kind, w.url, w.secret, e.payload, 'pending', 0, 0,
          e.created_at + ${at.delayMs}::bigint, null, null, ${at.now}::bigint, ${at.now}::bigint
          from ${sql.table(emitted)} e
          join (${subscribers}) w on w.events::jsonb @> jsonb_build_array(e.kind)`,
      );
  },
  /**
   * Cancels the webhook's pending deliveries that no one is attempting. One whose attempt is under way (leased) is
   * left to its holder, which records the outcome and, the webhook being disabled or gone, cancels rather than
   * reschedules it. Taking those rows too made this statement and a worker's record of a batch lock the same rows
   * in different orders: deadlocks on PostgreSQL (a 500 to DELETE /webhooks/:id, or a whole batch of records lost).
   */
  async cancelPending(db: Conn, accountId: string, webhookId: string, now: number) {
    const r = await db
      .updateTable('deliveries')
      .set({ status: 'cancelled', next_attempt_at: null, updated_at: now })
      .where('account_id', '=', accountId)
      .where('webhook_id', '=', webhookId)
      .where('status', '=', 'pending')
      .where('lease_owner', 'is', null)
      .executeTakeFirst();
    return Number(r.numUpdatedRows);
  },
  find(db: Conn, accountId: string, webhookId: string, id: string) {
    return db
      .selectFrom('deliveries')
      .selectAll()
      .where('account_id', '=', accountId)
      .where('webhook_id', '=', webhookId)
      .where('id', '=', id)
      .executeTakeFirst();
  },
  async list(db: Conn, accountId: string, webhookId: string, f: { status: string; limit: number; offset: number }) {
    let q = db.selectFrom('deliveries').where('account_id', '=', accountId).where('webhook_id', '=', webhookId);
    if (f.status !== 'all') q = q.where('status', '=', f.status as DeliveryStatus);
    const rows = await q
      .select(['id', 'event', 'status', 'next_attempt_at', 'created_at', totalColumn(q)])
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .limit(pageLimit(f.limit))
      .offset(f.offset)
      .execute();
    return { rows, total: await totalOf(rows[0]?.total, f.offset, countAlone(q)) };
  },
  /**
   * The queue as every node sees it, for the metrics endpoint: one statement, each figure read through an index.
   * Pending deliveries nobody holds (`waiting`, of which `due` are past their time and `oldest` the earliest time)
   * are exactly the partial index deliveries_due, so its predicate is written out literally, as in the claim, for
   * both planners to match it, and the earliest is its first entry (an ORDER BY ... LIMIT 1: PostgreSQL planned
   * min() as a walk of the whole index); the held ones (an attempt under way, or a dead worker's lease not yet expired) are
   * within deliveries_leased. Counting walks the index entries, so the cost grows with the backlog, not with the
   * table's history. Webhooks have no index on `enabled`: a table of at most WEBHOOK_MAX_PER_ACCOUNT rows per
   * account is scanned. The waiting ones of accounts being deleted are left out (no worker sends them: an alert on
   * `due` would fire for nothing while a deletion runs, or for good after one cut short), by a second statement when
   * there are any (queueFiguresQuery's `leavingOutDeleted`); the look for them is a scan of accounts, a row per account.
   */
  async queueFigures(db: Conn, now: number) {
    // Almost always no account is being deleted: then the statement is the one without the subtraction.
    const deleting = await db.selectFrom('accounts').select('id').where('deletion_started_at', 'is not', null).limit(1).executeTakeFirst();
    const { rows } = await queueFiguresQuery(now, deleting !== undefined).execute(db);
    const r = rows[0]!;
    return {
      waiting: Number(r.waiting),
      due: Number(r.due),
      /** The earliest next attempt time among the waiting deliveries (ms), null when none waits. */
      oldestNextAttemptAt: r.oldest === null ? null : Number(r.oldest),
      leased: Number(r.leased),
      disabledWebhooks: Number(r.disabled),
    };
  },
  /** Attempts of the given deliveries (already scoped to the account by the caller's delivery query). */
  async attemptsOf(db: Conn, deliveryIds: string[]): Promise<DeliveryAttemptsTable[]> {
    if (deliveryIds.length === 0) return [];
    return db
      .selectFrom('delivery_attempts')
      .selectAll()
      .where('delivery_id', 'in', deliveryIds)
      .orderBy('delivery_id')
      .orderBy('attempt')
      .execute();
  },
};
