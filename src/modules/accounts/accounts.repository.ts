import type { Kysely, Transaction } from 'kysely';
import { precompile } from '../../db/precompiled.js';
import type { DB } from '../../db/schema.js';

type Conn = Kysely<DB> | Transaction<DB>;

// Runs in every document/FAQ write: built once per dialect (db/precompiled.ts).
const bumpKnowledge = precompile((db, accountId: string) =>
  db
    .updateTable('accounts')
    .set((eb) => ({ knowledge_version: eb('knowledge_version', '+', 1) }))
    .where('id', '=', accountId),
);

export const accountsRepository = {
  insert(db: Conn, row: DB['accounts'] extends infer T ? Omit<T, 'knowledge_version'> : never) {
    return db.insertInto('accounts').values(row).execute();
  },
  findById(db: Conn, id: string) {
    return db.selectFrom('accounts').selectAll().where('id', '=', id).executeTakeFirst();
  },
  list(db: Conn) {
    return db.selectFrom('accounts').selectAll().orderBy('created_at', 'desc').execute();
  },
  async bumpKnowledgeVersion(db: Conn, accountId: string) {
    await bumpKnowledge(db, accountId);
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
  findActiveKeyByHash(db: Conn, hash: string) {
    return db
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
      .where('api_keys.hash', '=', hash)
      .executeTakeFirst();
  },
};
