import { sql, type Kysely } from 'kysely';

/**
 * The knowledge version moves from one counter on the account row to a few counter rows per account. Every
 * document or FAQ write bumped accounts.knowledge_version inside its transaction, so on PostgreSQL concurrent
 * writes of one account queued on that row's lock until each commit was flushed: ~750 creates/s per account
 * whatever the pool size, against ~2,850/s without the bump (bench/http, same run). A write now bumps one of
 * KNOWLEDGE_SHARDS rows and readers take their sum: it still grows with every committed change, whatever the
 * order in which concurrent writers commit, and writers rarely wait on each other.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('knowledge_versions')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('shard', 'integer', (c) => c.notNull())
    .addColumn('n', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('knowledge_versions_pk', ['account_id', 'shard'])
    .execute();
  // Versions carry on from the old counter, so they never go back.
  await sql`insert into knowledge_versions (account_id, shard, n) select id, 0, knowledge_version from accounts where knowledge_version > 0`.execute(db);
  await db.schema.alterTable('accounts').dropColumn('knowledge_version').execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
