import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, RundownQuotesTable, RundownsTable } from '../../db/schema.js';
import { keySharingRead, lockingRead } from '../../db/locks.js';
import { newestFirstPage } from '../../db/pagination.js';

/** Ids per IN list or rows per insert: well under SQLite's and PostgreSQL's bound-value limits. */
const CHUNK = 500;

function chunks<T>(list: readonly T[]): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < list.length; i += CHUNK) out.push(list.slice(i, i + CHUNK));
  return out;
}

type Conn = Kysely<DB> | Transaction<DB>;

/** A closed period [from, to) in Unix ms: a rundown always has both ends. */
export interface Period {
  from: number;
  to: number;
}

export const rundownsRepository = {
  async list(db: Conn, accountId: string, f: { trigger: 'schedule' | 'manual' | 'all'; limit: number; offset: number }) {
    let q = db.selectFrom('rundowns').where('account_id', '=', accountId);
    if (f.trigger !== 'all') q = q.where('trigger', '=', f.trigger);
    return newestFirstPage(q, f);
  },
  /** `lock`: the read of a rewording (erasure), locked until its transaction ends (locks.ts). */
  find(db: Conn, accountId: string, id: string, lock = false) {
    const q = db.selectFrom('rundowns').selectAll().where('account_id', '=', accountId).where('id', '=', id);
    return (lock ? lockingRead(db, q) : q).executeTakeFirst();
  },
  /**
   * Inserts unless a scheduled rundown of the same account and window exists (the partial unique index):
   * true when this call inserted. On PostgreSQL a concurrent inserter of the same window waits for the first
   * transaction and then inserts nothing.
   */
  async insert(db: Conn, row: RundownsTable) {
    const r = await db.insertInto('rundowns').values(row).onConflict((oc) => oc.doNothing()).returning('id').executeTakeFirst();
    return r !== undefined;
  },
  /** Whether the account's scheduled rundown of exactly this window exists (one probe of rundowns_scheduled_window). */
  async scheduledExists(db: Conn, accountId: string, p: Period) {
    const r = await db
      .selectFrom('rundowns')
      .select('id')
      .where('account_id', '=', accountId)
      .where('trigger', '=', sql.lit('schedule'))
      .where('from_ts', '=', p.from)
      .where('to_ts', '=', p.to)
      .executeTakeFirst();
    return r !== undefined;
  },
  /**
   * Takes the claim on the account's scheduled window for `holder` until `expiresAt`, unless another run holds one that
   * has not expired at `now`: true when this call took it. One statement: an insert, or the takeover of an expired
   * claim (a worker that died while building), which on PostgreSQL waits for a concurrent claimer's commit and then
   * sees its claim.
   */
  async claimWindow(db: Conn, accountId: string, p: Period, holder: string, now: number, expiresAt: number) {
    const r = await db
      .insertInto('rundown_claims')
      .values({ account_id: accountId, from_ts: p.from, to_ts: p.to, holder, expires_at: expiresAt })
      .onConflict((oc) =>
        oc
          .columns(['account_id', 'from_ts', 'to_ts'])
          .doUpdateSet((eb) => ({ holder: eb.ref('excluded.holder'), expires_at: eb.ref('excluded.expires_at') }))
          .where('rundown_claims.expires_at', '<=', now),
      )
      .returning('holder')
      .executeTakeFirst();
    return r !== undefined;
  },
  /**
   * Drops the window's claim. Without `holder`, whoever holds it: the window's rundown is stored (or found stored) in
   * this transaction, so no claim is needed. With it, only that run's: a build that failed gives its window back at once
   * rather than at expiry, and a claim taken over since is left alone.
   */
  async dropClaim(db: Conn, accountId: string, p: Period, holder?: string) {
    let q = db.deleteFrom('rundown_claims').where('account_id', '=', accountId).where('from_ts', '=', p.from).where('to_ts', '=', p.to);
    if (holder !== undefined) q = q.where('holder', '=', holder);
    await q.execute();
  },
  /**
   * Expired claims, which mean what no claim means: removed so that one whose window stopped being looked at (it left
   * RUNDOWN_BACKFILL's reach, or a worker without claims made it) does not stay for good. The table holds only the
   * claims of digests being built, so the scan is of a handful of rows.
   */
  async pruneClaims(db: Conn, now: number) {
    await db.deleteFrom('rundown_claims').where('expires_at', '<=', now).execute();
  },
  async setBody(db: Conn, accountId: string, id: string, body: string) {
    await db.updateTable('rundowns').set({ body }).where('account_id', '=', accountId).where('id', '=', id).execute();
  },
  /**
   * Customer messages sent in the period whose reply (the next message of the conversation, an assistant one)
   * cited no source and was not a workflow's reply, with the conversation's escalation time. The chat stores a question and its reply in
   * one transaction with the same timestamp, so the pair never straddles the period's edges and the window
   * function may run over the period's messages alone (the account/created_at index).
   */
  uncitedQuestions(db: Conn, accountId: string, p: Period) {
    const inPeriod = db
      .selectFrom('messages')
      .select([
        'id',
        'conversation_id',
        'role',
        'content',
        'created_at',
        sql<string | null>`lead(role) over (partition by conversation_id order by created_at, seq, id)`.as('next_role'),
        sql<string | null>`lead(sources) over (partition by conversation_id order by created_at, seq, id)`.as('next_sources'),
        sql<string | null>`lead(workflow_id) over (partition by conversation_id order by created_at, seq, id)`.as('next_workflow'),
      ])
      .where('account_id', '=', accountId)
      .where('created_at', '>=', p.from)
      .where('created_at', '<', p.to);
    return db
      .selectFrom(inPeriod.as('m'))
      .innerJoin('conversations as c', 'c.id', 'm.conversation_id')
      .select(['m.id', 'm.conversation_id', 'm.content', 'm.created_at', 'c.escalated_at'])
      .where('c.account_id', '=', accountId)
      .where('m.role', '=', 'customer')
      .where('m.next_role', '=', 'assistant')
      // Assistant messages store their sources as a JSON array; no citation is exactly '[]'.
      .where((eb) => eb.or([eb('m.next_sources', 'is', null), eb('m.next_sources', '=', '[]')]))
      // A workflow's reply cites nothing but handled the message.
      .where('m.next_workflow', 'is', null)
      .execute();
  },
  /**
   * Which of these conversations of the account still exist, held until the transaction ends so that none of them
   * can be erased before the rundown that quotes them (and its quote rows) commits; the erasure then waits and finds
   * the rows (keySharingRead).
   */
  async holdConversations(db: Conn, accountId: string, ids: readonly string[]) {
    const present = new Set<string>();
    for (const chunk of chunks([...ids].sort())) {
      const q = db.selectFrom('conversations').select('id').where('account_id', '=', accountId).where('id', 'in', chunk).orderBy('id');
      for (const r of await keySharingRead(db, q).execute()) present.add(r.id);
    }
    return present;
  },
  async insertQuotes(db: Conn, rows: readonly RundownQuotesTable[]) {
    for (const chunk of chunks(rows)) await db.insertInto('rundown_quotes').values(chunk).execute();
  },
  /** The unanswered groups (rundown, position) that recorded a message of this conversation. */
  quotesOf(db: Conn, accountId: string, conversationId: string) {
    return db
      .selectFrom('rundown_quotes')
      .select(['rundown_id', 'position'])
      .distinct()
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .execute();
  },
  /** The wordings still behind one group: its recorded messages that exist, but those of the conversation being erased. */
  groupSources(db: Conn, accountId: string, rundownId: string, position: number, exceptConversation: string) {
    return db
      .selectFrom('rundown_quotes as q')
      .innerJoin('messages as m', 'm.id', 'q.message_id')
      .select(['m.content', 'm.created_at'])
      .where('q.rundown_id', '=', rundownId)
      .where('q.position', '=', position)
      .where('q.account_id', '=', accountId)
      .where('m.account_id', '=', accountId)
      .where('q.conversation_id', '!=', exceptConversation)
      .execute();
  },
  async hasQuotes(db: Conn, accountId: string, rundownId: string) {
    const q = db.selectFrom('rundown_quotes').select('rundown_id').where('account_id', '=', accountId).where('rundown_id', '=', rundownId).limit(1);
    return (await q.executeTakeFirst()) !== undefined;
  },
  deleteQuotesOf(db: Conn, accountId: string, conversationId: string) {
    return db.deleteFrom('rundown_quotes').where('account_id', '=', accountId).where('conversation_id', '=', conversationId).execute();
  },
  /** What a conversation's customer wrote, and when: matched by text against rundowns made before quotes were recorded. */
  customerMessagesOf(db: Conn, accountId: string, conversationId: string) {
    return db
      .selectFrom('messages')
      .select(['content', 'created_at'])
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .where('role', '=', 'customer')
      .execute();
  },
  /**
   * The account's rundowns whose period reaches [first, last], and whether each recorded any quote (`recorded`
   * false: made before quotes were recorded, or with nothing left to quote).
   */
  async overlapping(db: Conn, accountId: string, first: number, last: number) {
    const rows = await db
      .selectFrom('rundowns as r')
      .select(['r.id', 'r.from_ts', 'r.to_ts', 'r.body'])
      .select(({ exists, selectFrom }) => exists(selectFrom('rundown_quotes as q').select('q.rundown_id').whereRef('q.rundown_id', '=', 'r.id')).as('recorded'))
      .where('r.account_id', '=', accountId)
      .where('r.from_ts', '<=', last)
      .where('r.to_ts', '>', first)
      .execute();
    // SQLite answers 0 or 1.
    return rows.map((r) => ({ ...r, recorded: Boolean(r.recorded) }));
  },
  /** Whether a conversation of the period other than `except` still has this topic. */
  async topicInUse(db: Conn, accountId: string, topic: string, p: Period, except: string) {
    const r = await db
      .selectFrom('conversations')
      .select('id')
      .where('account_id', '=', accountId)
      .where('created_at', '>=', p.from)
      .where('created_at', '<', p.to)
      .where('topic', '=', topic)
      .where('id', '!=', except)
      .limit(1)
      .executeTakeFirst();
    return r !== undefined;
  },
  /**
   * The answers kept for Idempotency-Keys that may hold this rundown: a POST /v1/rundowns answer is the rundown, so
   * it repeats its wordings for 24 hours. The caller checks each one's data.id (the LIKE only narrows).
   */
  keptAnswersNaming(db: Conn, accountId: string, rundownId: string) {
    return db
      .selectFrom('idempotency_keys')
      .select(['key', 'response'])
      .where('account_id', '=', accountId)
      .where('method', '=', 'POST')
      .where('response', 'like', `%"${rundownId}"%`)
      .execute();
  },
  async setKeptAnswer(db: Conn, accountId: string, key: string, response: string) {
    await db.updateTable('idempotency_keys').set({ response }).where('account_id', '=', accountId).where('key', '=', key).execute();
  },
  faqQuestions(db: Conn, accountId: string) {
    return db.selectFrom('faqs').select('question').where('account_id', '=', accountId).execute();
  },
  /**
   * The scheduled rundowns a run of the scheduler should make, as (window, account) pairs, oldest window first, then by
   * account: every pair of one of `windows` (`last` marks the last complete one) and an account created before it
   * ended, not being deleted, with no scheduled rundown of exactly that window. A window before the last one is left
   * out, too, when the account's scheduled rundown that starts last before the window's end reaches into it: after
   * RUNDOWN_INTERVAL changes, the new windows the old interval's rundowns already covered are not digested again.
   * That rundown is the only one looked at (one probe, not a scan of the account's history): one starting earlier and
   * reaching past a later one happens only after two interval changes and is missed (docs/rundowns.md).
   *
   * One statement for every window, and one probe of rundowns_scheduled_window per pair: the last window asks for its
   * own rundown, the others for the latest one before their end (which is theirs when it was made). Written as one OR
   * so that PostgreSQL keeps both as per-row probes: a bare NOT EXISTS became a hash anti join that read every scheduled
   * rundown of every account, each run, when its statistics said the table was small. A run that finds nothing (the
   * common case, about every minute) returns no row. 'schedule' is a literal, not a parameter: PostgreSQL's generic plan
   * of a prepared statement cannot know a parameter will be 'schedule', so could not use the partial index.
   */
  missingScheduled(db: Conn, windows: readonly (Period & { last: boolean })[]) {
    // Typed where they are written: PostgreSQL takes an untyped parameter in VALUES as text.
    const rows = windows.map((w) => sql`(cast(${w.from} as bigint), cast(${w.to} as bigint), cast(${w.last ? 1 : 0} as integer))`);
    // column1.. are the names both dialects give the columns of a VALUES list.
    const list = sql<{ from_ts: number; to_ts: number; last: number }>`(select column1 as from_ts, column2 as to_ts, column3 as last from (values ${sql.join(rows)}) as v)`;
    const scheduled = sql.lit<RundownsTable['trigger']>('schedule');
    return db
      .selectFrom(list.as('w'))
      .innerJoin('accounts as a', (j) => j.on('a.created_at', '<', sql.ref('w.to_ts')))
      .select(['w.from_ts', 'w.to_ts', 'a.id as account_id'])
      .where('a.deletion_started_at', 'is', null)
      .where(({ and, or, eb, not, exists, selectFrom }) =>
        or([
          and([
            eb('w.last', '=', sql.lit(1)),
            not(
              exists(
                selectFrom('rundowns as r')
                  .select('r.id')
                  .whereRef('r.account_id', '=', 'a.id')
                  .where('r.trigger', '=', scheduled)
                  .whereRef('r.from_ts', '=', 'w.from_ts')
                  .whereRef('r.to_ts', '=', 'w.to_ts'),
              ),
            ),
          ]),
          // Covers "no rundown of exactly this window" too: that one would start before the window ends and reach into it.
          and([
            eb('w.last', '=', sql.lit(0)),
            eb(
              eb.fn.coalesce(
                selectFrom('rundowns as r')
                  .select('r.to_ts')
                  .whereRef('r.account_id', '=', 'a.id')
                  .where('r.trigger', '=', scheduled)
                  .whereRef('r.from_ts', '<', 'w.to_ts')
                  .orderBy('r.from_ts', 'desc')
                  .orderBy('r.to_ts', 'desc')
                  .limit(sql.lit(1)),
                'w.from_ts',
              ),
              '<=',
              eb.ref('w.from_ts'),
            ),
          ]),
        ]),
      )
      .orderBy('w.from_ts')
      .orderBy('a.id')
      .execute();
  },
};
