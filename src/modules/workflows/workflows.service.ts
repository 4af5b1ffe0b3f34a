import type { Kysely, Transaction } from 'kysely';
import type { DB, WorkflowRunsTable, WorkflowsTable } from '../../db/schema.js';
import { invalidRequest, notFound, rejectBlank } from '../../http/errors.js';
import { nextUpdateTime, toIso, type Clock } from '../../lib/clock.js';
import { refuseUniqueViolation } from '../../db/unique.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import { newId } from '../../lib/ids.js';
import type { EventBus } from '../webhooks/events.js';
import { analyseMessage, compileTrigger, extractFields, matchesTrigger, patternProblem, type CompiledTrigger } from './matching.js';
import { workflowsRepository as repo } from './workflows.repository.js';
import type { CreateWorkflowBody, Field, ListWorkflowRunsQuery, ListWorkflowsQuery, UpdateWorkflowBody } from './workflows.schemas.js';

type Conn = Kysely<DB> | Transaction<DB>;

/** migrations/0004_workflows.ts */
const SLUG_INDEX = { name: 'workflows_account_slug', table: 'workflows', columns: ['account_id', 'slug'] } as const;

export const toWorkflowRecord = (r: WorkflowsTable) => ({
  id: r.id,
  slug: r.slug,
  name: r.name,
  triggers: JSON.parse(r.triggers) as string[],
  fields: JSON.parse(r.fields) as Field[],
  reply: r.reply,
  enabled: r.enabled === 1,
  createdAt: toIso(r.created_at),
  updatedAt: toIso(r.updated_at),
});

const toWorkflowRun = (r: Pick<WorkflowRunsTable, 'workflow_id' | 'conversation_id' | 'extracted' | 'created_at'> & { customer_id: string }) => ({
  workflowId: r.workflow_id,
  conversationId: r.conversation_id,
  customerId: r.customer_id,
  extracted: JSON.parse(r.extracted) as Record<string, string | number>,
  createdAt: toIso(r.created_at),
});

/** A workflow a customer message matched. */
export interface MatchedWorkflow {
  id: string;
  slug: string;
  fields: Field[];
  reply: string | null;
}

/** Rules JSON Schema cannot say: non-blank text, unique keys, patterns that are safe to run. */
function check(body: { name?: string | undefined; triggers?: string[] | undefined; fields?: Field[] | undefined; reply?: string | null | undefined }) {
  rejectBlank('body.name', body.name);
  rejectBlank('body.reply', body.reply);
  body.triggers?.forEach((t, i) => {
    rejectBlank(`body.triggers[${i}]`, t);
    const c = compileTrigger(t);
    if (c.terms.length === 0 && c.phrase === '') throw invalidRequest(`body.triggers[${i}] must contain a word`);
  });
  const keys = new Set<string>();
  body.fields?.forEach((f, i) => {
    if (keys.has(f.key)) throw invalidRequest(`body.fields[${i}].key "${f.key}" is used twice`);
    keys.add(f.key);
    if (f.type === 'pattern') {
      if (f.pattern === undefined) throw invalidRequest(`body.fields[${i}].pattern is required when type is pattern`);
      const problem = patternProblem(f.pattern);
      if (problem) throw invalidRequest(`body.fields[${i}].pattern ${problem}`);
    } else if (f.pattern !== undefined) {
      throw invalidRequest(`body.fields[${i}].pattern is only allowed when type is pattern`);
    }
  });
}

