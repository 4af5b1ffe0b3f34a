import type { Kysely } from 'kysely';

// Portable column types only (text, integer, bigint), so one migration serves SQLite and PostgreSQL.
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('accounts')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('plan', 'text', (c) => c.notNull())
    .addColumn('rate_limit_minute', 'integer')
    .addColumn('rate_limit_day', 'integer')
    .addColumn('knowledge_version', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('assistant_settings', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await db.schema
    .createTable('api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('scopes', 'text', (c) => c.notNull())
    .addColumn('hash', 'text', (c) => c.notNull().unique())
    .addColumn('hint', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('api_keys_account').on('api_keys').columns(['account_id', 'created_at']).execute();

  await db.schema
    .createTable('documents')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('documents_account_created').on('documents').columns(['account_id', 'created_at', 'id']).execute();
  await db.schema
    .createIndex('documents_account_status_created')
    .on('documents')
    .columns(['account_id', 'status', 'created_at', 'id'])
    .execute();

  await db.schema
    .createTable('faqs')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('question', 'text', (c) => c.notNull())
    .addColumn('answer', 'text', (c) => c.notNull())
    .addColumn('category', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('faqs_account_created').on('faqs').columns(['account_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('faqs_account_status_created').on('faqs').columns(['account_id', 'status', 'created_at', 'id']).execute();
  await db.schema.createIndex('faqs_account_category_created').on('faqs').columns(['account_id', 'category', 'created_at', 'id']).execute();

  await db.schema
    .createTable('conversations')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('customer_id', 'text', (c) => c.notNull())
    .addColumn('customer_label', 'text', (c) => c.notNull())
    .addColumn('customer_email', 'text')
    .addColumn('persona', 'text')
    .addColumn('metadata', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('outcome', 'text')
    .addColumn('escalation_reason', 'text')
    .addColumn('tags', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('topic', 'text')
    .addColumn('message_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('answered_count', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('unanswered_streak', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_message_at', 'bigint', (c) => c.notNull())
    .addColumn('escalated_at', 'bigint')
    .addColumn('ended_at', 'bigint')
    .execute();
  await db.schema.createIndex('conversations_account_created').on('conversations').columns(['account_id', 'created_at', 'id']).execute();
  await db.schema
    .createIndex('conversations_account_status_created')
    .on('conversations')
    .columns(['account_id', 'status', 'created_at', 'id'])
    .execute();
  await db.schema
    .createIndex('conversations_account_customer_created')
    .on('conversations')
    .columns(['account_id', 'customer_id', 'created_at', 'id'])
    .execute();
  // The idle sweeper scans active conversations by last activity across all accounts.
  await db.schema.createIndex('conversations_status_last_message').on('conversations').columns(['status', 'last_message_at']).execute();

  await db.schema
    .createTable('messages')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('conversation_id', 'text', (c) => c.notNull().references('conversations.id'))
    .addColumn('role', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('sources', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('messages_conversation').on('messages').columns(['conversation_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('messages_account_created').on('messages').columns(['account_id', 'created_at']).execute();

  await db.schema
    .createTable('events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('events_account_created').on('events').columns(['account_id', 'created_at']).execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
