import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { describe, test } from 'node:test';
import { Migrator } from 'kysely';
import pg from 'pg';
import { openDatabase, type Database } from '../../src/db/database.js';
import { migrationProvider } from '../../src/db/migrations/index.js';
import { accountsRepository } from '../../src/modules/accounts/accounts.repository.js';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS, PG_URL } from '../helpers/db.js';

for (const dialect of DIALECTS) {
  describe(`knowledge version (${dialect})`, () => {
    const t = useTestApp(dialect);
    const version = () => accountsRepository.knowledgeVersion(t.database.db, t.accountId);

    test('every committed document or FAQ write moves it by one; a refused write does not', async () => {
      const v0 = await version();
      const doc = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Returns', content: 'Thirty days.' } });
      assert.equal(await version(), v0 + 1);
      await t.request('PUT', `/v1/documents/${doc.body.data.id}`, { key: t.key, body: { title: 'Returns policy' } });
      const faq = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'Refunds?', answer: 'Yes.', category: 'billing' } });
      await t.request('DELETE', `/v1/faqs/${faq.body.data.id}`, { key: t.key });
      assert.equal(await version(), v0 + 4);
      const refused = await t.request('PUT', '/v1/documents/doc_00000000000000000000000000', { key: t.key, body: { title: 'x' } });
      assert.equal(refused.status, 404);
      assert.equal(await version(), v0 + 4);
    });

    test('concurrent writes of one account all count, and never queue behind one counter row', async () => {
      const v0 = await version();
      const created = await Promise.all(
        Array.from({ length: 40 }, (_, i) => t.request('POST', '/v1/documents', { key: t.key, body: { title: `Doc ${i}`, content: `Body ${i}` } })),
      );
      assert.ok(created.every((r) => r.status === 201));
      assert.equal(await version(), v0 + 40);
      if (dialect === 'postgres') {
        const rows = await t.database.db.selectFrom('knowledge_versions').select('shard').where('account_id', '=', t.accountId).execute();
        assert.ok(rows.length > 1, `writes spread over ${rows.length} counter row(s)`);
      }
    });

    test('a transaction that writes several entries bumps one counter row (no lock-order deadlock between two of them)', async () => {
      const { accountId: fresh } = await t.account();
      await t.database.db.transaction().execute(async (trx) => {
        for (let i = 0; i < 5; i++) await accountsRepository.bumpKnowledgeVersion(trx, fresh);
      });
      const rows = await t.database.db.selectFrom('knowledge_versions').select(['shard', 'n']).where('account_id', '=', fresh).execute();
      assert.deepEqual(rows.map((r) => Number(r.n)), [5]);
      assert.equal(await accountsRepository.knowledgeVersion(t.database.db, fresh), 5);
    });

    if (dialect === 'sqlite') {
      test('SQLite keeps the version in one row, folding in rows an older version spread it over', async () => {
        const { accountId: fresh, key } = await t.account();
        const rows = () => t.database.db.selectFrom('knowledge_versions').select(['shard', 'n']).where('account_id', '=', fresh).orderBy('shard').execute();
        await t.database.db
          .insertInto('knowledge_versions')
          .values([3, 7, 30].map((shard) => ({ account_id: fresh, shard, n: shard })))
          .execute();
        assert.equal(await accountsRepository.knowledgeVersion(t.database.db, fresh), 40);
        const doc = await t.request('POST', '/v1/documents', { key, body: { title: 'One', content: 'Body.' } });
        assert.equal(doc.status, 201, doc.text);
        assert.deepEqual((await rows()).map((r) => [r.shard, Number(r.n)]), [[0, 41]]);
        await t.request('DELETE', `/v1/documents/${doc.body.data.id}`, { key });
        assert.deepEqual((await rows()).map((r) => [r.shard, Number(r.n)]), [[0, 42]]);
      });
    }
  });
}

for (const dialect of DIALECTS) {
  test(`migration 0006 carries each account's old version over (${dialect})`, async () => {
    let database: Database;
    let drop = async () => {};
    if (dialect === 'sqlite') database = openDatabase('sqlite::memory:');
    else {
      const schema = `kv_${randomBytes(5).toString('hex')}`;
      const admin = new pg.Client({ connectionString: PG_URL });
      await admin.connect();
      await admin.query(`CREATE SCHEMA ${schema}`);
      database = openDatabase(PG_URL, { schema, poolSize: 2 });
      drop = async () => {
        await admin.query(`DROP SCHEMA ${schema} CASCADE`);
        await admin.end();
      };
    }
    try {
      const migrator = new Migrator({ db: database.db, provider: migrationProvider, ...(database.schema ? { migrationTableSchema: database.schema } : {}) });
      const before = await migrator.migrateTo('0005_rundowns');
      assert.equal(before.error, undefined);
      const db = database.db as any;
      for (const [id, v] of [['acct_a', 7], ['acct_b', 0]] as const) {
        await db.insertInto('accounts').values({ id, name: id, plan: 'pro', rate_limit_minute: null, rate_limit_day: null, knowledge_version: v, assistant_settings: null, created_at: 1 }).execute();
      }
      const rest = await migrator.migrateToLatest();
      assert.equal(rest.error, undefined);
      assert.equal(await accountsRepository.knowledgeVersion(database.db, 'acct_a'), 7);
      assert.equal(await accountsRepository.knowledgeVersion(database.db, 'acct_b'), 0);
      await database.db.transaction().execute((trx) => accountsRepository.bumpKnowledgeVersion(trx, 'acct_a'));
      assert.equal(await accountsRepository.knowledgeVersion(database.db, 'acct_a'), 8);
    } finally {
      await database.close();
      await drop();
    }
  });
}
