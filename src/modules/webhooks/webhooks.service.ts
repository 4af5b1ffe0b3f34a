import type { Kysely } from 'kysely';
import type { Config } from '../../config.js';
import type { DB, DeliveriesTable, DeliveryAttemptsTable, WebhooksTable } from '../../db/schema.js';
import { ApiError, invalidRequest, notFound, rejectBlank } from '../../http/errors.js';
import { nextUpdateTime, toIso, type Clock } from '../../lib/clock.js';
import { idFloor, newId } from '../../lib/ids.js';
import { instantField } from '../../http/time-range.js';
import { readSnapshot } from '../../db/snapshot.js';
import { afterCommit, outsideUnitOfWork, writeTransaction } from '../../db/unit-of-work.js';
import { accountsRepository } from '../accounts/accounts.repository.js';
import type { DeliveryEngine } from './delivery.js';
import type { EventFanout } from './events.js';
import { initialDelay } from './retry.js';
import { assertPublicHost, SsrfError, urlTextProblem, validateWebhookUrl } from './ssrf.js';
import { deliveriesRepository, webhooksRepository as repo } from './webhooks.repository.js';
import {
  EVENT_ALIASES,
  RECOVER_MAX,
  SUBSCRIBABLE_EVENTS,
  type CreateWebhookBody,
  type ListDeliveriesQuery,
  type ListWebhooksQuery,
  type RecoverWebhookBody,
  type UpdateWebhookBody,
} from './webhooks.schemas.js';

export const DISABLED_BY_REQUEST = 'disabled by request';

const toRecord = (r: WebhooksTable) => ({
  id: r.id,
  url: r.url,
  events: JSON.parse(r.events) as string[],
  enabled: r.enabled === 1,
  disabledReason: r.enabled === 1 ? null : r.disabled_reason,
  createdAt: toIso(r.created_at),
  updatedAt: toIso(r.updated_at),
});

const toAttempt = (a: DeliveryAttemptsTable) => ({
  attempt: a.attempt,
  kind: a.kind,
  at: toIso(a.at),
  statusCode: a.status_code,
  durationMs: a.duration_ms,
  error: a.error,
});

/** `conversation.escalated` → `escalation`; duplicates dropped (order kept); anything unknown is a 400 naming the valid kinds. */
export function normalizeEvents(events: string[]): string[] {
  const out: string[] = [];
  events.forEach((raw, i) => {
    const kind = knownEventKind(raw, `body.events[${i}]`);
    if (!out.includes(kind)) out.push(kind);
  });
  return out;
}

/** What a 400 about an event kind lists. */
export const VALID_EVENT_KINDS = `valid kinds: ${SUBSCRIBABLE_EVENTS.join(', ')} (conversation.escalated is accepted as escalation)`;

/** An event kind as webhooks and the feed name it (the alias resolved), or a 400 naming `field`. */
export function knownEventKind(raw: string, field: string): string {
  const kind = EVENT_ALIASES[raw] ?? raw;
  if (!(SUBSCRIBABLE_EVENTS as readonly string[]).includes(kind)) throw invalidRequest(`${field} ${JSON.stringify(raw)} is not a known event kind; ${VALID_EVENT_KINDS}`);
  return kind;
}

/**
 * Fan-out of events emitted together, inside the emitting transaction: per event, one delivery per webhook of
 * the account that is enabled and subscribed at that moment, each freezing the URL, secret and body it will send.
 */
