import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import pg from 'pg';
import { migrateToLatest, openDatabase } from '../../src/db/database.js';
import { PG_URL } from '../helpers/db.js';

// PostgreSQL only: the race is between the migrator's catalog scan and a DROP SCHEMA elsewhere in the same
// database, which SQLite (one database per file) cannot have. Kysely's own introspector reads every schema and
// fails on one dropped under it (3F000, 42P01 or 42703 naming the other schema); ours reads only the current one.
test('migrating one schema while other schemas of the database are dropped does not fail (postgres)', async () => {
  let stop = false;
  const churn = async () => {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    try {
      while (!stop) {
        const s = `churn_${randomBytes(4).toString('hex')}`;
        await c.query(`CREATE SCHEMA ${s}; CREATE TABLE ${s}.a (id serial primary key, b text); CREATE TABLE ${s}.b (id int, c text, d text)`);
        await c.query(`DROP SCHEMA ${s} CASCADE`);
        await new Promise((r) => setTimeout(r, 2));
      }
    } finally {
      await c.end();
    }
  };
  const churners = [churn(), churn(), churn()];
  const failures: string[] = [];
  const admin = new pg.Client({ connectionString: PG_URL });
  await admin.connect();
  try {
    for (let i = 0; i < 12; i++) {
      const schema = `mig_${randomBytes(4).toString('hex')}`;
      await admin.query(`CREATE SCHEMA ${schema}`);
      const d = openDatabase(PG_URL, { schema, poolSize: 2 });
      try {
        const applied = await migrateToLatest(d.db, schema);
        assert.ok(applied.length > 0);
        // A second run (a restart, `parley migrate` again) only checks, and must not fail either.
        assert.deepEqual(await migrateToLatest(d.db, schema), []);
      } catch (err) {
        failures.push((err as Error).message);
      } finally {
        await d.close();
        await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      }
    }
  } finally {
    stop = true;
    await Promise.all(churners);
    await admin.end();
  }
  assert.deepEqual(failures, []);
});
