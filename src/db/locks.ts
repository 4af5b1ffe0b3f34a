import { PostgresAdapter, sql, type Kysely, type Transaction } from 'kysely';
import type { DialectName } from './database.js';
import type { DB } from './schema.js';

/**
 * Serialises a check-then-write across processes for the rest of the transaction: PostgreSQL takes a
 * transaction-scoped advisory lock named `name`; SQLite takes the database's write lock at once with a write that
 * changes nothing, so a second process waits (busy_timeout) and then reads what the first committed, instead of
 * reading the same "nothing there yet" and writing too.
 */
export async function lockForCheckThenWrite(trx: Transaction<DB>, dialect: DialectName, name: string): Promise<void> {
  if (dialect === 'postgres') await sql`select pg_advisory_xact_lock(hashtext(${name}))`.execute(trx);
  else await sql`delete from accounts where 0`.execute(trx);
}

/**
 * The read of a read-modify-write (an update that merges fields, or moves `updatedAt` past the stored one): on
 * PostgreSQL it locks the rows it reads until the transaction ends (FOR UPDATE), so a concurrent writer's read
 * waits for this commit and sees it, instead of both reading the same row and the later commit carrying what the
 * earlier one read. SQLite runs one write transaction at a time (and has no FOR UPDATE): the read is left as is.
 */
export function lockingRead<Q extends { forUpdate(): Q }>(db: Kysely<DB> | Transaction<DB>, q: Q): Q {
  return db.getExecutor().adapter instanceof PostgresAdapter ? q.forUpdate() : q;
}

/**
 * The read of a batch job several workers run at once (pruning): on PostgreSQL it locks the rows it reads and skips
 * those another transaction holds (FOR UPDATE SKIP LOCKED), so the workers share the rows out instead of waiting for
 * each other. SQLite runs one write transaction at a time: the read is left as is.
 */
export function claimingRead<Q extends { forUpdate(): Q; skipLocked(): Q }>(db: Kysely<DB> | Transaction<DB>, q: Q): Q {
  return db.getExecutor().adapter instanceof PostgresAdapter ? q.forUpdate().skipLocked() : q;
}

/**
 * A read that keeps the rows it found from being deleted until the transaction ends, without holding up ordinary
 * updates of them or other readers (a row about to be referenced without a foreign key, or quoted): on PostgreSQL
 * FOR KEY SHARE (a DELETE, or a FOR UPDATE read such as an erasure's, waits for this commit; a row deleted by a
 * transaction this read waited for is not returned). SQLite runs one write transaction at a time: the read is left
 * as is.
 */
export function keySharingRead<Q extends { forKeyShare(): Q }>(db: Kysely<DB> | Transaction<DB>, q: Q): Q {
  return db.getExecutor().adapter instanceof PostgresAdapter ? q.forKeyShare() : q;
}
