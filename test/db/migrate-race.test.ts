import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { test } from 'node:test';
import pg from 'pg';
import { migrateToLatest, openDatabase } from '../../src/db/database.js';
import { PG_URL } from '../helpers/db.js';

// PostgreSQL only: the race is between Kysely's catalog scan and a DROP SCHEMA elsewhere in the same database,
// which SQLite (one database per file) cannot have.
test('migrating one schema while other schemas of the database are dropped does not fail (postgres)', async () => {
  let stop = false;
  const churn = (async () => {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    try {
      while (!stop) {
        const s = `churn_${randomBytes(4).toString('hex')}`;
        await c.query(`CREATE SCHEMA ${s}; CREATE TABLE ${s}.a (id int primary key, b text); CREATE TABLE ${s}.b (id int)`);
        await c.query(`DROP SCHEMA ${s} CASCADE`);
        await new Promise((r) => setTimeout(r, 5));
      }
    } finally {
      await c.end();
    }
  })();
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
      } catch (err) {
        failures.push((err as Error).message);
      } finally {
        await d.close();
        await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      }
    }
  } finally {
    stop = true;
    await churn;
    await admin.end();
  }
  assert.deepEqual(failures, []);
});
