import type { Kysely, Transaction } from 'kysely';
import type { DB } from './schema.js';

/**
 * Runs several reads against one snapshot. A record assembled from two statements (a delivery and its
 * attempts, say) must not mix states from before and after a concurrent commit: on PostgreSQL each statement
 * of READ COMMITTED sees its own snapshot, so the reads share a REPEATABLE READ, read-only transaction. SQLite
 * ignores the settings; its transaction is a snapshot already.
 */
export function readSnapshot<T>(db: Kysely<DB>, fn: (trx: Transaction<DB>) => Promise<T>): Promise<T> {
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(fn);
}
