import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, RundownsTable } from '../../db/schema.js';
import { newestFirstPage } from '../../db/pagination.js';

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
  find(db: Conn, accountId: string, id: string) {
    return db.selectFrom('rundowns').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
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
      .select(['m.content', 'm.created_at', 'c.escalated_at'])
      .where('c.account_id', '=', accountId)
      .where('m.role', '=', 'customer')
      .where('m.next_role', '=', 'assistant')
      // Assistant messages store their sources as a JSON array; no citation is exactly '[]'.
      .where((eb) => eb.or([eb('m.next_sources', 'is', null), eb('m.next_sources', '=', '[]')]))
      // A workflow's reply cites nothing but handled the message.
      .where('m.next_workflow', 'is', null)
      .execute();
  },
  faqQuestions(db: Conn, accountId: string) {
    return db.selectFrom('faqs').select('question').where('account_id', '=', accountId).execute();
  },
  /** Accounts created before the window ended that have no scheduled rundown of it yet. */
  accountsMissingWindow(db: Conn, w: Period) {
    return db
      .selectFrom('accounts')
      .select('id')
      .where('created_at', '<', w.to)
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