export function createFanout(opts: {
  clock: Clock;
  retryDelaysMs: readonly number[];
  /** Wakes this process's worker. */
  onCreated?: () => void;
  /**
   * PostgreSQL: tells workers in other processes of new deliveries (db/notify.ts `createAnnouncer`), called once the
   * emitting transaction has committed.
   */
  announce?: () => void;
}): EventFanout {
  return {
    subscribers: (db, accountId) => repo.enabled(db, accountId),
    async deliver(conn, accountId, events, hooks) {
      const now = opts.clock.now();
      const rows: DeliveriesTable[] = [];
      const subscribed = hooks.map((h) => ({ h, kinds: new Set(JSON.parse(h.events) as string[]) }));
      for (const event of events) {
        for (const { h, kinds } of subscribed) {
          if (!kinds.has(event.kind)) continue;
          rows.push({
            id: newId('dlv', now),
            account_id: accountId,
            webhook_id: h.id,
            event_id: event.id,
            event: event.kind,
            url: h.url,
            secret: h.secret,
            body: event.body,
            status: 'pending',
            attempt_count: 0,
            auto_attempts: 0,
            next_attempt_at: event.createdAt + initialDelay(opts.retryDelaysMs),
            lease_owner: null,
            lease_expires_at: null,
            created_at: now,
            updated_at: now,
          });
        }
      }
      if (rows.length === 0) return;
      await deliveriesRepository.insertQuery(conn, rows).execute();
      opts.onCreated?.();
      // After the commit, not inside the transaction: PostgreSQL serialises the commits of every transaction that
      // ran NOTIFY (a cluster-wide lock held through the commit's WAL flush), so with pg_notify in each emitting
      // transaction concurrent writes committed one fsync at a time (BENCHMARKS.md, webhooks on PostgreSQL). A
      // transaction not run by writeTransaction has no such moment; its deliveries are found at the next poll.
      if (opts.announce) afterCommit(conn, opts.announce);
    },
    deliverWith(db, accountId, emitted, ids, now) {
      return deliveriesRepository.insertSubscribed(db, accountId, repo.enabled(db, accountId), emitted, ids, { now, delayMs: initialDelay(opts.retryDelaysMs) });
    },
    delivered() {
      opts.onCreated?.();
      opts.announce?.();
    },
  };
}

/**
 * The window of a recover, [since, until) in Unix ms, refused naming the field: each side an ISO 8601 instant, neither
 * in the future, since before until, and since no further back than `retentionMs` (0: no bound), past which events
 * have been deleted, so a window reaching there would quietly recover less than it says.
 */
export function recoverWindow(body: RecoverWebhookBody, now: number, retentionMs: number) {
  const since = instantField('body.since', body.since);
  const until = body.until === undefined ? now : instantField('body.until', body.until);
  if (since > now) throw invalidRequest(`body.since must not be in the future (now is ${toIso(now)})`);
  if (until > now) throw invalidRequest(`body.until must not be in the future (now is ${toIso(now)}); leave it out to mean now`);
  if (since >= until) throw invalidRequest('body.since must be earlier than body.until, counted in whole milliseconds (since is inclusive, until is exclusive)');
  if (retentionMs > 0 && since < now - retentionMs) {
    throw invalidRequest(`body.since must be at or after ${toIso(now - retentionMs)}: events older than DELIVERY_RETENTION have been deleted and cannot be recovered`);
  }
  return { since, until };
}

