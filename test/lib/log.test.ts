import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';

const LOG = join(import.meta.dirname, '../../src/lib/log.ts');
const LINES = 2000;

/**
 * A process that logs LINES lines in one burst with the service's logger, its stderr appended to a file as an operator
 * redirects it, then ends as `end` says; the lines found in the file. The logger writes asynchronously: all but the
 * first of the burst are still queued in memory when `end` runs.
 */
async function linesLeftBy(end: string) {
  const dir = mkdtempSync(join(tmpdir(), 'parley-log-'));
  const file = join(dir, 'stderr.log');
  const fd = openSync(file, 'a');
  try {
    const script = `import { createLogger } from ${JSON.stringify(LOG)};
      const log = createLogger('info');
      for (let i = 0; i < ${LINES}; i++) log.info({ i }, 'line');
      ${end}`;
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], { stdio: ['ignore', 'ignore', fd] });
    const code = await new Promise<number | null>((resolve) => child.on('exit', (c) => resolve(c)));
    const lines = readFileSync(file, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { i?: number; msg: string });
    return { code, found: lines.filter((l) => l.msg === 'line').map((l) => l.i) };
  } finally {
    closeSync(fd);
    rmSync(dir, { recursive: true, force: true });
  }
}

const all = Array.from({ length: LINES }, (_, i) => i);

test('the queued lines are written, in order, when the process dies of an uncaught exception or ends with process.exit (how serve ends after SIGTERM)', async () => {
  const thrown = await linesLeftBy("throw new Error('boom');");
  assert.equal(thrown.code, 1);
  assert.deepEqual(thrown.found, all);

  const later = await linesLeftBy("setImmediate(() => { throw new Error('boom'); });");
  assert.equal(later.code, 1);
  assert.deepEqual(later.found, all);

  const exited = await linesLeftBy('process.exit(0);');
  assert.equal(exited.code, 0);
  assert.deepEqual(exited.found, all);
});
