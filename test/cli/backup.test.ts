import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
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

describe('parley backup: a run that is killed, fails or cannot write', () => {
  /** Any SQLite file will do for the copy; big enough (~60 MB) that what a test does lands while it is being written. */
  function bigDatabase(dir: string): string {
    const db = join(dir, 'big.db');
    const big = new SQLite(db);
    big.exec('create table filler (b blob)');
    const insert = big.prepare('insert into filler values (randomblob(1000000))');
    big.transaction(() => {
      for (let i = 0; i < 60; i++) insert.run();
    })();
    big.close();
    return db;
  }

  /** A backup run as a child process, and a promise of its exit once its copy is being written (under its temporary name). */
  async function backupUnderWay(to: string, env: Record<string, string>) {
    const out = dirname(to);
    const child = spawn(process.execPath, [ENTRY, 'backup', '--to', to, '--json'], { env, stdio: ['ignore', 'pipe', 'ignore'] });
    let stdout = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    const exited = new Promise<{ code: number | null; stdout: string }>((r) => child.once('close', (code) => r({ code, stdout })));
    const deadline = Date.now() + 20_000;
    for (;;) {
      const partial = existsSync(out) ? readdirSync(out).find((f) => f.endsWith(`.partial-${child.pid}`)) : undefined;
      if (partial && statSync(join(out, partial)).size > 1_000_000) break;
      assert.ok(Date.now() < deadline, 'the copy never started');
      await new Promise((r) => setTimeout(r, 5));
    }
    return { child, exited };
  }

  test('killed mid-copy, it leaves nothing under the backup name; the next run makes the backup and removes what the killed one left', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-backup-kill-'));
    try {
      const db = bigDatabase(dir);
      const out = join(dir, 'out');
      const to = join(out, 'copy.db');
      const env = { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite:${db}` };
      const { child, exited } = await backupUnderWay(to, env);
      child.kill('SIGKILL');
      await exited;
      assert.ok(!existsSync(to), 'nothing under the backup name');
      const dead = child.pid!;
      assert.ok(existsSync(join(out, `.copy.db.partial-${dead}`)), 'a killed run cannot remove its own partial file');
      // Besides it: a journal of the killed run, the file of a run still going (this test's process stands for
      // it), and a partial file of another target: only the killed run's files for this target are stale.
      writeFileSync(join(out, `.copy.db.partial-${dead}-journal`), 'x');
      writeFileSync(join(out, `.copy.db.partial-${process.pid}`), 'x');
      writeFileSync(join(out, `.other.db.partial-${dead}`), 'x');
      const again = await cli(['backup', '--to', to, '--json'], env);
      assert.equal(again.code, 0, again.stderr);
      assert.equal(oneJson(again).path, to);
      const copy = new SQLite(to, { readonly: true });
      assert.equal((copy.prepare('select count(*) as n from filler').get() as { n: number }).n, 60);
      copy.close();
      assert.deepEqual(readdirSync(out).sort(), [`.copy.db.partial-${process.pid}`, `.other.db.partial-${dead}`, 'copy.db']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('a run that fails after writing its copy (the name was taken meanwhile) removes its partial file and leaves the file there alone', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-backup-fail-'));
    try {
      const db = bigDatabase(dir);
      const out = join(dir, 'out');
      const to = join(out, 'copy.db');
      const env = { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite:${db}` };
      const { exited } = await backupUnderWay(to, env);
      writeFileSync(to, 'not a backup', { flag: 'wx' }); // fails if the backup already got the name: too late
      const r = await exited;
      assert.equal(r.code, 2);
      assert.match(oneJson({ ...r, stderr: '' }).error, /appeared while the backup ran/);
      assert.equal(readFileSync(to, 'utf8'), 'not a backup');
      assert.deepEqual(readdirSync(out), ['copy.db']);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test("the database's own -wal, -shm and -journal names are refused (exit 2): the next open of the database deletes such a file", async () => {
    const dir = mkdtempSync(join(tmpdir(), 'parley-backup-companion-'));
    try {
      const db = join(dir, 'live.db');
      new SQLite(db).exec('create table t (x)');
      symlinkSync(dir, join(dir, 'link'));
      const env = { PATH: process.env.PATH ?? '', DATABASE_URL: `sqlite:${db}` };
      // None of these files exists while no process has the database open: SQLite removes them at the last close.
      for (const to of [`${db}-wal`, `${db}-shm`, `${db}-journal`, join(dir, 'link', 'live.db-wal')]) {
        const r = await cli(['backup', '--to', to, '--json'], env);
        assert.equal(r.code, 2, `${to}: ${r.stdout}`);
        assert.match(oneJson(r).error, /is a file of the database itself/, to);
        if (!to.endsWith('live.db')) assert.ok(!existsSync(to), `nothing written at ${to}`);
      }
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
