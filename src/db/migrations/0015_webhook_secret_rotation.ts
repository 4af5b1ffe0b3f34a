import { sql, type Kysely } from 'kysely';

/*
 * Secret rotation: the secret a webhook had before its last change, and when that change was made. For
 * WEBHOOK_SECRET_OVERLAP after it, every attempt also carries a Standard Webhooks signature made with the previous
 * secret, so a receiver that has not switched yet still verifies (docs/webhooks.md "Rotating a secret"). Once the
 * overlap is over the worker's sweep clears it: the partial index holds only the webhooks still keeping one, so the
 * sweep's probe costs nothing when none does. Nullable columns with no default: adding them rewrites no row on
 * either dialect, and every existing webhook reads as never rotated.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('webhooks').addColumn('previous_secret', 'text').execute();
  await db.schema.alterTable('webhooks').addColumn('secret_changed_at', 'bigint').execute();
  await db.schema
    .createIndex('webhooks_previous_secret')
    .on('webhooks')
    .columns(['secret_changed_at'])
    .where(sql.raw<boolean>('previous_secret is not null'))
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
