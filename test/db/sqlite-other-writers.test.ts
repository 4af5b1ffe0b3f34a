import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { createTestApp } from '../helpers/app.js';

const run = promisify(execFile);
const BIN = new URL('../../bin/parley.js', import.meta.url).pathname;

// SQLite only: PostgreSQL has real concurrent transactions. The README has operators run `parley keys create`,
// `accounts create` or `demo` beside a running service; each opens the same file. A server transaction that read
// before it wrote could not take the write lock once the CLI had written (SQLITE_BUSY at once, busy_timeout
// notwithstanding): a 500 to valid PUTs and DELETEs.
test('SQLite: API writes stay 2xx while CLI commands write the same file', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'parley-writers-'));
  const file = join(dir, 'parley.db');
  const t = await createTestApp('sqlite', { sqliteFile: file });
  try {
    const { accountId, key } = await t.account();
    const faq = await t.request('POST', '/v1/faqs', { key, body: { question: 'How long do refunds take?', answer: 'Five days.', category: 'returns' } });
    assert.equal(faq.status, 201, faq.text);
    const statuses = new Map<number, number>();
    let stop = false;
    const loop = async (i: number) => {
      for (let n = 0; !stop; n++) {
        const r = await t.request('PUT', `/v1/faqs/${faq.body.data.id}`, { key, body: { answer: `Answer ${i}.${n}` } });
        statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
      }
    };
    const loops = [loop(1), loop(2), loop(3)];
    try {
      const env = { ...process.env, DATABASE_URL: `sqlite:${file}`, LOG_LEVEL: 'silent' };
      for (let i = 0; i < 4; i++) {
        const out = await run(process.execPath, [BIN, 'keys', 'create', '--account', accountId, '--type', 'public', '--json'], { env });
        assert.match(out.stdout, /"key":"pk_/);
      }
    } finally {
      stop = true;
      await Promise.all(loops);
    }
    assert.deepEqual([...statuses.keys()], [200], JSON.stringify([...statuses]));
  } finally {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  }
});
