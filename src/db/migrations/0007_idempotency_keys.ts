import type { Kysely } from 'kysely';

/**
 * Idempotency-Key support (src/http/idempotency.ts): one row per key an account sent with a POST, holding the
 * request's fingerprint and, once the request finished, the answer a retry with the same key gets again.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('idempotency_keys')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('key', 'text', (c) => c.notNull())
    .addColumn('fingerprint', 'text', (c) => c.notNull())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('path', 'text', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('response', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('locked_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('idempotency_keys_pk', ['account_id', 'key'])
    .execute();
  await db.schema.createIndex('idempotency_keys_created').on('idempotency_keys').column('created_at').execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
