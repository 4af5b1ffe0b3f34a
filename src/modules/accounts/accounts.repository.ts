import { PostgresAdapter, sql, SqliteAdapter, type Kysely, type RawBuilder, type Transaction } from 'kysely';
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
const versionIn = (rows: ReadonlyArray<readonly [unknown]>) => Number(rows[0]?.[0] ?? 0);

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
      'accounts.deletion_started_at as deletionStartedAt',
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
 * knowledge-version counters, the rundowns' quote records (ids of messages) and the scheduler's claims on windows are bookkeeping, deleted but not reported. A table added with an account_id must be
 * added here and to CHUNKS: test/modules/accounts/delete.test.ts lists the tables from the database and fails otherwise.
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
  ['rundownClaims', 'rundown_claims'],
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

export type OwnedCounts = Record<OwnedKind, number>;
type OwnedTable = (typeof OWNED_TABLES)[number][1];

/** The kinds an account's deletion reports, from the counts of every kind. */
export const reportedCounts = (counts: OwnedCounts) => Object.fromEntries(REPORTED_KINDS.map((k) => [k, counts[k]])) as Record<ReportedKind, number>;
/** Every kind at zero: what an account's deletion adds its chunks' counts to. */
export const noOwnedRows = (): OwnedCounts => Object.fromEntries([...OWNED_TABLES.map(([k]) => k), 'deliveryAttempts'].map((k) => [k, 0])) as OwnedCounts;

/**
 * The account's deliveries: through deliveries_account, which a query can use only by stating its predicate,
 * `id is not null` (migration 0016 says why); without it, a scan of every account's deliveries.
 */
const deliveriesOf = (db: Conn, accountId: string) => db.selectFrom('deliveries').where('account_id', '=', accountId).where('id', 'is not', null);

/**
 * How deleteChunk reaches each owned table: `key`, the columns naming one row (its primary key); `order`, the order
 * its rows are taken in, that of an index leading with account_id, so a chunk is the first entries of the account's
 * range of that index on both dialects (unordered, PostgreSQL could take a large account's rows by a scan of the table
 * that stops at the chunk's last row, from the start of the table each time); and `children`, the rows that reference
 * one of its rows (a foreign key, or a delivery's attempts, which have none), deleted in the same chunk just before
 * the rows they reference. Children are mostly gone by then (OWNED_TABLES deletes them first); what is left is what
 * was written after their turn (a message sent with a key a node still had cached), which would otherwise make the
 * parent's delete fail on the foreign key. The deliveries' attempts are the exception: reached only through their
 * delivery, they are deleted with it, a few per delivery.
 */
type Children = ReadonlyArray<{ kind: OwnedKind; table: 'delivery_attempts' | 'messages' | 'workflow_runs' | 'rundown_quotes'; column: string }>;
const CHUNKS: Record<OwnedTable, { key: readonly string[]; order: readonly string[]; children?: Children }> = {
  deliveries: { key: ['id'], order: ['id'], children: [{ kind: 'deliveryAttempts', table: 'delivery_attempts', column: 'delivery_id' }] },
  events: { key: ['id'], order: ['created_at', 'id'] },
  workflow_runs: { key: ['workflow_id', 'conversation_id'], order: ['workflow_id', 'created_at', 'conversation_id'] },
  messages: { key: ['id'], order: ['created_at'] },
  conversations: {
    key: ['id'],
    order: ['created_at', 'id'],
    children: [
      { kind: 'messages', table: 'messages', column: 'conversation_id' },
      { kind: 'workflowRuns', table: 'workflow_runs', column: 'conversation_id' },
    ],
  },
  workflows: { key: ['id'], order: ['created_at', 'id'] },
  webhooks: { key: ['id'], order: ['created_at', 'id'] },
  rundown_quotes: { key: ['rundown_id', 'position', 'message_id'], order: ['conversation_id'] },
  rundown_claims: { key: ['account_id', 'from_ts', 'to_ts'], order: ['from_ts', 'to_ts'] },
  rundowns: { key: ['id'], order: ['created_at', 'id'], children: [{ kind: 'rundownQuotes', table: 'rundown_quotes', column: 'rundown_id' }] },
  documents: { key: ['id'], order: ['created_at', 'id'] },
  faqs: { key: ['id'], order: ['created_at', 'id'] },
  knowledge_versions: { key: ['account_id', 'shard'], order: ['shard'] },
  idempotency_keys: { key: ['account_id', 'key'], order: ['key'] },
  api_keys: { key: ['id'], order: ['created_at'] },
};

