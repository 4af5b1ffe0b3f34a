import type { Kysely } from 'kysely';

/*
 * Where a rundown's quoted wordings came from: one row per customer message recorded behind an unanswered group
 * (`position` is its index in the rundown's `unanswered`). Erasing a conversation finds the rundowns that quote it
 * here and rewords them (src/modules/rundowns, docs/rundowns.md "Erasure"). Only ids: the wording itself stays in
 * the message, so erasing the message is what removes it from the alternatives. A new table and nothing changed in
 * the others, so the migration is additive.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('rundown_quotes')
    .addColumn('account_id', 'text', (c) => c.notNull().references('accounts.id'))
    .addColumn('rundown_id', 'text', (c) => c.notNull().references('rundowns.id'))
    .addColumn('position', 'integer', (c) => c.notNull())
    .addColumn('message_id', 'text', (c) => c.notNull())
    // No foreign keys to the conversation and the message: the erasure deletes these rows before them, and a
    // reference would only add a lock to every message insert's path.
    .addColumn('conversation_id', 'text', (c) => c.notNull())
    .addPrimaryKeyConstraint('rundown_quotes_pk', ['rundown_id', 'position', 'message_id'])
    .execute();
  // The erasure's lookup: which rundowns quote this conversation.
  await db.schema.createIndex('rundown_quotes_conversation').on('rundown_quotes').columns(['account_id', 'conversation_id']).execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
