import { sql, SqliteAdapter, type Kysely, type Transaction } from 'kysely';
import { lockingRead } from '../../db/locks.js';
import { precompile, precompileRows } from '../../db/precompiled.js';
import type { DB } from '../../db/schema.js';

type Conn = Kysely<DB> | Transaction<DB>;

/** How many counter rows an account's knowledge version is spread over (migration 0006 says why). */
export const KNOWLEDGE_SHARDS = 32;

// Runs in every document/FAQ write: built once per dialect (db/precompiled.ts).
const bumpKnowledge = precompile((db, accountId: string, shard: number) =>
  db
    .insertInto('knowledge_versions')
    .values({ account_id: accountId, shard, n: 1 })
    .onConflict((oc) => oc.columns(['account_id', 'shard']).doUpdateSet((eb) => ({ n: eb('knowledge_versions.n', '+', 1) }))),
);
// SQLite: one writer at a time, so the rows that keep PostgreSQL's writers apart buy nothing, and every read of the
// version (each documents read, documents.routes.ts) sums them. A write there keeps the account's version in row 0
// alone: the sum of its rows plus one, then the other rows (left by writes of an older version) removed, in the same
// transaction, so the sum grows by exactly one as with the other rows.
const bumpKnowledgeInOneRow = precompile((db, accountId: string) =>
  db
    .insertInto('knowledge_versions')
    .values((eb) => ({
      account_id: accountId,
      shard: 0,
      n: eb.selectFrom('knowledge_versions').select(sql<number>`coalesce(sum(n), 0) + 1`.as('n')).where('account_id', '=', accountId),
    }))
    .onConflict((oc) => oc.columns(['account_id', 'shard']).doUpdateSet((eb) => ({ n: eb.ref('excluded.n') }))),
);
const dropOtherKnowledgeRows = precompile((db, accountId: string) =>
  db.deleteFrom('knowledge_versions').where('account_id', '=', accountId).where('shard', '<>', 0),
);
/** An account's knowledge version, selected from its knowledge_versions rows: their sum. */
export const KNOWLEDGE_VERSION = sql<number>`coalesce(sum(n), 0)`;
// Read before every cached documents answer (documents.routes.ts): as rows, so that on SQLite it runs straight on the
// handle (precompileRows).
const readKnowledge = precompileRows(['v'], (db, accountId: string) =>
  db.selectFrom('knowledge_versions').select(KNOWLEDGE_VERSION.as('v')).where('account_id', '=', accountId),
);

// A key's lookup runs on every request the key cache does not answer: each one it has not seen for a second (its
// TTL), and every request with the cache off.
const activeKeyByHash = precompile((db, hash: string) =>
  db
    .selectFrom('api_keys')
    .innerJoin('accounts', 'accounts.id', 'api_keys.account_id')
    .select([
      'api_keys.id as keyId',
      'api_keys.type as keyType',
      'api_keys.scopes as scopes',
      'api_keys.revoked_at as revokedAt',
      'accounts.id as accountId',
      'accounts.plan as plan',
      'accounts.rate_limit_minute as rateLimitMinute',
      'accounts.rate_limit_day as rateLimitDay',
    ])
    .where('api_keys.hash', '=', hash),
);

/**
 * A transaction that writes several entries (a rundown filing suggested FAQs) bumps the same row each time:
 * two such transactions taking rows in different orders could otherwise deadlock.
 */
const shardOfTransaction = new WeakMap<object, number>();
// Round robin from a random start: this process's concurrent writers (as many as its connection pool) never
// share a row, and several processes rarely do.
let nextShard = Math.floor(Math.random() * KNOWLEDGE_SHARDS);

/**
 * The tables holding an account's rows (`account_id`), by the name an account's deletion reports them under, in
 * the order it deletes them: rows before the rows they reference (messages before their conversations, everything
 * before the account). delivery_attempts has no account_id: it is reached through the account's deliveries. The
 * knowledge-version counters and the rundowns' quote records (ids of messages) are bookkeeping, deleted but not reported. A table added with an account_id must be
 * added here: test/modules/accounts/delete.test.ts lists the tables from the database and fails otherwise.
 */
export const OWNED_TABLES = [
  ['deliveries', 'deliveries'],
  ['events', 'events'],
  ['workflowRuns', 'workflow_runs'],
  ['messages', 'messages'],
  ['conversations', 'conversations'],
  ['workflows', 'workflows'],
  ['webhooks', 'webhooks'],
  ['rundownQuotes', 'rundown_quotes'],
  ['rundowns', 'rundowns'],
  ['documents', 'documents'],
  ['faqs', 'faqs'],
  ['knowledgeVersions', 'knowledge_versions'],
  ['idempotencyKeys', 'idempotency_keys'],
  ['keys', 'api_keys'],
] as const satisfies ReadonlyArray<readonly [string, Exclude<keyof DB, 'accounts' | 'delivery_attempts'>]>;
/** The kinds an account's deletion reports, in the order it reports them (the bookkeeping tables are left out). */
export const REPORTED_KINDS = [
  'documents', 'faqs', 'conversations', 'messages', 'workflows', 'workflowRuns', 'rundowns', 'webhooks', 'deliveries', 'deliveryAttempts',
  'events', 'keys', 'idempotencyKeys',
] as const;
export type ReportedKind = (typeof REPORTED_KINDS)[number];
type OwnedKind = (typeof OWNED_TABLES)[number][0] | 'deliveryAttempts';

