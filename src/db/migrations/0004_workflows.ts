import type { Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('workflows')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('slug', 'text', (c) => c.notNull())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('triggers', 'text', (c) => c.notNull())
    .addColumn('fields', 'text', (c) => c.notNull())
    .addColumn('reply', 'text')
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  // A slug names one workflow of an account (receivers switch on workflowSlug).
  await db.schema.createIndex('workflows_account_slug').unique().on('workflows').columns(['account_id', 'slug']).execute();
  await db.schema.createIndex('workflows_account_created').on('workflows').columns(['account_id', 'created_at', 'id']).execute();

  // One run per workflow and conversation: the primary key is what makes a repeated trigger phrase fire once.
  await db.schema
    .createTable('workflow_runs')
    .addColumn('workflow_id', 'text', (c) => c.notNull())
    .addColumn('conversation_id', 'text', (c) => c.notNull())
    .addColumn('account_id', 'text', (c) => c.notNull())
    .addColumn('extracted', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('workflow_runs_pk', ['workflow_id', 'conversation_id'])
    .execute();

  // The workflow whose reply an assistant message is: such a message cites nothing yet answered the customer,
  // which rundowns must not count as a question the assistant could not answer. Nullable: no table rewrite.
  await db.schema.alterTable('messages').addColumn('workflow_id', 'text').execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
