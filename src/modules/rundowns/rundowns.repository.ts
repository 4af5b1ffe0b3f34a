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
  /** Accounts created before the window ended that have no scheduled rundown of it yet, but those being deleted. */
  accountsMissingWindow(db: Conn, w: Period) {
    return db
      .selectFrom('accounts')
      .select('id')
      .where('created_at', '<', w.to)
      .where('deletion_started_at', 'is', null)
      .where(({ not, exists, selectFrom }) =>
        not(
          exists(
            selectFrom('rundowns')
              .select('rundowns.id')
              .whereRef('rundowns.account_id', '=', 'accounts.id')
              .where('rundowns.trigger', '=', 'schedule')
              .where('rundowns.from_ts', '=', w.from)
              .where('rundowns.to_ts', '=', w.to),
          ),
        ),
      )
      .orderBy('id')
      .execute();
  },
};
