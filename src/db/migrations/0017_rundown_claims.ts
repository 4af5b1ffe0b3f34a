import type { Kysely } from 'kysely';

/*
 * A worker's claim on one scheduled rundown window of one account, taken before it builds the digest and deleted in the
 * transaction that stores it (src/modules/rundowns, docs/rundowns.md "Scheduling"). Several workers catching up at
 * once each built the same digest (every read of the window, on a large account seconds of work) and all but one
 * threw it away at the unique index; with a claim, the others pass the window by. A claim expires (`expires_at`, Unix
 * ms): one left by a worker that died while building is taken over by the next run after that, so no window stays
 * blocked. Rows live only while a digest is being built. A new table only: the migration is additive.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rundown_claims')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('from_ts', 'bigint', (c) => c.notNull())
    .addColumn('to_ts', 'bigint', (c) => c.notNull())
    .addColumn('holder', 'text', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('rundown_claims_pk', ['account_id', 'from_ts', 'to_ts'])
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
