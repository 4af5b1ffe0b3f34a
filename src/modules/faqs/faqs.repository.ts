import type { Kysely, Transaction } from 'kysely';
import type { DB, FaqsTable } from '../../db/schema.js';
import { lockingRead } from '../../db/locks.js';
import { newestFirstPage } from '../../db/pagination.js';

type Conn = Kysely<DB> | Transaction<DB>;

export const faqsRepository = {
  async list(db: Conn, accountId: string, f: { status: string; category?: string | undefined; limit: number; offset: number }) {
    let q = db.selectFrom('faqs').where('account_id', '=', accountId);
    if (f.status !== 'all') q = q.where('status', '=', f.status as FaqsTable['status']);
    if (f.category !== undefined) q = q.where('category', '=', f.category);
    return newestFirstPage(q, f);
  },
  /** `lock`: the read of an update, locked until its transaction ends (locks.ts). */
  find(db: Conn, accountId: string, id: string, lock = false) {
    const q = db.selectFrom('faqs').selectAll().where('account_id', '=', accountId).where('id', '=', id);
    return (lock ? lockingRead(db, q) : q).executeTakeFirst();
  },
  insert(db: Conn, row: FaqsTable) {
    return db.insertInto('faqs').values(row).execute();
  },
  async update(db: Conn, accountId: string, id: string, patch: Partial<Omit<FaqsTable, 'id' | 'account_id' | 'created_at'>>) {
    const r = await db.updateTable('faqs').set(patch).where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
  async delete(db: Conn, accountId: string, id: string) {
    const r = await db.deleteFrom('faqs').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
  /** Every FAQ with its status, for the assistant's index (changed since a time, if given). */
  listForIndex(db: Conn, accountId: string, changedSince = 0) {
    return db
      .selectFrom('faqs')
      .select(['id', 'question', 'answer', 'category', 'status', 'created_at', 'updated_at'])
      .where('account_id', '=', accountId)
      .where('updated_at', '>=', changedSince)
      // A fixed order makes the index the same on both databases; equally good sources are ordered by their
      // content and created_at, not by this order (retrieval.ts, `compareTied`).
      .orderBy('id')
      .execute();
  },
  ids(db: Conn, accountId: string) {
    return db.selectFrom('faqs').select('id').where('account_id', '=', accountId).execute();
  },
};
