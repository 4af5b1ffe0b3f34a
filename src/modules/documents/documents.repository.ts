import { type Kysely, type Transaction } from 'kysely';
import { countAlone, pageLimit, totalColumn, totalOf } from '../../db/pagination.js';
import { lockingRead } from '../../db/locks.js';
import { precompile, precompileRows } from '../../db/precompiled.js';
import type { DB, DocumentsTable } from '../../db/schema.js';

type Conn = Kysely<DB> | Transaction<DB>;

// The list, get and create run on every request of the documents API: built once per dialect (db/precompiled.ts).
// The status filter changes the query's shape, so filtered and unfiltered lists are two queries. The reads
// answer rows as tuples (precompileRows): on SQLite that skips building an object per row.
const LIST_COLUMNS = ['id', 'title', 'status', 'created_at', 'updated_at'] as const;
const RECORD_COLUMNS = ['id', 'title', 'content', 'status', 'created_at', 'updated_at'] as const;
const PAGE_COLUMNS = [...LIST_COLUMNS, 'total'] as const;
const ofAccount = (db: Conn, accountId: string) => db.selectFrom('documents').where('account_id', '=', accountId);
const ofStatus = (db: Conn, accountId: string, status: DocumentsTable['status']) => ofAccount(db, accountId).where('status', '=', status);
/** A page of `filtered`, each row carrying the filter's total (totalColumn: the same snapshot, one statement). */
const newestFirst = (filtered: ReturnType<typeof ofAccount>, limit: number, offset: number) =>
  filtered.select([...LIST_COLUMNS, totalColumn(filtered)]).orderBy('created_at', 'desc').orderBy('id', 'desc').limit(pageLimit(limit)).offset(offset);
const pageAll = precompileRows(PAGE_COLUMNS, (db, accountId: string, limit: number, offset: number) => newestFirst(ofAccount(db, accountId), limit, offset));
const pageByStatus = precompileRows(PAGE_COLUMNS, (db, accountId: string, status: DocumentsTable['status'], limit: number, offset: number) =>
  newestFirst(ofStatus(db, accountId, status), limit, offset),
);
const findOne = precompileRows(RECORD_COLUMNS, (db, accountId: string, id: string) =>
  db.selectFrom('documents').select(RECORD_COLUMNS).where('account_id', '=', accountId).where('id', '=', id),
);

/** A list item: id, title, status, created_at, updated_at, then the list's total (PAGE_COLUMNS). */
export type DocumentListRow = Awaited<ReturnType<typeof pageAll>>[number];
/** A whole document, as the API shows it (no account_id). */
export type DocumentRow = Omit<DocumentsTable, 'account_id'>;

const insertOne = precompile(
  (db, id: string, accountId: string, title: string, content: string, status: DocumentsTable['status'], createdAt: number, updatedAt: number) =>
    db.insertInto('documents').values({ id, account_id: accountId, title, content, status, created_at: createdAt, updated_at: updatedAt }),
);

export const documentsRepository = {
  async list(db: Conn, accountId: string, f: { status: string; limit: number; offset: number }): Promise<{ rows: DocumentListRow[]; total: number }> {
    const status = f.status as DocumentsTable['status'];
    const all = f.status === 'all';
    const rows = await (all ? pageAll(db, accountId, f.limit, f.offset) : pageByStatus(db, accountId, status, f.limit, f.offset));
    const total = await totalOf(rows[0]?.[5], f.offset, countAlone(all ? ofAccount(db, accountId) : ofStatus(db, accountId, status)));
    return { rows, total };
  },
  /** `lock`: the read of an update, locked until its transaction ends (locks.ts). */
  async find(db: Conn, accountId: string, id: string, lock = false): Promise<DocumentRow | undefined> {
    if (lock) {
      const q = db.selectFrom('documents').select(['id', 'title', 'content', 'status', 'created_at', 'updated_at']).where('account_id', '=', accountId).where('id', '=', id);
      return lockingRead(db, q).executeTakeFirst();
    }
    const r = (await findOne(db, accountId, id))[0];
    return r && { id: r[0], title: r[1], content: r[2], status: r[3], created_at: r[4], updated_at: r[5] };
  },
  async insert(db: Conn, row: DocumentsTable) {
    await insertOne(db, row.id, row.account_id, row.title, row.content, row.status, row.created_at, row.updated_at);
  },
  async update(db: Conn, accountId: string, id: string, patch: Partial<Pick<DocumentsTable, 'title' | 'content' | 'status' | 'updated_at'>>) {
    const r = await db.updateTable('documents').set(patch).where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
  async delete(db: Conn, accountId: string, id: string) {
    const r = await db.deleteFrom('documents').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
  /** Every document with its status, for the assistant's index (changed since a time, if given). */
  listForIndex(db: Conn, accountId: string, changedSince = 0) {
    return db
      .selectFrom('documents')
      .select(['id', 'title', 'content', 'status', 'created_at', 'updated_at'])
      .where('account_id', '=', accountId)
      .where('updated_at', '>=', changedSince)
      // A fixed order makes the index the same on both databases; equally good sources are ordered by their
      // content and created_at, not by this order (retrieval.ts, `compareTied`).
      .orderBy('id')
      .execute();
  },
  ids(db: Conn, accountId: string) {
    return db.selectFrom('documents').select('id').where('account_id', '=', accountId).execute();
  },
};
