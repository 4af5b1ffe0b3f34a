import type { Kysely } from 'kysely';

/*
 * Deliveries by event and webhook, in place of by event alone (0010): a webhook recover asks, event by event, whether
 * that webhook already has a pending or succeeded delivery of it. Indexed on event_id alone, PostgreSQL could rate the
 * (webhook_id, status) index the better probe when its statistics were stale, and then read every delivery of the
 * webhook for each event (webhooks.repository.ts missedEvents). The erasure's lookups by event_id use the leading
 * column as before.
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('deliveries_event_webhook').on('deliveries').columns(['event_id', 'webhook_id']).execute();
  await db.schema.dropIndex('deliveries_event').execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
