import { sql, type Kysely, type Transaction } from 'kysely';
import type { DB, DocumentsTable } from '../../db/schema.js';

type Conn = Kysely<DB> | Transaction<DB>;

export const documentsRepository = {
  async list(db: Conn, accountId: string, f: { status: string; limit: number; offset: number }) {
    let q = db.selectFrom('documents').where('account_id', '=', accountId);
    if (f.status !== 'all') q = q.where('status', '=', f.status as DocumentsTable['status']);
    const [count, rows] = await Promise.all([
      // A raw count(*) skips building an expression builder per request (visible in the benchmark profile).
      q.select(sql<number>`count(*)`.as('n')).executeTakeFirstOrThrow(),
      q
        .select(['id', 'title', 'status', 'created_at', 'updated_at'])
        .orderBy('created_at', 'desc')
        .orderBy('id', 'desc')
        .limit(f.limit)
        .offset(f.offset)
        .execute(),
    ]);
    return { rows, total: Number(count.n) };
  },
  find(db: Conn, accountId: string, id: string) {
    return db.selectFrom('documents').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
  },
  insert(db: Conn, row: DocumentsTable) {
    return db.insertInto('documents').values(row).execute();
  },
  async update(db: Conn, accountId: string, id: string, patch: Partial<Pick<DocumentsTable, 'title' | 'content' | 'status' | 'updated_at'>>) {
    const r = await db.updateTable('documents').set(patch).where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
  async delete(db: Conn, accountId: string, id: string) {
    const r = await db.deleteFrom('documents').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numDeletedRows) > 0;
  },
  /** What the assistant may use: active documents only (those changed since a time, for incremental refresh). */
  listActive(db: Conn, accountId: string, changedSince = 0) {
    return db
      .selectFrom('documents')
      .select(['id', 'title', 'content', 'updated_at'])
      .where('account_id', '=', accountId)
      .where('status', '=', 'active')
      .where('updated_at', '>=', changedSince)
      // A fixed order makes the index, and so ties between equally good sources, the same on both databases.
      .orderBy('id')
      .execute();
  },
  activeIds(db: Conn, accountId: string) {
    return db.selectFrom('documents').select('id').where('account_id', '=', accountId).where('status', '=', 'active').execute();
  },
};
