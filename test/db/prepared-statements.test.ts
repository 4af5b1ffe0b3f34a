import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import pg from 'pg';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/db.js';

// PostgreSQL runs the service's parameterised queries as named prepared statements (database.ts); they must keep
// working when what they were prepared against changes under them.
for (const dialect of DIALECTS) {
  describe(`prepared statements (${dialect})`, { skip: dialect === 'sqlite' && 'PostgreSQL only: better-sqlite3 statements are prepared by the process itself' }, () => {
    let t: TestDatabase;
    before(async () => {
      t = await createTestDatabase(dialect);
      await t.db
        .insertInto('accounts')
        .values({ id: 'acct_a', name: 'A', plan: 'pro', rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 1 })
        .execute();
    });
    after(() => t?.cleanup());

    test('a query with parameters is prepared once per connection, and survives its table changing shape and the statements being discarded', async () => {
      await t.db.connection().execute(async (conn) => {
        const find = () => conn.selectFrom('accounts').selectAll().where('id', '=', 'acct_a').executeTakeFirstOrThrow();
        const prepared = async () =>
          (await sql<{ name: string }>`select name from pg_prepared_statements where statement = 'select * from "accounts" where "id" = $1'`.execute(conn)).rows.map((r) => r.name);
        assert.equal((await find()).name, 'A');
        assert.equal((await find()).name, 'A');
        // Planned for its values at every run, as an unnamed statement is: a generic plan could suit one account
        // and not another.
        assert.equal((await sql<{ plan_cache_mode: string }>`show plan_cache_mode`.execute(conn)).rows[0]?.plan_cache_mode, 'force_custom_plan');
        const names = await prepared();
        assert.equal(names.length, 1, `one statement prepared for two runs: ${names.join(', ')}`);

        // Another node's migration adds a column: `select *` prepared before it would fail with "cached plan must
        // not change result type".
        const admin = new pg.Client({ connectionString: t.url });
        await admin.connect();
        try {
          await admin.query('ALTER TABLE accounts ADD COLUMN extra text');
        } finally {
          await admin.end();
        }
        const after = (await find()) as Record<string, unknown>;
        assert.equal(after.name, 'A');
        assert.ok('extra' in after, 'the new column is read');
        assert.equal((await find()).name, 'A');

        // A pooler in front of PostgreSQL may drop every statement of the session.
        await sql`discard all`.execute(conn);
        assert.deepEqual(await prepared(), []);
        assert.equal((await find()).name, 'A');
        assert.equal((await prepared()).length, 1, 'prepared again');
      });
    });
  });
}
