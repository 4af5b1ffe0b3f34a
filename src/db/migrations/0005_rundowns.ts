import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rundowns')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('trigger', 'text', (c) => c.notNull())
    .addColumn('from_ts', 'bigint', (c) => c.notNull())
    .addColumn('to_ts', 'bigint', (c) => c.notNull())
    .addColumn('figures', 'text', (c) => c.notNull())
    .addColumn('body', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('rundowns_account_created').on('rundowns').columns(['account_id', 'created_at', 'id']).execute();
  // One scheduled rundown per account and window, however many workers race for it (they insert with
  // ON CONFLICT DO NOTHING and only the inserter emits). Manual rundowns may repeat a window. Partial
  // unique indexes and ON CONFLICT on them behave the same on SQLite and PostgreSQL.
  await db.schema
    .createIndex('rundowns_scheduled_window')
    .on('rundowns')
    .columns(['account_id', 'from_ts', 'to_ts'])
    .unique()
    .where(sql.raw<boolean>("trigger = 'schedule'"))
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
