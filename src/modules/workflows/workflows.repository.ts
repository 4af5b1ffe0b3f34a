import { type Kysely, type Transaction } from 'kysely';
import type { DB, WorkflowRunsTable, WorkflowsTable } from '../../db/schema.js';
import { lockingRead } from '../../db/locks.js';
import { countAlone, newestFirstPage, pageLimit, totalColumn, totalOf } from '../../db/pagination.js';

type Conn = Kysely<DB> | Transaction<DB>;

interface RunsFilter {
  conversationId?: string | undefined;
  limit: number;
  offset: number;
}

const runsOf = (db: Conn, accountId: string, workflowId: string, conversationId: string | undefined) => {
  const q = db.selectFrom('workflow_runs').where('workflow_runs.account_id', '=', accountId).where('workflow_runs.workflow_id', '=', workflowId);
  return conversationId === undefined ? q : q.where('workflow_runs.conversation_id', '=', conversationId);
};

/**
 * The page statement of workflowsRepository.runs, newest first with the conversation as the tie-break (a run has no
 * id of its own: one per workflow and conversation). A statement of workflow_runs alone, read through
 * workflow_runs_account_workflow_created (migration 0012) in its order with no sort: joined to conversations, the
 * planners could start from the account's conversations instead (SQLite did, with statistics) and sort them all.
 * test/modules/workflows/workflows.runs.test.ts checks the plan on both dialects.
 */
export const runsPageQuery = (db: Conn, accountId: string, workflowId: string, f: RunsFilter) =>
  runsOf(db, accountId, workflowId, f.conversationId)
    .select((eb) => [
      'workflow_runs.workflow_id',
      'workflow_runs.conversation_id',
      'workflow_runs.extracted',
      'workflow_runs.created_at',
      // Never null: erasing a conversation deletes its runs in the same transaction (conversations.repository.ts).
      eb
        .selectFrom('conversations')
        .select('conversations.customer_id')
        .whereRef('conversations.id', '=', 'workflow_runs.conversation_id')
        .whereRef('conversations.account_id', '=', 'workflow_runs.account_id')
        .$asScalar()
        .$notNull()
        .as('customer_id'),
    ])
    .orderBy('workflow_runs.created_at', 'desc')
    .orderBy('workflow_runs.conversation_id', 'desc')
    .limit(pageLimit(f.limit))
    .offset(f.offset);

export const workflowsRepository = {
  async list(db: Conn, accountId: string, f: { enabled?: boolean | undefined; limit: number; offset: number }) {
    let q = db.selectFrom('workflows').where('account_id', '=', accountId);
    if (f.enabled !== undefined) q = q.where('enabled', '=', f.enabled ? 1 : 0);
    return newestFirstPage(q, f);
  },
  /** `lock`: the read of an update, locked until its transaction ends (locks.ts). */
  find(db: Conn, accountId: string, id: string, lock = false) {
    const q = db.selectFrom('workflows').selectAll().where('account_id', '=', accountId).where('id', '=', id);
    return (lock ? lockingRead(db, q) : q).executeTakeFirst();
  },
  findBySlug(db: Conn, accountId: string, slug: string) {
    return db.selectFrom('workflows').select('id').where('account_id', '=', accountId).where('slug', '=', slug).executeTakeFirst();
  },
  insert(db: Conn, row: WorkflowsTable) {
    return db.insertInto('workflows').values(row).execute();
  },
  async update(db: Conn, accountId: string, id: string, patch: Partial<Omit<WorkflowsTable, 'id' | 'account_id' | 'created_at'>>) {
    const r = await db.updateTable('workflows').set(patch).where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    return Number(r.numUpdatedRows) > 0;
  },
  async delete(db: Conn, accountId: string, id: string) {
    const r = await db.deleteFrom('workflows').where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
    if (Number(r.numDeletedRows) === 0) return false;
    await db.deleteFrom('workflow_runs').where('account_id', '=', accountId).where('workflow_id', '=', id).execute();
    return true;
  },
  /** One page of a workflow's runs and how many the filter matches (the workflow is assumed to be the account's). */
  async runs(db: Conn, accountId: string, workflowId: string, f: RunsFilter) {
    const counted = runsOf(db, accountId, workflowId, f.conversationId);
    const rows = await runsPageQuery(db, accountId, workflowId, f).select(totalColumn(counted)).execute();
    return { rows, total: await totalOf(rows[0]?.total, f.offset, countAlone(counted)) };
  },
  /** Workflows of this list that already fired in the conversation. */
  async firedIn(db: Conn, accountId: string, conversationId: string, workflowIds: string[]) {
    if (workflowIds.length === 0) return new Set<string>();
    const rows = await db
      .selectFrom('workflow_runs')
      .select('workflow_id')
      .where('account_id', '=', accountId)
      .where('conversation_id', '=', conversationId)
      .where('workflow_id', 'in', workflowIds)
      .execute();
    return new Set(rows.map((r) => r.workflow_id));
  },
  /** False when the workflow already fired in this conversation (a concurrent message got there first). */
  async insertRun(db: Conn, row: WorkflowRunsTable) {
    const r = await db
      .insertInto('workflow_runs')
      .values(row)
      .onConflict((oc) => oc.columns(['workflow_id', 'conversation_id']).doNothing())
      .executeTakeFirst();
    return Number(r.numInsertedOrUpdatedRows ?? 0n) > 0;
  },
};
