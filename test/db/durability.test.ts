import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.js';
import { openDatabase } from '../../src/db/database.js';

// SQLite only: PostgreSQL's commit durability is the server's own setting (synchronous_commit, on by default).
test('SQLITE_SYNCHRONOUS: full unless the operator chooses normal; anything else is refused naming the variable', () => {
  assert.equal(loadConfig({}).sqliteSynchronous, 'full');
  assert.equal(loadConfig({ SQLITE_SYNCHRONOUS: 'NORMAL' }).sqliteSynchronous, 'normal');
  assert.throws(() => loadConfig({ SQLITE_SYNCHRONOUS: 'off' }), /SQLITE_SYNCHRONOUS="off": must be full or normal/);
});

test('a SQLite file database syncs every commit (FULL) by default, NORMAL only when asked', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-sync-'));
  try {
    for (const [opts, expected] of [[{}, 2], [{ sqliteSynchronous: 'full' as const }, 2], [{ sqliteSynchronous: 'normal' as const }, 1]] as const) {
      const database = openDatabase(`sqlite:${join(dir, `${expected}-${Object.keys(opts).length}.db`)}`, opts);
      try {
        const { rows } = await sql<{ synchronous: number }>`pragma synchronous`.execute(database.db);
        assert.equal(rows[0]!.synchronous, expected, JSON.stringify(opts));
      } finally {
        await database.close();
      }
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
