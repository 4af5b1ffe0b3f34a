import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import { DIALECTS } from '../helpers/db.js';
import { cli, ENTRY, oneJson, startServe, useCliDatabase } from './cli-suite.js';

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

describe('parley backup: a run that is killed or cannot write', () => {
  test('killed mid-copy, it leaves nothing under the backup name, and the next run makes the backup', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-backup-kill-'));
    try {
      // Any SQLite file will do for the copy; big enough (~60 MB) that the kill lands while it is being written.
      const db = join(dir, 'big.db');
      const big = new SQLite(db);
      big.exec('create table filler (b blob)');
      const insert = big.prepare('insert into filler values (randomblob(1000000))');
      big.transaction(() => {
        for (let i = 0; i < 60; i++) insert.run();
      })();
      big.close();
      const to = join(dir, 'out', 'copy.db');
      const env = { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite:${db}` };
      const child = spawn(process.execPath, [ENTRY, 'backup', '--to', to, '--json'], { env, stdio: 'ignore' });
      const exited = new Promise((r) => child.once('exit', r));
      // Kill it once the copy is being written (under its temporary name, beside the target).
      const deadline = Date.now() + 20_000;
      for (;;) {
        const partial = existsSync(join(dir, 'out')) ? readdirSync(join(dir, 'out')).find((f) => f.includes('.partial-')) : undefined;
        if (partial && statSync(join(dir, 'out', partial)).size > 1_000_000) break;
        assert.ok(Date.now() < deadline, 'the copy never started');
        await new Promise((r) => setTimeout(r, 5));
      }
      child.kill('SIGKILL');
      await exited;
      assert.ok(!existsSync(to), 'nothing under the backup name');
      const again = await cli(['backup', '--to', to, '--json'], env);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(oneJson(again).path, to);
      const copy = new SQLite(to, { readonly: true });
      assert.equal((copy.prepare('select count(*) as n from filler').get() as { n: number }).n, 60);
      copy.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a target it cannot write is named with the reason (exit 2), not an unexpected error', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-backup-bad-'));
    try {
      const db = join(dir, 'small.db');
      new SQLite(db).exec('create table t (x)');
      writeFileSync(join(dir, 'a-file'), '');
      const env = { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite:${db}` };
      for (const to of [join(dir, 'a-file', 'x.db'), '/proc/no-such-dir/x.db']) {
        const r = await cli(['backup', '--to', to, '--json'], env);
        assert.equal(r.code, 2, r.stderr);
        assert.ok(oneJson(r).error.startsWith(`cannot write the backup to ${to}: `), r.stdout);
      }
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
