import type { Kysely } from 'kysely';

/*
 * When the request holding an Idempotency-Key committed its first write: set inside that write's own
 * transaction (src/db/unit-of-work.ts), so it is there exactly when the write is. A key with this set and no
 * answer was carried out but not answered (the process died, or the connection broke during COMMIT): a retry
 * is told so instead of running the request a second time.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('idempotency_keys').addColumn('committed_at', 'bigint').execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