/** In a statement about another table's rows (`ref`, its account_id column): that account is not being deleted. */
export const accountNotBeingDeleted = (ref: string) =>
  sql<boolean>`not exists (select 1 from accounts deleting where deleting.id = ${sql.ref(ref)} and deleting.deletion_started_at is not null)`;

/**
 * The same test, as a filter of each row read rather than a join: for a statement that walks an index in order and
 * stops at its LIMIT (the webhook worker's claim). PostgreSQL may plan `not exists` as an anti-join, and with a few
 * thousand due deliveries in a large table it then read and sorted every due delivery on every claim
 * (bench/webhooks/claim-plan.mjs). A scalar subquery cannot be made a join; each row read costs one primary-key probe.
 */
export const accountNotBeingDeletedPerRow = (ref: string) =>
  sql<boolean>`(select deleting.deletion_started_at from accounts deleting where deleting.id = ${sql.ref(ref)}) is null`;

/**
 * The DELETE of a chunk of a table no other table references: the rows `chosen` (`from … where … order by … limit n`,
 * locking them on PostgreSQL) names, deleted through the table's primary key.
 *
 * On PostgreSQL not as `key in (select …)`: planned as a join, with the subquery's LIMIT estimated as n rows, while
 * the chunk was more than about 1% of the table it hashed the chunk's keys and matched them against a sequential scan
 * of the whole table (every account's rows, and the dead ones of the chunks before): each chunk cost as much as the
 * table (2,000 rows of 80,000: 20-30 ms against 2-7; bench/accounts/chunk-plan.ts, BENCHMARKS.md). At 440,000 it
 * turned to a nested loop of index probes, still 3-4 times the cost of the plans below for a composite key.
 * `= any(array(select …))` makes the subquery an InitPlan run once, whose array the DELETE then looks up: an Index
 * Scan of the primary key, for a single-column key. A row comparison with such an array is not an index condition, so
 * a composite key goes by the rows' physical addresses instead (`ctid`, a Tid Scan):
 * the subquery's FOR UPDATE keeps the rows where they are until the transaction ends, and both scans share the
 * statement's snapshot. One difference from a key: a row another transaction updated and committed after the
 * statement began is locked at its new version, which the snapshot does not see, so it stays (locked) for the next
 * chunk or the deletion's last transaction instead of going in this one: the counts are still what was deleted. SQLite
 * already looks each key of the subquery's list up in the primary key (SEARCH … USING … INDEX, LIST SUBQUERY), and has
 * no ctid: its statement is left as it was.
 */
function chunkDelete(postgres: boolean, table: OwnedTable, key: readonly string[], chosen: RawBuilder<unknown>) {
  const columns = sql.join(key.map((c) => sql.ref(c)));
  if (!postgres) return sql`delete from ${sql.table(table)} where ${key.length === 1 ? columns : sql`(${columns})`} in (select ${columns} ${chosen})`;
  if (key.length === 1) return sql`delete from ${sql.table(table)} where ${columns} = any(array(select ${columns} ${chosen}))`;
  return sql`delete from ${sql.table(table)} where ctid = any(array(select ctid ${chosen}))`;
}

