import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import Database from 'better-sqlite3';
import { sql } from 'kysely';
import { startCheckpointer } from '../../src/db/checkpointer.js';
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

test('failing checkpoints are reported once, then at most once per period, and their recovery once; the thread goes on', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-ckpt-'));
  const file = join(dir, 'db.sqlite');
  // Not a database: every checkpoint fails (SQLITE_NOTADB), as every one does on a full disk (SQLITE_FULL), several a
  // second. A real full disk is shown in test/cli/disk-full.test.ts.
  writeFileSync(file, 'x'.repeat(8192));
  const errors: Array<{ message: string; code: string | null; failures: number }> = [];
  let recovered!: (failures: number) => void;
  const back = new Promise<number>((resolve) => (recovered = resolve));
  const checkpointer = startCheckpointer(file, {
    intervalMs: 5,
    maxBackoffMs: 20,
    onError: (message, d) => void errors.push({ message, ...d }),
    onRecovered: (failures) => recovered(failures),
  });
  try {
    // Failing for a while (a few dozen tries at 20 ms apart), then a database again: the next checkpoint works.
    const start = performance.now();
    while (errors.length === 0 || performance.now() - start < 500) await new Promise((r) => setTimeout(r, 20));
    const ok = new Database(join(dir, 'ok.sqlite'));
    ok.exec('create table t (x)');
    ok.close();
    copyFileSync(join(dir, 'ok.sqlite'), file);
    const failures = await back;
    assert.ok(failures > 5, `${failures} failed checkpoints`);
    assert.equal(errors.length, 1, JSON.stringify(errors));
    assert.deepEqual(errors[0], { message: 'file is not a database', code: 'SQLITE_NOTADB', failures: 1 });
  } finally {
    await checkpointer.stop();
    rmSync(dir, { recursive: true, force: true });
  }
});
