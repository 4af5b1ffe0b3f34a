import type { Kysely } from 'kysely';

/*
 * Analytics read every conversation an account created in a range. Through conversations_account_created
 * that is one random heap read per conversation (an account's rows are spread over the whole table); with
 * every column the overview and topics need in the index, both become index-only scans: 10,000 conversations
 * of one account aggregate in ~3 ms instead of ~23 ms on PostgreSQL (bench/conversations/RESULTS.md). The cost
 * is one more index entry to rewrite whenever message_count, status or the end fields change.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('conversations_account_created_figures')
    .on('conversations')
    .columns(['account_id', 'created_at', 'message_count', 'ended_at', 'escalated_at', 'outcome', 'topic'])
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
