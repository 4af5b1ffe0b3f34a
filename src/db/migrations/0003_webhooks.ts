import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('webhooks')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('events', 'text', (c) => c.notNull())
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('disabled_reason', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('webhooks_account_created').on('webhooks').columns(['account_id', 'created_at', 'id']).execute();

  // No foreign key to webhooks: a deleted webhook's delivery history stays (cancelled) and a worker that
  // finishes an attempt after the delete can still record it.
  await db.schema
    .createTable('deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('webhook_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text')
    .addColumn('event', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('secret', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempt_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('auto_attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'bigint')
    .addColumn('lease_owner', 'text')
    .addColumn('lease_expires_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // The claim query: pending, unleased, due soonest first. Partial, so finished deliveries cost nothing.
  await db.schema
    .createIndex('deliveries_due')
    .on('deliveries')
    .columns(['next_attempt_at'])
    .where(sql.raw<boolean>("status = 'pending' and lease_owner is null"))
    .execute();
  // The sweeper: leased pending deliveries by lease expiry.
  await db.schema
    .createIndex('deliveries_leased')
    .on('deliveries')
    .columns(['lease_expires_at'])
    .where(sql.raw<boolean>('lease_owner is not null'))
    .execute();
  await db.schema.createIndex('deliveries_webhook_created').on('deliveries').columns(['webhook_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('deliveries_webhook_status').on('deliveries').columns(['webhook_id', 'status']).execute();

  await db.schema
    .createTable('delivery_attempts')
    .addColumn('delivery_id', 'text', (c) => c.notNull())
    .addColumn('attempt', 'integer', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addColumn('status_code', 'integer')
    .addColumn('duration_ms', 'integer', (c) => c.notNull())
    .addColumn('error', 'text')
    .addColumn('response_body', 'text')
    .addColumn('worker', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('delivery_attempts_pk', ['delivery_id', 'attempt'])
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
