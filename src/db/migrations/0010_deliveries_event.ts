import type { Kysely } from 'kysely';

/*
 * Deliveries by the event they carry: erasing a conversation (DELETE /v1/conversations/:id) removes the deliveries
 * of its events, whose bodies hold the customer's words, without reading every delivery of every account.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('deliveries_event').on('deliveries').column('event_id').execute();
  // The same erasure deletes the conversation's workflow runs, whose key starts with the workflow.
  await db.schema.createIndex('workflow_runs_conversation').on('workflow_runs').column('conversation_id').execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
