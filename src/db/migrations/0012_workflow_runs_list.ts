import type { Kysely } from 'kysely';

/*
 * A workflow's runs, newest first (GET /v1/workflows/:id/runs): the primary key (workflow_id, conversation_id) finds
 * them but in conversation order, so every page would read and sort all of a busy workflow's runs. In this index a
 * page is a walk of its first entries, conversation_id being the list's tie-break. It leads with account_id, which
 * every read of the table filters on; that also gives an account's deletion an index for its runs.
 * An index only, so the migration is additive. A plain CREATE INDEX (PostgreSQL: CONCURRENTLY cannot run inside the
 * migrations' transaction) holds writes to workflow_runs while it builds: one row per workflow firing, and upgrades
 * stop the old nodes first (README "Upgrading").
 */
export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createIndex('workflow_runs_account_workflow_created')
    .on('workflow_runs')
    .columns(['account_id', 'workflow_id', 'created_at', 'conversation_id'])
    .execute();
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
