import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { openDatabase } from '../../src/db/database.js';

// SQLite only: WAL checkpoints are SQLite's; PostgreSQL checkpoints itself.
test('a SQLite file database is checkpointed off the event loop: WAL pages reach the database file without a commit paying for it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-ckpt-'));
  const file = join(dir, 'db.sqlite');
  const database = openDatabase(`sqlite:${file}`);
  try {
    await sql`create table blobs (id integer primary key, body text not null)`.execute(database.db);
    const before = statSync(file).size;
    // ~6 MB in 30 commits: far below the safety-net automatic checkpoint (10,000 pages, ~40 MB).
    for (let i = 0; i < 30; i++) {
      await database.db.transaction().execute(async (trx) => {
        for (let j = 0; j < 20; j++) await sql`insert into blobs (body) values (${'x'.repeat(10_000) + i + j})`.execute(trx);
      });
    }
    const deadline = Date.now() + 5_000;
    while (statSync(file).size < before + 5_000_000 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    assert.ok(statSync(file).size >= before + 5_000_000, `database file ${statSync(file).size} bytes: the WAL was not checkpointed`);
    const n = await sql<{ n: number }>`select count(*) as n from blobs`.execute(database.db);
    assert.equal(n.rows[0]!.n, 600);
  } finally {
    await database.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