const reported = (counts: Record<OwnedKind, number>) => Object.fromEntries(REPORTED_KINDS.map((k) => [k, counts[k]])) as Record<ReportedKind, number>;

export const accountsRepository = {
  insert(db: Conn, row: DB['accounts']) {
    return db.insertInto('accounts').values(row).execute();
  },
  /**
   * Serialises an account's check-then-write (a count before an insert) until the transaction ends: the account
   * row is locked on PostgreSQL (locks.ts); SQLite runs one writer at a time.
   */
  async lockAccount(db: Conn, accountId: string) {
    await lockingRead(db, db.selectFrom('accounts').select('id').where('id', '=', accountId)).execute();
  },
  update(db: Conn, id: string, patch: Partial<Pick<DB['accounts'], 'name' | 'plan' | 'rate_limit_minute' | 'rate_limit_day'>>) {
    return db.updateTable('accounts').set(patch).where('id', '=', id).executeTakeFirst();
  },
  findById(db: Conn, id: string) {
    return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
  },
  list(db: Conn) {
    return db.selectFrom('accounts').selectAll().orderBy('created_at', 'desc').execute();
  },
  async bumpKnowledgeVersion(db: Conn, accountId: string) {
    if (db.getExecutor().adapter instanceof SqliteAdapter) {
      await bumpKnowledgeInOneRow(db, accountId);
      await dropOtherKnowledgeRows(db, accountId);
      return;
    }
    let shard = shardOfTransaction.get(db);
    if (shard === undefined) {
      shard = nextShard;
      nextShard = (nextShard + 1) % KNOWLEDGE_SHARDS;
      shardOfTransaction.set(db, shard);
    }
    await bumpKnowledge(db, accountId, shard);
  },
  /** Grows with every committed change to the account's documents and FAQs. */
  async knowledgeVersion(db: Conn, accountId: string): Promise<number> {
    return Number((await readKnowledge(db, accountId))[0]?.[0] ?? 0);
  },
  insertKey(db: Conn, row: DB['api_keys']) {
    return db.insertInto('api_keys').values(row).execute();
  },
  listKeys(db: Conn, accountId: string) {
    return db
      .selectFrom('api_keys')
      .select(['id', 'type', 'scopes', 'hint', 'created_at', 'revoked_at'])
      .where('account_id', '=', accountId)
      .orderBy('created_at', 'desc')
      .orderBy('id', 'desc')
      .execute();
  },
  revokeKey(db: Conn, id: string, at: number) {
    return db.updateTable('api_keys').set({ revoked_at: at }).where('id', '=', id).where('revoked_at', 'is', null).executeTakeFirst();
  },
  findKey(db: Conn, id: string) {
    return db.selectFrom('api_keys').selectAll().where('id', '=', id).executeTakeFirst();
  },
  /** How many rows of each kind the account owns (OWNED_TABLES, and its deliveries' attempts). */
  async countOwned(db: Conn, accountId: string): Promise<Record<ReportedKind, number>> {
    const counts = {} as Record<OwnedKind, number>;
    for (const [kind, table] of OWNED_TABLES) {
      const r = await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
      counts[kind] = Number(r.n);
    }
    const a = await db
      .selectFrom('delivery_attempts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('delivery_id', 'in', (eb) => eb.selectFrom('deliveries').select('id').where('account_id', '=', accountId))
      .executeTakeFirstOrThrow();
    counts.deliveryAttempts = Number(a.n);
    return reported(counts);
  },
  /**
   * Before an account's deletion (PostgreSQL; SQLite has one writer): locks the rows other writers of the account lock
   * first (its webhooks, then its conversations, then its deliveries, each in id order, the order a delivery
   * worker's record and a conversation's erasure take them in), so a write in flight commits before the deletion
   * reads what to delete (and goes with the rest), and one that comes after finds nothing. The account row itself
   * is locked by lockAccount: every insert of a row referencing it waits for it.
   */
  async lockOwnedRows(db: Conn, accountId: string) {
    for (const table of ['webhooks', 'conversations', 'deliveries'] as const) {
      await lockingRead(db, db.selectFrom(table).select('id').where('account_id', '=', accountId).orderBy('id')).execute();
    }
  },
  /** Deletes every row the account owns and then the account, in OWNED_TABLES' order; answers the rows deleted per kind. */
  async deleteOwned(db: Conn, accountId: string): Promise<Record<ReportedKind, number>> {
    const attempts = await db
      .deleteFrom('delivery_attempts')
      .where('delivery_id', 'in', (eb) => eb.selectFrom('deliveries').select('id').where('account_id', '=', accountId))
      .executeTakeFirst();
    const counts = { deliveryAttempts: Number(attempts.numDeletedRows) } as Record<OwnedKind, number>;
    for (const [kind, table] of OWNED_TABLES) {
      counts[kind] = Number((await db.deleteFrom(table).where('account_id', '=', accountId).executeTakeFirst()).numDeletedRows);
    }
    await db.deleteFrom('accounts').where('id', '=', accountId).execute();
    return reported(counts);
  },
  /** The one lookup on every request: the key by hash joined to its account. */
  async findActiveKeyByHash(db: Conn, hash: string) {
    return (await activeKeyByHash(db, hash)).rows[0];
  },
};
