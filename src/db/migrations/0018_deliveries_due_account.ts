import { sql, type Kysely } from 'kysely';

/*
 * deliveries_due (the pending deliveries nobody holds, by next attempt time: the claim's index, 0003) gains account_id
 * as a second column. The metrics' queue figures leave out the deliveries of accounts being deleted, which no worker
 * sends (webhooks.repository.ts queueFigures): with the account in the index entry, counting those and finding the
 * earliest of the others read index entries only, without a look at each row (on SQLite a row read per pending
 * delivery made that scrape 4-7 times the plain one, 25-50 ms at 40,000 pending; BENCHMARKS.md). The claim walks the
 * index in next_attempt_at order as before. Partial on the same predicate, so it holds only the pending rows; its build
 * reads the table once, in the upgrade's transaction, holding writes to deliveries meanwhile (README "Upgrading").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropIndex('deliveries_due').execute();
  await db.schema
    .createIndex('deliveries_due')
    .on('deliveries')
    .columns(['next_attempt_at', 'account_id'])
    .where(sql.raw<boolean>("status = 'pending' and lease_owner is null"))
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
