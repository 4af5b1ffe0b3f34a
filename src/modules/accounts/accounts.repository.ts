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
  /** The one lookup on every request: the key by hash joined to its account. */
  async findActiveKeyByHash(db: Conn, hash: string) {
    return (await activeKeyByHash(db, hash)).rows[0];
  },
};
