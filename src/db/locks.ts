import { sql, type Transaction } from 'kysely';
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
