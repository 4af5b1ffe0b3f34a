import { sql, SqliteAdapter, type ExpressionBuilder, type Kysely, type QueryCreator, type Selectable, type SelectQueryBuilder, type SqlBool, type Transaction, type Updateable, type UpdateObject } from 'kysely';
import { jsonArrayFrom as postgresJsonArrayFrom } from 'kysely/helpers/postgres';
import { jsonArrayFrom as sqliteJsonArrayFrom } from 'kysely/helpers/sqlite';
import { lockingRead } from '../../db/locks.js';
import { insertOnlyWith, insertRowsWhere, onlyWithRows } from '../../db/only-with.js';
import { pageLimit } from '../../db/pagination.js';
import { precompile, precompileRows } from '../../db/precompiled.js';
import { accountNotBeingDeleted, KNOWLEDGE_VERSION } from '../accounts/accounts.repository.js';
import type { AloneChange } from '../webhooks/events.js';
import type { ConversationsTable, DB, MessagesTable, WorkflowsTable } from '../../db/schema.js';

type Conn = Kysely<DB> | Transaction<DB>;
/** The values an update of a conversation sets. */
type ConversationPatch = UpdateObject<DB, 'conversations'>;

/** A conversation's messages (the account checked too). */
const ofConversation = (db: Conn, accountId: string, conversationId: string) =>
  db.selectFrom('messages').where('account_id', '=', accountId).where('conversation_id', '=', conversationId);

/** Conversation order: time, then position (`seq` keeps one millisecond's messages in order), then id. */
const inOrder = <Q extends SelectQueryBuilder<DB, 'messages', object>>(q: Q, direction: 'asc' | 'desc') =>
  q.orderBy('created_at', direction).orderBy('seq', direction).orderBy('id', direction) as Q;

/** The messages a reply reads (the end of the transcript) and the workflows a message is matched against. */
const RECENT_COLUMNS = ['role', 'content', 'created_at', 'seq', 'id'] as const;
const WORKFLOW_COLUMNS = ['id', 'slug', 'triggers', 'fields', 'reply', 'created_at', 'updated_at'] as const;
type Recent = Pick<MessagesTable, (typeof RECENT_COLUMNS)[number]>;
export type EnabledWorkflow = Pick<WorkflowsTable, (typeof WORKFLOW_COLUMNS)[number]>;

/** How many webhooks an event of the account may have a delivery for (see chat.service's writes made alone). */
const enabledWebhooks = (eb: ExpressionBuilder<DB, 'accounts'>) =>
  eb.selectFrom('webhooks').select((e) => e.fn.countAll().as('n')).whereRef('webhooks.account_id', '=', 'accounts.id').where('webhooks.enabled', '=', 1);

/**
 * A conversation with everything a reply reads: its account's assistant settings and knowledge version (the sum
 * of the account's counter rows), how many enabled webhooks it has, the last `n` messages and the account's
 * enabled workflows, as JSON arrays. One statement where there were five: on PostgreSQL each statement is a socket
 * write and a read, and is parsed and executed by a backend, which are most of a message's cost there. Built once
 * per dialect; the two arrays are put in order by the caller (an aggregate over an ordered subquery is not
 * promised to keep its order).
 */
const findForReply = precompile((db, accountId: string, id: string, n: number) => {
  const jsonArrayFrom = db.getExecutor().adapter instanceof SqliteAdapter ? sqliteJsonArrayFrom : postgresJsonArrayFrom;
  return db
    .selectFrom('conversations')
    .innerJoin('accounts', 'accounts.id', 'conversations.account_id')
    .selectAll('conversations')
    .select('accounts.assistant_settings')
    .select((eb) => [
      eb
        .selectFrom('knowledge_versions')
        .select(KNOWLEDGE_VERSION.as('v'))
        .whereRef('knowledge_versions.account_id', '=', 'conversations.account_id')
        .as('knowledge_version'),
      jsonArrayFrom(
        inOrder(
          eb
            .selectFrom('messages')
            .select(RECENT_COLUMNS)
            .whereRef('messages.account_id', '=', 'conversations.account_id')
            .whereRef('messages.conversation_id', '=', 'conversations.id'),
          'desc',
        ).limit(pageLimit(n)),
      ).as('recent'),
      enabledWebhooks(eb).as('enabled_webhooks'),
      jsonArrayFrom(
        eb
          .selectFrom('workflows')
          .select(WORKFLOW_COLUMNS)
          .whereRef('workflows.account_id', '=', 'conversations.account_id')
          .where('workflows.enabled', '=', 1),
      ).as('workflows'),
    ])
    .where('conversations.account_id', '=', accountId)
    .where('conversations.id', '=', id);
});

/** What starting a conversation reads: the account's assistant settings and its number of enabled webhooks. */
const forStart = precompileRows(['assistant_settings', 'enabled_webhooks'], (db, accountId: string) =>
  db.selectFrom('accounts').select((eb) => ['assistant_settings', enabledWebhooks(eb).as('enabled_webhooks')]).where('id', '=', accountId),
);

