import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { assertBuildIsFresh, freshDatabase } from './cli-suite.js';

const ROOT = join(import.meta.dirname, '../..');

// `npm start` is the README's way to run Parley, and process managers and containers stop what they started with
// SIGTERM. npm passes the signal to the script's shell; Debian's sh (dash) died of it and left the server running
// without its parent, still holding the port and the database, and never shut down cleanly.
describe('npm start', () => {
  let db: { url: string; cleanup(): Promise<void> } | undefined;
  before(async () => {
    assertBuildIsFresh();
    db = await freshDatabase('sqlite');
  });
  after(() => db?.cleanup());

  test('SIGTERM to npm reaches the server: it shuts down cleanly and nothing is left listening', async () => {
    const child = spawn('npm', ['start'], {
      cwd: ROOT,
      env: { ...process.env, DATABASE_URL: db!.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'silent' },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so that whatever it started can be killed after the test, orphaned or not.
      detached: true,
    });
    let stderr = '';
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    child.stdout.resume();
    const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
    try {
      const url = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`npm start did not start: ${stderr}`)), 60_000);
        child.stderr.on('data', () => {
          const m = /listening on (http:\/\/\S+)\/v1/.exec(stderr);
          if (m) {
            clearTimeout(timer);
            resolve(m[1]!);
          }
        });
        void exited.then((code) => reject(new Error(`npm start exited with ${code}: ${stderr}`)));
      });
      assert.equal((await fetch(`${url}/v1/health`)).status, 200);

      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const code = await Promise.race([exited, new Promise<'hung'>((r) => (timer = setTimeout(() => r('hung'), 15_000)))]);
      clearTimeout(timer);
      assert.notEqual(code, 'hung', 'npm exits');
      assert.match(stderr, /SIGTERM received, shutting down/, 'the server got the signal');
      // An orphaned server would still answer here.
      let answered = true;
      for (let i = 0; i < 50 && answered; i++) {
        answered = await fetch(`${url}/v1/health`).then(
          () => true,
          () => false,
        );
        if (answered) await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(answered, false, 'nothing listens on the port any more');
    } finally {
      try {
        process.kill(-child.pid!, 'SIGKILL');
      } catch {
        // the group is gone already
      }
    }
  });
});
