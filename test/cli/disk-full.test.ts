import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { assertBuildIsFresh, ENTRY, stopChild } from './cli-suite.js';

/**
 * A real full disk: `parley serve` on a 4 MB tmpfs mounted in a mount namespace of its own (unshare -m), so the mount
 * is the child's alone and goes with it; the test grows the tmpfs (nsenter … mount -o remount) to give space back.
 * Needs the right to mount (root, or CAP_SYS_ADMIN), as CI has; elsewhere it is skipped, and
 * test/http/resource-errors.test.ts and the worker's test cover the same with SQLite's max_page_count.
 */
const dir = mkdtempSync(join(tmpdir(), 'parley-full-'));
const canMount = spawnSync('unshare', ['-m', '--propagation', 'private', 'mount', '-t', 'tmpfs', '-o', 'size=64k', 'tmpfs', dir]).status === 0;
rmSync(dir, { recursive: true, force: true });

test(
  'a full disk under a running serve: 500s with Retry-After and a log saying so, the process and its checkpoint thread live on, every acknowledged write is kept, and writes work again once there is room, without a restart',
  { skip: !canMount && 'needs to mount a tmpfs in a mount namespace (root or CAP_SYS_ADMIN)' },
  async () => {
    assertBuildIsFresh();
    const mnt = mkdtempSync(join(tmpdir(), 'parley-full-'));
    const script = `mount -t tmpfs -o size=4m tmpfs "$MNT" && "$NODE" "$ENTRY" init --json && exec "$NODE" "$ENTRY" serve --json`;
    const child = spawn('unshare', ['-m', '--propagation', 'private', 'sh', '-c', script], {
      env: { PATH: process.env.PATH ?? '', MNT: mnt, NODE: process.execPath, ENTRY, PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: `sqlite:${join(mnt, 'parley.db')}` },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    try {
      const base = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`serve did not start: ${stderr}`)), 60_000);
        const check = () => {
          const line = stdout.split('\n').find((l) => l.includes('"listening"'));
          if (line) {
            clearTimeout(timer);
            resolve((JSON.parse(line) as { listening: string }).listening);
          }
        };
        child.stdout.on('data', check);
        child.on('exit', (code) => reject(new Error(`exited with ${code}: ${stderr}`)));
      });
      const key = (JSON.parse(stdout.split('\n')[0]!) as { key: { key: string } }).key.key;
      const post = (body: unknown) =>
        fetch(`${base}/v1/documents`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });

      // 200 KB documents until the disk is full: at most 40 (8 MB) for 4 MB.
      const content = 'Unused items can be returned within 30 days. '.repeat(4_500);
      const kept: string[] = [];
      let refused: Response | undefined;
      for (let i = 0; i < 40 && !refused; i++) {
        const r = await post({ title: `doc ${i}`, content });
        if (r.status === 201) kept.push(((await r.json()) as { data: { id: string } }).data.id);
        else refused = r;
      }
      assert.ok(refused, 'the disk filled up');
      assert.ok(kept.length > 0);
      assert.equal(refused.status, 500);
      assert.equal(refused.headers.get('retry-after'), '30');
      const body = (await refused.json()) as { success: boolean; error: { code: string; message: string } };
      assert.equal(body.success, false);
      assert.equal(body.error.code, 'SERVER_ERROR');
      assert.match(body.error.message, /^the service cannot handle this request right now; retry in 30 s \(request \S+\)$/);

      // Still serving, and every acknowledged document is there, whole.
      const list = await fetch(`${base}/v1/documents?limit=100`, { headers: { authorization: `Bearer ${key}` } });
      assert.equal(list.status, 200);
      const listed = ((await list.json()) as { data: { documents: Array<{ id: string }> } }).data.documents.map((d) => d.id);
      assert.deepEqual(new Set(listed), new Set(kept));

      const logLines = () =>
        stderr
          .split('\n')
          .filter((l) => l.startsWith('{'))
          .map((l) => JSON.parse(l) as Record<string, any>);
      const full = logLines().filter((l) => l.level === 50 && l.database);
      assert.ok(full.length >= 1);
      assert.match(full[0]!.msg, /^the database is full \(no space left for it\): writes are refused until space is freed/);
      assert.deepEqual(full[0]!.database, { problem: 'full', code: 'SQLITE_FULL' });
      // The checkpoint thread meets the full disk too: said once at most, not every 200 ms.
      assert.ok(logLines().filter((l) => /checkpoint failed/.test(l.msg)).length <= 1);
      assert.doesNotMatch(stderr, /Warning: SQLite checkpoint failed/);

      // Space is back: the same process takes writes again.
      const grown = spawnSync('nsenter', ['-t', String(child.pid), '-m', 'mount', '-o', 'remount,size=64m', mnt]);
      assert.equal(grown.status, 0, grown.stderr.toString());
      const again = await post({ title: 'after', content });
      assert.equal(again.status, 201, await again.text());
      assert.equal(child.exitCode, null, 'never exited');
    } finally {
      assert.equal(await stopChild(child), 0, stderr.slice(-2000));
      rmSync(mnt, { recursive: true, force: true });
    }
  },
);