/** SQLite answers a JSON aggregate as text, PostgreSQL's driver as the parsed value. */
const jsonRows = <T>(v: unknown): T[] => (typeof v === 'string' ? (JSON.parse(v) as T[]) : ((v ?? []) as T[]));

/** The figures of a conversation that one exchange (a customer message and its reply) sets. */
export type ExchangeFigures = Pick<Selectable<ConversationsTable>, 'message_count' | 'answered_count' | 'unanswered_streak' | 'last_message_at'>;
/** The row as the caller read it, which an exchange decided from it requires. */
export interface ExchangeExpectation {
  messageCount: number;
  escalated: boolean;
  customerEmail: string | null;
}
interface OpenConditions {
  idleBefore?: number;
  expect?: ExchangeExpectation & { lastAt: number };
}

/** The UPDATE of updateOpen, without its RETURNING (see there). */
function openUpdate(db: QueryCreator<DB>, accountId: string, id: string, patch: ConversationPatch, cond: OpenConditions) {
  let q = db.updateTable('conversations').set(patch).where('account_id', '=', accountId).where('id', '=', id).where('ended_at', 'is', null);
  if (cond.idleBefore !== undefined) q = q.where('last_message_at', '<', cond.idleBefore);
  const e = cond.expect;
  if (e) {
    q = q
      .where('escalated_at', e.escalated ? 'is not' : 'is', null)
      .where('customer_email', e.customerEmail === null ? 'is' : '=', e.customerEmail)
      .where('last_message_at', '<=', e.lastAt)
      .where('message_count', '=', e.messageCount);
  }
  return q;
}

