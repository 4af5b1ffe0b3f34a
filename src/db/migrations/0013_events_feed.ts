import type { Kysely } from 'kysely';

/*
 * The event feed (GET /v1/events), newest first with the id as the tie-break, read from an index in its order:
 * - events_account_created_id for the whole feed: events_account_created (0001) ends at created_at, so a page sorted
 *   each millisecond's events by id, and on PostgreSQL read every skipped row of a deep offset from the table;
 * - events_account_kind_created for a kind filter: through the account's index alone, `rundown.generated` (one a
 *   day) was looked for among every chat message's events. Several kinds are one walk of it per kind, merged.
 * Ending in id, both give a page's ids without touching the table (the payloads are read for those ids only).
 * events_account_created (0001) is a prefix of the first, which serves every query it served (an account's events
 * in a time range: an erasure's, a feed page's), so it is dropped: every chat message writes events, and each index
 * is a write more per event. Indexes only, so no data changes. A plain CREATE INDEX (PostgreSQL: CONCURRENTLY cannot run inside the
 * migrations' transaction) holds writes to events (every chat message writes some) while it builds: the table holds
 * DELIVERY_RETENTION's worth (30 days by default), and upgrades stop the old nodes first (README "Upgrading").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.createIndex('events_account_created_id').on('events').columns(['account_id', 'created_at', 'id']).execute();
  await db.schema.createIndex('events_account_kind_created').on('events').columns(['account_id', 'kind', 'created_at', 'id']).execute();
  await db.schema.dropIndex('events_account_created').execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
