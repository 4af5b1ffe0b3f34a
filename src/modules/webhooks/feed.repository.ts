import { sql, type Kysely, type Transaction } from 'kysely';
import { countAlone, pageLimit, totalColumn, totalOf } from '../../db/pagination.js';
import type { DB } from '../../db/schema.js';
import type { TimeRange } from '../../http/time-range.js';

type Conn = Kysely<DB> | Transaction<DB>;

export interface FeedFilter extends TimeRange {
  /** Kinds to keep (any of them), already checked and distinct; undefined for all. */
  kinds?: readonly string[] | undefined;
  limit: number;
  offset: number;
}

/** The account's events in the range, of one kind when `kind` is given. */
const eventsIn = (db: Conn, accountId: string, f: TimeRange, kind?: string) => {
  let q = db.selectFrom('events').where('events.account_id', '=', accountId);
  if (kind !== undefined) q = q.where('events.kind', '=', kind);
  if (f.from !== undefined) q = q.where('events.created_at', '>=', f.from);
  if (f.to !== undefined) q = q.where('events.created_at', '<', f.to);
  return q;
};

/**
 * The ids of one page, newest first (created_at desc, id desc), from the indexes of migration 0013 alone, in their
 * order: a deep offset skips index entries instead of reading (and sorting) the events it passes. Every kind:
 * events_account_created_id; one kind: that kind's part of events_account_kind_created. Several kinds: each kind's
 * first offset + limit entries, merged. With `kind IN (…)` the planners walked the account's whole index and looked
 * up each row's kind (a rare kind among a flood of conversation.message), or read every event of the kinds and
 * sorted them. test/modules/webhooks/events-api.test.ts checks the plans on both dialects.
 */
export function feedPageIds(db: Conn, accountId: string, f: FeedFilter) {
  const walk = (kind?: string) => eventsIn(db, accountId, f, kind).select(['events.id', 'events.created_at']).orderBy('events.created_at', 'desc').orderBy('events.id', 'desc');
  if (!f.kinds || f.kinds.length === 1) return walk(f.kinds?.[0]).limit(pageLimit(f.limit)).offset(f.offset);
  // Bound as a bigint: an offset may be any safe integer, past PostgreSQL's integer.
  const reach = sql<number>`cast(${f.offset + f.limit} as bigint)`;
  // Each walk is a subquery of its own: SQLite takes no ORDER BY or LIMIT on a bare member of a UNION.
  const [first, ...rest] = f.kinds.map((kind, i) => db.selectFrom(walk(kind).limit(reach).as(`k${i}`)).select(['id', 'created_at']));
  const merged = rest.reduce((all, q) => all.unionAll(q), first!);
  return db.selectFrom(merged.as('merged')).select(['id', 'created_at']).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(pageLimit(f.limit)).offset(f.offset);
}

export const feedRepository = {
  /** One page of the account's events (id and stored body) and how many the filter matches. */
  async page(db: Conn, accountId: string, f: FeedFilter) {
    let counted = eventsIn(db, accountId, f);
    if (f.kinds) counted = counted.where('events.kind', 'in', f.kinds);
    const page = feedPageIds(db, accountId, f);
    const rows = await db
      .selectFrom('events')
      .select(['id', 'payload', totalColumn(counted)])
      .where('account_id', '=', accountId)
      .where('id', 'in', db.selectFrom(page.as('page')).select('page.id'))
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
    return { rows, total: await totalOf(rows[0]?.total, f.offset, countAlone(counted)) };
  },

  find(db: Conn, accountId: string, id: string) {
    return db.selectFrom('events').select(['id', 'payload']).where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
  },
};