export const chatRepository = {
  /**
   * The conversation, its account's assistant settings (JSON or null), knowledge version and number of enabled
   * webhooks, its last `n` messages (oldest first) and the account's enabled workflows (oldest first);
   * undefined when not found.
   */
  async findForReply(db: Conn, accountId: string, id: string, n: number) {
    const row = (await findForReply(db, accountId, id, n)).rows[0];
    if (!row) return undefined;
    const { recent, workflows, enabled_webhooks, ...conversation } = row;
    return {
      ...conversation,
      // PostgreSQL's count is a bigint, which its driver answers as a string.
      enabled_webhooks: Number(enabled_webhooks ?? 0),
      knowledge_version: Number(row.knowledge_version ?? 0),
      recent: jsonRows<Recent>(recent).sort((a, b) => a.created_at - b.created_at || a.seq - b.seq || (a.id < b.id ? -1 : 1)),
      workflows: jsonRows<EnabledWorkflow>(workflows).sort((a, b) => a.created_at - b.created_at || (a.id < b.id ? -1 : 1)),
    };
  },
  /**
   * What starting a conversation reads, in one statement: the account's assistant settings (JSON or null: none saved,
   * or no such account) and how many enabled webhooks it has.
   */
  async forStart(db: Conn, accountId: string) {
    const [settings = null, webhooks = 0] = (await forStart(db, accountId))[0] ?? [];
    // PostgreSQL's count is a bigint, which its driver answers as a string.
    return { settings, enabledWebhooks: Number(webhooks) };
  },
  find(db: Conn, accountId: string, id: string) {
    return db.selectFrom('conversations').selectAll().where('account_id', '=', accountId).where('id', '=', id).executeTakeFirst();
  },
  insertConversation(db: Conn, row: Selectable<ConversationsTable>) {
    return db.insertInto('conversations').values(row).execute();
  },
  /** The insert itself (not run): the caller writes it with the messages' events. */
  insertMessages(db: QueryCreator<DB>, rows: MessagesTable[]) {
    return db.insertInto('messages').values(rows);
  },
  /** Every message of a conversation, in conversation order. */
  messages(db: Conn, accountId: string, conversationId: string) {
    return inOrder(ofConversation(db, accountId, conversationId).selectAll(), 'asc').execute();
  },
  /** What the customer wrote in a conversation, oldest first (a workflow's fields are read from all of it). */
  async customerTexts(db: Conn, accountId: string, conversationId: string) {
    const rows = await inOrder(ofConversation(db, accountId, conversationId).select('content').where('role', '=', 'customer'), 'asc').execute();
    return rows.map((r) => r.content);
  },
  /**
   * The conversation, read inside the caller's transaction and locked until it ends (FOR UPDATE on PostgreSQL;
   * SQLite runs one write transaction at a time), so decisions made from it (escalating, asking for an email)
   * cannot race another request's. Undefined when it does not exist.
   */
  findLocked(db: Conn, accountId: string, id: string) {
    return lockingRead(db, db.selectFrom('conversations').selectAll().where('account_id', '=', accountId).where('id', '=', id)).executeTakeFirst();
  },
  /**
   * Updates a conversation that is still open, and still as the caller decided from: with `idleBefore`, idle since
   * then; with `expect`, escalated or not, with that contact address, that many messages and none after `lastAt`.
   * The conditions are part of the UPDATE, so a change committed meanwhile (PostgreSQL re-checks the row it waited
   * for) makes it miss. Answers the updated row, or undefined when the conditions no longer held.
   */
  updateOpen(db: Conn, accountId: string, id: string, patch: ConversationPatch, cond: OpenConditions = {}) {
    return openUpdate(db, accountId, id, patch, cond).returningAll().executeTakeFirst();
  },
  /**
   * Counts one customer message and its reply on an open conversation: sets the figures the caller worked out
   * from the row it read, so `expect` must hold that row's `messageCount` unless the caller holds the row's lock
   * (findLocked). Answers the updated row, or undefined when it had ended meanwhile — or, with `expect`, when it
   * no longer is as the caller decided from (message count, escalated or not, contact address, no message later
   * than `at`).
   */
  recordExchange(db: Conn, accountId: string, id: string, figures: ExchangeFigures, expect?: ExchangeExpectation) {
    return chatRepository.exchange(db, accountId, id, figures, expect).returningAll().executeTakeFirst();
  },
  /** recordExchange's UPDATE, not run. */
  exchange(db: QueryCreator<DB>, accountId: string, id: string, figures: ExchangeFigures, expect?: ExchangeExpectation) {
    return openUpdate(db, accountId, id, figures, expect ? { expect: { ...expect, lastAt: figures.last_message_at } } : {});
  },
  /**
   * PostgreSQL: recordExchange's UPDATE (`expect` required) and the insert of the exchange's messages, as the parts
   * of the one statement events.emitAlone writes them in with their events. That statement is compiled once per
   * shape: escalated or not and a contact address or none choose the UPDATE's conditions (`is not null`, `is null`,
   * `= $n`), the messages' columns the insert's.
   */
  exchangeAlone(accountId: string, id: string, figures: ExchangeFigures, expect: ExchangeExpectation, rows: MessagesTable[]) {
    const { escalated, customerEmail, messageCount } = expect;
    const messages = onlyWithRows<'messages'>(rows);
    const args = { accountId, id, figures, messageCount, messages: messages.json, ...(customerEmail === null ? {} : { customerEmail }) };
    return {
      shape: `${escalated ? 'escalated' : 'not escalated'}, ${customerEmail === null ? 'no email' : 'email'}, messages ${messages.columns.join(' ')}`,
      args,
      change: (q, a, guard) => {
        const u = chatRepository.exchange(q, a.accountId, a.id, a.figures, { messageCount: a.messageCount, escalated, customerEmail: a.customerEmail ?? null });
        return guard ? u.where(guard) : u;
      },
      alongside: (q, onlyWith, a) => insertOnlyWith(q, 'messages', messages.columns, a.messages, onlyWith),
    } satisfies AloneChange<typeof args, 'conversations', 'messages'>;
  },
  /**
   * PostgreSQL: the insert of a new conversation and of its first messages, as the parts of the one statement
   * events.emitAlone writes them in with their events. The conversation is inserted only where the statement's guard
   * holds, the messages only with it. Compiled once per shape: the rows' columns choose the inserts'.
   */
  startAlone(row: Selectable<ConversationsTable>, rows: MessagesTable[]) {
    const conversation = onlyWithRows<'conversations'>([row]);
    const messages = onlyWithRows<'messages'>(rows);
    const args = { conversation: conversation.json, messages: messages.json };
    return {
      shape: `start, conversation ${conversation.columns.join(' ')}, messages ${messages.columns.join(' ')}`,
      args,
      // No guard without a fan-out: there are no deliveries to count webhooks for.
      change: (q, a, guard) => insertRowsWhere(q, 'conversations', conversation.columns, a.conversation, guard ?? sql<SqlBool>`true`),
      alongside: (q, onlyWith, a) => insertOnlyWith(q, 'messages', messages.columns, a.messages, onlyWith),
    } satisfies AloneChange<typeof args, 'conversations', 'messages'>;
  },
  /**
   * Escalates a conversation that is open and not escalated yet. Both conditions are in the UPDATE, so of
   * concurrent escalations exactly one changes the row (PostgreSQL re-checks the row it waited for): the updated
   * row for that one, undefined for the others.
   */
  markEscalated(db: Conn, accountId: string, id: string, reason: string, at: number) {
    return db
      .updateTable('conversations')
      .set({ status: 'escalated', escalation_reason: reason, escalated_at: at })
      .where('account_id', '=', accountId)
      .where('id', '=', id)
      .where('ended_at', 'is', null)
      .where('escalated_at', 'is', null)
      .returningAll()
      .executeTakeFirst();
  },
  async update(db: Conn, accountId: string, id: string, patch: Updateable<ConversationsTable>) {
    await db.updateTable('conversations').set(patch).where('account_id', '=', accountId).where('id', '=', id).execute();
  },
  /** Open conversations with no message since `before`, across accounts but those being deleted (for the idle sweeper). */
  idle(db: Conn, before: number, limit: number) {
    return db
      .selectFrom('conversations')
      .select(['id', 'account_id'])
      .where('status', 'in', ['active', 'escalated'])
      .where('ended_at', 'is', null)
      .where('last_message_at', '<', before)
      .where(accountNotBeingDeleted('conversations.account_id'))
      .orderBy('last_message_at')
      .limit(pageLimit(limit))
      .execute();
  },
};