/**
 * `column` is one of `ids`, a chunk's parents (deleteChunk). On PostgreSQL as an InitPlan's array
 * (`array(select unnest(…))`): given the ids as values (a parameter each, or one array), it plans the statement for
 * that many and, with 2,000 of a table's 80,000 rows, chose to scan the table (the deliveries' attempts: 11-15 ms a
 * chunk against 3 by their primary key, bench/accounts/chunk-plan.ts); an InitPlan's array it takes for a few values,
 * each looked up in the index. One parameter too, whatever the count: one prepared statement for every chunk. SQLite
 * searches the index for each value of a list: as it was.
 */
const among = (postgres: boolean, column: string, ids: readonly string[]) =>
  postgres ? sql`${sql.ref(column)} = any(array(select unnest(${ids}::text[])))` : sql`${sql.ref(column)} in (${sql.join(ids)})`;

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
  /** The first step of the account's deletion (the service's deleteAccount says what follows from it). */
  async markDeletionStarted(db: Conn, id: string, at: number) {
    await db.updateTable('accounts').set({ deletion_started_at: at }).where('id', '=', id).where('deletion_started_at', 'is', null).execute();
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
  /**
   * Grows with every committed change to the account's documents and FAQs. A number itself when SQLite can read it
   * at once (readKnowledge.now), so a kept read's answer goes out without a promise; else a promise of it.
   */
  knowledgeVersion(db: Conn, accountId: string): number | Promise<number> {
    const rows = readKnowledge.now(db, accountId);
    return rows ? versionIn(rows) : readKnowledge(db, accountId).then(versionIn);
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
      const r =
        table === 'deliveries'
          ? await deliveriesOf(db, accountId).select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow()
          : await db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', accountId).executeTakeFirstOrThrow();
      counts[kind] = Number(r.n);
    }
    const a = await db
      .selectFrom('delivery_attempts')
      .select((eb) => eb.fn.countAll<number>().as('n'))
      .where('delivery_id', 'in', deliveriesOf(db, accountId).select('id'))
      .executeTakeFirstOrThrow();
    counts.deliveryAttempts = Number(a.n);
    return reportedCounts(counts);
  },
  /**
   * Before an account's deletion (PostgreSQL; SQLite has one writer): locks the rows other writers of the account lock
   * first (its webhooks, then its conversations, then its deliveries, each in id order, the order a delivery
   * worker's record and a conversation's erasure take them in), so a write in flight commits before the deletion
   * reads what to delete (and goes with the rest), and one that comes after finds nothing. The account row itself
   * is locked by lockAccount: every insert of a row referencing it waits for it. Answers the ids of its deliveries, whose
   * attempts deleteOwned deletes.
   */
  async lockOwnedRows(db: Conn, accountId: string): Promise<{ deliveryIds: string[] }> {
    for (const table of ['webhooks', 'conversations'] as const) {
      await lockingRead(db, db.selectFrom(table).select('id').where('account_id', '=', accountId).orderBy('id')).execute();
    }
    const deliveries = await lockingRead(db, deliveriesOf(db, accountId).select('id').orderBy('id')).execute();
    return { deliveryIds: deliveries.map((d) => d.id) };
  },
  /**
   * Deletes every row the account owns and then the account, in OWNED_TABLES' order, after the attempts of
   * `deliveryIds` (lockOwnedRows: every delivery of the account, locked; an attempt is recorded only under a lease on its
   * delivery's row, so none can be added to another); answers the rows deleted per kind. By id rather than through a
   * subquery on the account's deliveries: PostgreSQL planned that from statistics taken before the chunks had deleted
   * them (a join reading every attempt of the table), and by now there are few.
   */
  async deleteOwned(db: Conn, accountId: string, deliveryIds: readonly string[]): Promise<OwnedCounts> {
    const counts = { deliveryAttempts: 0 } as OwnedCounts;
    for (let i = 0; i < deliveryIds.length; i += 1_000) {
      const r = await db.deleteFrom('delivery_attempts').where('delivery_id', 'in', deliveryIds.slice(i, i + 1_000)).executeTakeFirst();
      counts.deliveryAttempts += Number(r.numDeletedRows);
    }
    for (const [kind, table] of OWNED_TABLES) {
      const q = db.deleteFrom(table).where('account_id', '=', accountId);
      counts[kind] = Number((await (table === 'deliveries' ? q.where('id', 'is not', null) : q).executeTakeFirst()).numDeletedRows);
    }
    await db.deleteFrom('accounts').where('id', '=', accountId).execute();
    return counts;
  },
  /**
   * Deletes at most `rows` of the account's rows in `table`, with the rows referencing them (CHUNKS), and answers how
   * many of each kind it deleted: none when the account has none left there that another transaction does not hold.
   * One chunk of an account's deletion, run in a transaction of its own.
   *
   * The rows are taken in the order of an index and locked on PostgreSQL, passing over those another transaction holds
   * (FOR UPDATE SKIP LOCKED, in the walk: the first `rows` free ones). Another run of the same deletion holds the rows
   * of its own chunk: the two take turns down the same table, each row deleted (and counted) by one of them, instead of
   * this one waiting for the other's commit and then finding its rows gone, which ended the table for it (it went on
   * to the next table and the first run's last transaction took what was left). A write in flight on a row (a worker
   * recording an attempt on its delivery, a message added to a conversation) is passed over the same way: a later
   * chunk takes the row once it is free, or the deletion's last transaction, which waits for it (lockOwnedRows).
   *
   * A table whose rows others reference: their ids are read first (deliveries in id order, the order a worker's
   * record of a batch locks them in), so a write that comes after finds nothing to write to (a worker's record is
   * conditional on its lease: no row, no attempt); then the rows referencing them, then they. Any other table: one
   * DELETE of the rows a bounded subquery names and locks (chunkDelete).
   */
  async deleteChunk(db: Conn, accountId: string, table: OwnedTable, rows: number): Promise<Partial<OwnedCounts>> {
    const { key, order, children } = CHUNKS[table];
    const kind = OWNED_TABLES.find(([, t]) => t === table)![0];
    const postgres = db.getExecutor().adapter instanceof PostgresAdapter;
    // A literal LIMIT: PostgreSQL plans a prepared statement once for all its runs (database.ts), and would plan a bound
    // one as an unknown share of the table. SQLite has one writer (no row is ever held by another) and no FOR UPDATE.
    const claimed = postgres ? sql` for update skip locked` : sql``;
    const ordered = sql`order by ${sql.join(order.map((c) => sql.ref(c)))} limit ${sql.lit(rows)}${claimed}`;
    if (children) {
      const parents = table as 'deliveries' | 'conversations' | 'rundowns';
      // Only deliveries_account is partial: its predicate stated (deliveriesOf).
      const extra = parents === 'deliveries' ? sql` and id is not null` : sql``;
      const ids = (await sql<{ id: string }>`select id from ${sql.table(parents)} where account_id = ${accountId}${extra} ${ordered}`.execute(db)).rows.map((r) => r.id);
      if (ids.length === 0) return {};
      const counts: Partial<OwnedCounts> = {};
      for (const c of children) {
        const r = await sql`delete from ${sql.table(c.table)} where ${among(postgres, c.column, ids)}`.execute(db);
        counts[c.kind] = (counts[c.kind] ?? 0) + Number(r.numAffectedRows ?? 0);
      }
      const r = await sql`delete from ${sql.table(parents)} where ${among(postgres, 'id', ids)}`.execute(db);
      counts[kind] = Number(r.numAffectedRows ?? 0);
      return counts;
    }
    const r = await chunkDelete(postgres, table, key, sql`from ${sql.table(table)} where account_id = ${accountId} ${ordered}`).execute(db);
    return { [kind]: Number(r.numAffectedRows ?? 0) };
  },
  /** The one lookup on every request: the key by hash joined to its account. */
  async findActiveKeyByHash(db: Conn, hash: string) {
    return (await activeKeyByHash(db, hash)).rows[0];
  },
};