export function createWorkflowsService(db: Kysely<DB>, clock: Clock, events: EventBus) {
  // Compiled triggers per workflow version: a chat message is matched against every enabled workflow.
  const compiled = new Map<string, CompiledTrigger[]>();
  const triggersOf = (w: Pick<WorkflowsTable, 'id' | 'updated_at' | 'triggers'>) => {
    const key = `${w.id}:${w.updated_at}`;
    let c = compiled.get(key);
    if (!c) {
      if (compiled.size >= 10_000) compiled.clear();
      c = (JSON.parse(w.triggers) as string[]).map(compileTrigger);
      compiled.set(key, c);
    }
    return c;
  };

  function matchingAmong(rows: ReadonlyArray<Pick<WorkflowsTable, 'id' | 'slug' | 'triggers' | 'fields' | 'reply' | 'updated_at'>>, content: string): MatchedWorkflow[] {
    if (rows.length === 0) return [];
    const message = analyseMessage(content);
    return rows
      .filter((w) => triggersOf(w).some((t) => matchesTrigger(message, t)))
      .map((w) => ({ id: w.id, slug: w.slug, fields: JSON.parse(w.fields) as Field[], reply: w.reply }));
  }

  const slugTaken = (slug: string, by: string) => invalidRequest(`body.slug "${slug}" is already used by workflow ${by}`);

  async function slugFree(conn: Conn, accountId: string, slug: string, self?: string) {
    const other = await repo.findBySlug(conn, accountId, slug);
    if (other && other.id !== self) throw slugTaken(slug, other.id);
  }

  /**
   * The write, with the unique index answering as slugFree does: a concurrent request can take the slug between
   * the check and the write (PostgreSQL). The refusal names the workflow that holds it, read after the failed
   * transaction, so it is the same 400 the check gives.
   */
  function withSlug<T>(accountId: string, slug: string | undefined, work: () => Promise<T>): Promise<T> {
    if (slug === undefined) return work();
    return refuseUniqueViolation(SLUG_INDEX, work, async () => {
      const other = await repo.findBySlug(db, accountId, slug);
      return slugTaken(slug, other?.id ?? 'another workflow');
    });
  }

  return {
    async list(accountId: string, q: ListWorkflowsQuery) {
      const { rows, total } = await repo.list(db, accountId, { enabled: q.enabled, limit: q.limit, offset: q.offset });
      return { workflows: rows.map(toWorkflowRecord), total, limit: q.limit, offset: q.offset };
    },

    async get(accountId: string, id: string) {
      const row = await repo.find(db, accountId, id);
      if (!row) throw notFound('workflow', id);
      return toWorkflowRecord(row);
    },

    /** Another account's workflow is 404 like an unknown one, not an empty list: its id tells nothing. */
    async runs(accountId: string, id: string, q: ListWorkflowRunsQuery) {
      if (!(await repo.find(db, accountId, id))) throw notFound('workflow', id);
      const { rows, total } = await repo.runs(db, accountId, id, { conversationId: q.conversationId, limit: q.limit, offset: q.offset });
      return { runs: rows.map(toWorkflowRun), total, limit: q.limit, offset: q.offset };
    },

    async create(accountId: string, body: CreateWorkflowBody) {
      check(body);
      const now = clock.now();
      const row: WorkflowsTable = {
        id: newId('wf', now),
        account_id: accountId,
        slug: body.slug,
        name: body.name,
        triggers: JSON.stringify(body.triggers),
        fields: JSON.stringify(body.fields ?? []),
        reply: body.reply ?? null,
        enabled: body.enabled === false ? 0 : 1,
        created_at: now,
        updated_at: now,
      };
      await withSlug(accountId, body.slug, () =>
        writeTransaction(db, async (trx) => {
          // The unique index refuses it too (withSlug); checking first saves a failed write in the common case.
          await slugFree(trx, accountId, body.slug);
          await repo.insert(trx, row);
        }),
      );
      return toWorkflowRecord(row);
    },

    async update(accountId: string, id: string, body: UpdateWorkflowBody) {
      check(body);
      const row = await withSlug(accountId, body.slug, () => writeTransaction(db, async (trx) => {
        const current = await repo.find(trx, accountId, id, true);
        if (!current) throw notFound('workflow', id);
        if (body.slug !== undefined) await slugFree(trx, accountId, body.slug, id);
        const patch = {
          ...(body.slug !== undefined ? { slug: body.slug } : {}),
          ...(body.name !== undefined ? { name: body.name } : {}),
          ...(body.triggers !== undefined ? { triggers: JSON.stringify(body.triggers) } : {}),
          ...(body.fields !== undefined ? { fields: JSON.stringify(body.fields) } : {}),
          ...(body.reply !== undefined ? { reply: body.reply } : {}),
          ...(body.enabled !== undefined ? { enabled: body.enabled ? 1 : 0 } : {}),
          updated_at: nextUpdateTime(clock, current.updated_at),
        };
        await repo.update(trx, accountId, id, patch);
        return { ...current, ...patch };
      }));
      return toWorkflowRecord(row);
    },

    async delete(accountId: string, id: string) {
      const deleted = await writeTransaction(db, (trx) => repo.delete(trx, accountId, id));
      if (!deleted) throw notFound('workflow', id);
      return { deleted: true };
    },

    /**
     * The workflows a customer message triggers, among the account's enabled ones oldest first (the first with a
     * reply gives the reply); the chat reads them with the conversation, before the exchange's transaction.
     */
    matchingAmong,

    /**
     * Records the runs and emits `workflow.triggered`, inside the exchange's transaction: a workflow fires once
     * per conversation, however often its phrase comes back. `customerTexts` are the customer's messages so far,
     * oldest first, the triggering one included.
     */
    async fire(
      trx: Conn,
      conversation: { id: string; account_id: string; customer_id: string; customer_email: string | null },
      matched: readonly MatchedWorkflow[],
      customerTexts: readonly string[],
      at: number,
    ) {
      if (matched.length === 0) return;
      const already = await repo.firedIn(trx, conversation.account_id, conversation.id, matched.map((w) => w.id));
      const fired: { kind: 'workflow.triggered'; data: Record<string, unknown> }[] = [];
      for (const w of matched) {
        if (already.has(w.id)) continue;
        const extracted = extractFields(w.fields, customerTexts, conversation.customer_email);
        const inserted = await repo.insertRun(trx, {
          workflow_id: w.id,
          conversation_id: conversation.id,
          account_id: conversation.account_id,
          extracted: JSON.stringify(extracted),
          created_at: at,
        });
        if (!inserted) continue;
        fired.push({
          kind: 'workflow.triggered',
          data: { workflowId: w.id, workflowSlug: w.slug, conversationId: conversation.id, customerId: conversation.customer_id, extracted },
        });
      }
      await events.emitMany(trx, conversation.account_id, fired);
    },
  };
}

export type WorkflowsService = ReturnType<typeof createWorkflowsService>;
