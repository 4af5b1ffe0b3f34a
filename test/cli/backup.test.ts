import assert from 'node:assert/strict';
import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import { DIALECTS } from '../helpers/db.js';
import { cli, oneJson, startServe, useCliDatabase } from './cli-suite.js';

// `parley backup` as a user runs it, beside a running `parley serve` (its own file: the runner spreads the slow
// process start-ups over several workers).
for (const dialect of DIALECTS) {
  describe(`parley backup (${dialect})`, () => {
    const c = useCliDatabase(dialect);

    test('backup copies the SQLite database while the server writes, to a new file that serves; PostgreSQL is pointed to pg_dump', async () => {
      const dir = mkdtempSync(join(tmpdir(), 'parley-backup-'));
      const to = join(dir, 'nested', 'copy.db');
      try {
        if (dialect !== 'sqlite') {
          const r = await cli(['backup', '--to', to, '--json'], c.env);
          assert.equal(r.code, 2, r.stderr);
          assert.match(oneJson(r).error, /pg_dump/);
          assert.ok(!existsSync(to));
          return;
        }
        const out = oneJson(await cli(['init', '--force', '--json'], c.env));
        const auth = { authorization: `Bearer ${out.key.key}`, 'content-type': 'application/json' };
        const s = await startServe(c.env);
        try {
          const create = (i: number) => fetch(`${s.url}/v1/documents`, { method: 'POST', headers: auth, body: JSON.stringify({ title: `Doc ${i}`, content: 'x'.repeat(2_000) }) });
          for (let i = 0; i < 20; i++) assert.equal((await create(i)).status, 201);
          // Writes go on while the copy is made: the copy is a snapshot, not a torn file. Paced and bounded below the
          // pro plan's 300 requests a minute: on a loaded machine the backup process alone can take many seconds,
          // and an unpaced writer then ran into 429s.
          let writing = true;
          const writer = (async () => {
            for (let i = 20; writing && i < 250; i++) {
              assert.equal((await create(i)).status, 201);
              await new Promise((r) => setTimeout(r, 10));
            }
          })();
          const r = await cli(['backup', '--to', to, '--json'], c.env);
          writing = false;
          await writer;
          assert.equal(r.code, 0, r.stderr);
          const copied = oneJson(r);
          assert.equal(copied.path, to);
          assert.equal(copied.bytes, statSync(to).size);
          // The copy is a database parley can serve, with the account, its key and the documents written before.
          const fromCopy = await startServe({ DATABASE_URL: `sqlite:${to}` });
          try {
            const list = await (await fetch(`${fromCopy.url}/v1/documents?limit=1`, { headers: auth })).json();
            assert.ok(list.data.total >= 20, `the copy holds the documents written before it: ${list.data.total}`);
          } finally {
            await fromCopy.stop();
          }
          const again = await cli(['backup', '--to', to, '--json'], c.env);
          assert.equal(again.code, 2);
          assert.match(oneJson(again).error, /already exists/);
        } finally {
          await s.stop();
        }
        const missing = await cli(['backup', '--json'], c.env);
        assert.equal(missing.code, 2);
        assert.match(oneJson(missing).error, /--to is required/);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    });
  });
}
