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
        for (let i = 0; i < 8; i++) assert.equal((await find()).name, 'A');
        const names = await prepared();
        assert.equal(names.length, 1, `one statement prepared for eight runs: ${names.join(', ')}`);
        // Planned once after five runs (PostgreSQL's own choice under its default plan_cache_mode): planning the
        // chat's statements cost more than running them.
        const plans = await sql<{ generic_plans: number; custom_plans: number }>`select generic_plans::int, custom_plans::int from pg_prepared_statements where name = ${names[0]}`.execute(conn);
        assert.ok(plans.rows[0]!.generic_plans > 0, `the statement runs on a generic plan: ${JSON.stringify(plans.rows[0])}`);

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
