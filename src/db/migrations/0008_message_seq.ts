import { sql, type Kysely } from 'kysely';

/*
 * A message's position in its conversation. Ids used to count up within a millisecond, and transcripts were
 * ordered by (created_at, id); ids now carry fresh random bits (src/lib/ids.ts), so messages written in the
 * same millisecond (a greeting and its conversation, a question and its reply, concurrent sends) need their own
 * order: seq is the conversation's message_count after the message was counted (the greeting is 1), taken
 * under the conversation row's lock. Transcripts are ordered by (created_at, seq, id).
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('messages').addColumn('seq', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  // Existing messages: their old order, which ids within a millisecond gave.
  await sql`
    update messages set seq = (
      select count(*) from messages m2
      where m2.conversation_id = messages.conversation_id
        and (m2.created_at < messages.created_at or (m2.created_at = messages.created_at and m2.id <= messages.id))
    )`.execute(db);
  await db.schema.dropIndex('messages_conversation').execute();
  await db.schema.createIndex('messages_conversation').on('messages').columns(['conversation_id', 'created_at', 'seq', 'id']).execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