export function createWebhooksService(
  db: Kysely<DB>,
  clock: Clock,
  config: Pick<Config, 'webhookAllowPrivateUrls' | 'webhookMaxPerAccount' | 'webhookRetryDelaysMs' | 'deliveryRetentionMs' | 'webhookSecretOverlapMs'>,
  engine: DeliveryEngine,
  /** Once deliveries made outside an emit have committed: wakes the workers (the fan-out's `delivered`). */
  delivered: () => void = () => engine.kick(),
) {
  const allowPrivate = config.webhookAllowPrivateUrls;

  /**
   * Syntax, then (unless private URLs are allowed) every address the host resolves to must be public.
   * A host that does not resolve is refused too: at registration that is far more often a typo than a
   * name about to be created, and the caller sees it at once instead of as failed deliveries later. The two
   * cases read alike (ssrf.ts NOT_PUBLIC), so the account cannot probe which internal names exist.
   */
  async function checkUrl(url: string) {
    const textProblem = urlTextProblem(url);
    if (textProblem) throw invalidRequest(`body.${textProblem}`);
    const v = validateWebhookUrl(url, { allowPrivate });
    if (!v.ok) throw invalidRequest(`body.${v.reason}`);
    try {
      await assertPublicHost(v.url.hostname, { allowPrivate });
    } catch (err) {
      if (!(err instanceof SsrfError)) throw err;
      throw invalidRequest(`body.url is not allowed: ${err.message} (webhook URLs must be publicly reachable)`);
    }
  }

  async function findOr404(accountId: string, id: string) {
    const row = await repo.find(db, accountId, id);
    if (!row) throw notFound('webhook', id);
    return row;
  }

  async function deliveryDetail(accountId: string, webhookId: string, id: string) {
    const [d, attempts] = await readSnapshot(db, async (trx) => {
      const row = await deliveriesRepository.find(trx, accountId, webhookId, id);
      return [row, row ? await deliveriesRepository.attemptsOf(trx, [row.id]) : []] as const;
    });
    if (!d) throw notFound('delivery', id);
    return {
      id: d.id,
      webhookId: d.webhook_id,
      eventId: d.event_id,
      event: d.event,
      status: d.status,
      attempts: attempts.map((a) => ({ ...toAttempt(a), responseBody: a.response_body })),
      nextAttemptAt: d.status === 'pending' && d.next_attempt_at !== null ? toIso(d.next_attempt_at) : null,
      createdAt: toIso(d.created_at),
      updatedAt: toIso(d.updated_at),
      body: d.body,
    };
  }

  /** Rows deleted by pruneHistory since start (the metrics endpoint reads them). */
  const prunedTotal = { deliveries: 0, events: 0 };
  return {
    pruned: prunedTotal as Readonly<typeof prunedTotal>,
    /**
     * Deletes finished deliveries (with their attempts) and emitted events made before `before`, a batch of each at a
     * time, in short transactions so that deliveries and chat messages are not held up. Pending deliveries stay,
     * however old. Answers how many rows of each went.
     */
    async pruneHistory(before: number, signal?: AbortSignal, batch = 1_000) {
      const pruned = { deliveries: 0, events: 0 };
      for (const [kind, prune, floor] of [
        ['deliveries', deliveriesRepository.pruneFinished, idFloor('dlv', before)],
        ['events', deliveriesRepository.pruneEvents, idFloor('evt', before)],
      ] as const) {
        for (;;) {
          if (signal?.aborted) return pruned;
          const n = await writeTransaction(db, (trx) => prune(trx, floor, before, batch));
          pruned[kind] += n;
          prunedTotal[kind] += n;
          if (n < batch) break;
        }
      }
      return pruned;
    },

    async list(accountId: string, q: ListWebhooksQuery) {
      const { rows, total } = await repo.list(db, accountId, q);
      return { webhooks: rows.map(toRecord), total, limit: q.limit, offset: q.offset };
    },

    async get(accountId: string, id: string) {
      return toRecord(await findOr404(accountId, id));
    },

    async create(accountId: string, body: CreateWebhookBody) {
      rejectBlank('body.secret', body.secret);
      const events = normalizeEvents(body.events);
      await checkUrl(body.url);
      const now = clock.now();
      const row: WebhooksTable = {
        id: newId('wh', now),
        account_id: accountId,
        url: body.url,
        events: JSON.stringify(events),
        secret: body.secret,
        previous_secret: null,
        secret_changed_at: null,
        enabled: 1,
        disabled_reason: null,
        created_at: now,
        updated_at: now,
      };
      await writeTransaction(db, async (trx) => {
        // Every event writes one delivery per subscribed webhook: the cap bounds what one message costs. Counted
        // with the account row locked, so two creates at once cannot both take the last place.
        await accountsRepository.lockAccount(trx, accountId);
        const max = config.webhookMaxPerAccount;
        if ((await repo.count(trx, accountId)) >= max) {
          throw invalidRequest(`an account may have at most ${max} webhooks (enabled or disabled): delete one before creating another`);
        }
        await repo.insert(trx, row);
      });
      return toRecord(row);
    },

    async update(accountId: string, id: string, body: UpdateWebhookBody) {
      rejectBlank('body.secret', body.secret);
      const events = body.events ? normalizeEvents(body.events) : undefined;
      if (body.url !== undefined) await checkUrl(body.url);
      const row = await writeTransaction(db, async (trx) => {
        const current = await repo.find(trx, accountId, id, true);
        if (!current) throw notFound('webhook', id);
        const now = nextUpdateTime(clock, current.updated_at);
        const patch: Partial<WebhooksTable> = { updated_at: now };
        if (body.url !== undefined) patch.url = body.url;
        if (events) patch.events = JSON.stringify(events);
        if (body.secret !== undefined && body.secret !== current.secret) {
          patch.secret = body.secret;
          // The receiver cannot switch at the very moment of this commit: for the overlap, attempts are signed with the
          // secret replaced here too (delivery.ts), so one still holding it keeps verifying. Only the one just replaced:
          // a second change within the overlap ends the first one's.
          patch.previous_secret = config.webhookSecretOverlapMs > 0 ? current.secret : null;
          patch.secret_changed_at = now;
        }
        if (body.enabled === true) {
          patch.enabled = 1;
          patch.disabled_reason = null;
        } else if (body.enabled === false && current.enabled === 1) {
          patch.enabled = 0;
          patch.disabled_reason = DISABLED_BY_REQUEST;
        }
        await repo.update(trx, accountId, id, patch);
        // Deliveries stop at once: pending ones are cancelled in the same transaction as the disable.
        if (patch.enabled === 0) await deliveriesRepository.cancelPending(trx, accountId, id, now);
        return { ...current, ...patch } as WebhooksTable;
      });
      return toRecord(row);
    },

    async delete(accountId: string, id: string) {
      const deleted = await writeTransaction(db, async (trx) => {
        const ok = await repo.delete(trx, accountId, id);
        if (ok) await deliveriesRepository.cancelPending(trx, accountId, id, clock.now());
        return ok;
      });
      if (!deleted) throw notFound('webhook', id);
      return { deleted: true };
    },

    /** Sends a `test` event to this webhook now, whatever it subscribes to, and answers the recorded delivery. */
    async test(accountId: string, id: string, message?: string) {
      const hook = await findOr404(accountId, id);
      const now = clock.now();
      const body = JSON.stringify({ event: 'test', timestamp: toIso(now), data: { message: message ?? 'This is a test delivery from Parley.' } });
      const deliveryId = newId('dlv', now);
      // The row alone does not carry out the request: its Idempotency-Key is marked with the attempt's record
      // (delivery.ts), so a node that dies before sending leaves the key free and a retry sends.
      await outsideUnitOfWork(() => writeTransaction(db, async (trx) => {
        // The deliveries table has no foreign key: a deletion of the webhook or of its account (`parley accounts
        // delete`) committing since the read above would leave a delivery that nobody owns, sent after the deletion.
        // Read again and kept until this insert commits; a deletion waits for it (and then deletes the delivery too).
        if (!(await repo.exists(trx, accountId, id))) throw notFound('webhook', id);
        await deliveriesRepository.insertQuery(trx, [
          {
            id: deliveryId,
            account_id: accountId,
            webhook_id: hook.id,
            event_id: null,
            event: 'test',
            url: hook.url,
            secret: hook.secret,
            body,
            status: 'pending',
            attempt_count: 0,
            auto_attempts: 0,
            next_attempt_at: null, // never due: only this request sends it
            lease_owner: null,
            lease_expires_at: null,
            created_at: now,
            updated_at: now,
          },
        ]).execute();
      }));
      const lease = await engine.acquire(deliveryId);
      if (!lease) throw new ApiError('SERVER_ERROR', 'could not lease the test delivery');
      await engine.attempt(lease.d, 'test', lease.leaseOwner);
      return deliveryDetail(accountId, hook.id, deliveryId);
    },

    /**
     * A new delivery to this webhook, now, of every event of the window it missed: each event of a kind it subscribes
     * to now with no pending and no succeeded delivery to it (cancelled and failed ones, events of the time it was
     * disabled, which made none). Each takes the webhook's current URL and secret, the event's stored body, a new id and
     * the whole retry schedule. At most RECOVER_MAX per call (one transaction: on SQLite it holds the only write lock
     * while it runs), oldest first; `next` is where the following call starts. A second call creates nothing new.
     */
    async recover(accountId: string, id: string, body: RecoverWebhookBody) {
      const w = recoverWindow(body, clock.now(), config.deliveryRetentionMs);
      const { recovered, next } = await writeTransaction(db, async (trx) => {
        // Locked until the commit (PostgreSQL): a second recover waits and then finds these deliveries pending, so it
        // makes none again; a disable or delete waits and then cancels them; a URL or secret change either lands
        // before (and is used) or after (like any pending delivery's, it is not). SQLite has one writer.
        const hook = await repo.find(trx, accountId, id, true);
        if (!hook) throw notFound('webhook', id);
        if (hook.enabled !== 1) {
          throw invalidRequest(`webhook ${id} is disabled; re-enable it (PUT enabled: true) before recovering its deliveries`);
        }
        const kinds = JSON.parse(hook.events) as string[];
        if (kinds.length === 0) return { recovered: 0, next: null };
        const count = await deliveriesRepository.countMissed(trx, accountId, id, kinds, w, RECOVER_MAX);
        const now = clock.now();
        // Made in one millisecond, delivery ids count up (ids.ts): the n-th event's delivery sorts n-th.
        const ids = Array.from({ length: count }, () => newId('dlv', now));
        const recovered = await deliveriesRepository.insertRecovered(trx, accountId, hook, kinds, w, ids, { now, due: now + initialDelay(config.webhookRetryDelaysMs) });
        // What is left starts at the first event still missed: events of the last millisecond taken now have a pending
        // delivery, so starting there again repeats none of them.
        const first = count === RECOVER_MAX ? await deliveriesRepository.firstMissed(trx, accountId, id, kinds, w) : null;
        if (recovered > 0) afterCommit(trx, delivered);
        return { recovered, next: first === null ? null : toIso(first) };
      });
      return { recovered, since: toIso(w.since), until: toIso(w.until), next };
    },

    async listDeliveries(accountId: string, webhookId: string, q: ListDeliveriesQuery) {
      await findOr404(accountId, webhookId);
      const f = { status: q.status ?? 'all', limit: q.limit, offset: q.offset };
      const { rows, total, attempts } = await readSnapshot(db, async (trx) => {
        const page = await deliveriesRepository.list(trx, accountId, webhookId, f);
        const attempts = await deliveriesRepository.attemptsOf(
          trx,
          page.rows.map((r) => r.id),
        );
        return { ...page, attempts };
      });
      const byDelivery = new Map<string, ReturnType<typeof toAttempt>[]>();
      for (const a of attempts) {
        const list = byDelivery.get(a.delivery_id) ?? [];
        list.push(toAttempt(a));
        byDelivery.set(a.delivery_id, list);
      }
      return {
        deliveries: rows.map((r) => ({
          id: r.id,
          event: r.event,
          status: r.status,
          attempts: byDelivery.get(r.id) ?? [],
          nextAttemptAt: r.status === 'pending' && r.next_attempt_at !== null ? toIso(r.next_attempt_at) : null,
          createdAt: toIso(r.created_at),
        })),
        total,
        limit: f.limit,
        offset: f.offset,
      };
    },

    async getDelivery(accountId: string, webhookId: string, id: string) {
      await findOr404(accountId, webhookId);
      return deliveryDetail(accountId, webhookId, id);
    },

    /**
     * A fresh attempt now, recorded as a `manual` attempt. It does not count toward the automatic schedule or
     * the disable rule; a 2xx marks the delivery succeeded (also one that had failed or was cancelled).
     */
    async retry(accountId: string, webhookId: string, id: string) {
      const hook = await findOr404(accountId, webhookId);
      const d = await deliveriesRepository.find(db, accountId, webhookId, id);
      if (!d) throw notFound('delivery', id);
      if (hook.enabled !== 1) {
        throw invalidRequest(`webhook ${webhookId} is disabled; re-enable it (PUT enabled: true) before retrying its deliveries`);
      }
      const lease = await engine.acquire(id);
      if (!lease) {
        // Deleted since the read above (its conversation erased, or pruned by DELIVERY_RETENTION): not found, not busy.
        if (!(await deliveriesRepository.find(db, accountId, webhookId, id))) throw notFound('delivery', id);
        throw invalidRequest(`delivery ${id} has an attempt in progress; retry it when that attempt has finished`);
      }
      await engine.attempt(lease.d, 'manual', lease.leaseOwner);
      return deliveryDetail(accountId, webhookId, id);
    },
  };
}

export type WebhooksService = ReturnType<typeof createWebhooksService>;
