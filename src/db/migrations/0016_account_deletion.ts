import { sql, type Kysely } from 'kysely';

/*
 * `parley accounts delete` deletes a large account in many short transactions (accounts.service.ts deleteAccount),
 * so other writers get the database in between. What that needs:
 * - accounts.deletion_started_at: set in the deletion's first transaction and kept until the account row goes with
 *   its last one. From then on the account is unusable (its keys answer 401, the worker sends none of its deliveries
 *   and runs none of its timers), also after a crash part way, until `parley accounts delete` is run again and
 *   finishes. Nullable without a default: neither dialect rewrites the table.
 * - deliveries_account: the account's deliveries, in id order (the order a worker's record locks them in), so each
 *   chunk reads only its own rows; deliveries had no index by account, and the deletion read the whole table. Partial
 *   on a predicate every row meets (`id is not null`) that only the deletion's queries state: SQLite plans without
 *   statistics, and a plain index on account_id took over the other queries on deliveries that name the account
 *   beside a better column (an erasure's by event, a webhook's cancel and counts by webhook), which would then read
 *   every delivery of the account. PostgreSQL plans with statistics either way. A plain CREATE INDEX (CONCURRENTLY
 *   cannot run inside the migrations' transaction) holds writes to deliveries while it builds (README "Upgrading").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('accounts').addColumn('deletion_started_at', 'bigint').execute();
  await db.schema
    .createIndex('deliveries_account')
    .on('deliveries')
    .columns(['account_id', 'id'])
    .where(sql.raw<boolean>('id is not null'))
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
