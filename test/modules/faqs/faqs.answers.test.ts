import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { createTestApp, type TestApp, type TestResponse } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

const run = promisify(execFile);
const MAIN = new URL('../../../src/cli/main.ts', import.meta.url).href;

/** `parley …` from these sources, in a process of its own, on `databaseUrl`. */
const cli = (databaseUrl: string, ...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `import { run } from ${JSON.stringify(MAIN)}; await run(process.argv.slice(1));`, ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' },
  });

// The FAQs reads keep their serialised answers per knowledge version, as the documents reads do
// (documents.answers.test.ts says why two apps on one database stand for two processes or nodes). Every read
// below is made twice before the next write, so the second one is given the kept answer.
for (const dialect of DIALECTS) {
  describe(`FAQs reads after writes elsewhere (${dialect})`, () => {
    let dir: string;
    let a: TestApp;
    let b: TestApp;
    let key: string;
    let accountId: string;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'parley-faq-answers-'));
      a = await createTestApp(dialect, dialect === 'sqlite' ? { sqliteFile: join(dir, 'parley.db') } : {});
      b = await createTestApp(dialect, { sameDatabaseAs: a });
      ({ key, accountId } = await a.account());
    });
    after(async () => {
      await b?.close();
      await a?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    async function read(app: TestApp, path: string): Promise<TestResponse> {
      const first = await app.request('GET', path, { key });
      const second = await app.request('GET', path, { key });
      assert.equal(second.status, first.status);
      assert.equal(second.text, first.text);
      return second;
    }
    const questions = (r: TestResponse) => r.body.data.faqs.map((f: { question: string }) => f.question);

    test("create, update and delete through the other app are in this app's next reads, filters included", async () => {
      const one = await b.request('POST', '/v1/faqs', { key, body: { question: 'One?', answer: 'First.', category: 'shipping' } });
      assert.equal(one.status, 201, one.text);
      const id = one.body.data.id;
      assert.deepEqual(questions(await read(a, '/v1/faqs')), ['One?']);
      assert.equal((await read(a, `/v1/faqs/${id}`)).body.data.answer, 'First.');
      assert.deepEqual(questions(await read(a, '/v1/faqs?category=returns')), []);
      assert.deepEqual(questions(await read(a, '/v1/faqs?status=pending')), []);

      const two = await b.request('POST', '/v1/faqs', { key, body: { question: 'Two?', answer: 'Second.', category: 'returns', status: 'pending' } });
      assert.equal(two.status, 201, two.text);
      const list = await read(a, '/v1/faqs');
      assert.equal(list.body.data.total, 2);
      assert.deepEqual(questions(list).sort(), ['One?', 'Two?']);
      assert.deepEqual(questions(await read(a, '/v1/faqs?category=returns')), ['Two?']);
      assert.deepEqual(questions(await read(a, '/v1/faqs?status=pending')), ['Two?']);

      const put = await b.request('PUT', `/v1/faqs/${id}`, { key, body: { answer: 'Changed.', category: 'returns', status: 'pending' } });
      assert.equal(put.status, 200, put.text);
      assert.equal((await read(a, `/v1/faqs/${id}`)).body.data.answer, 'Changed.');
      assert.deepEqual(questions(await read(a, '/v1/faqs?category=returns')).sort(), ['One?', 'Two?']);
      assert.deepEqual(questions(await read(a, '/v1/faqs?status=pending')).sort(), ['One?', 'Two?']);

      const del = await b.request('DELETE', `/v1/faqs/${id}`, { key });
      assert.equal(del.status, 200, del.text);
      assert.equal((await read(a, `/v1/faqs/${id}`)).status, 404);
      assert.deepEqual(questions(await read(a, '/v1/faqs')), ['Two?']);
    });

    test('FAQs a CLI process files inside its own transaction (`parley demo`) are in both apps\' next reads', async () => {
      const before = [(await read(a, '/v1/faqs')).body.data.total, (await read(b, '/v1/faqs')).body.data.total];
      const out = await cli(a.database.url, 'demo', '--account', accountId, '--json');
      const loaded = JSON.parse(out.stdout).faqs as number;
      assert.ok(loaded > 0, out.stdout);
      assert.deepEqual([(await read(a, '/v1/faqs')).body.data.total, (await read(b, '/v1/faqs')).body.data.total], before.map((n) => n + loaded));
    });

    test("a kept answer is this account's only: another account's key reads its own FAQs", async () => {
      const mine = await read(a, '/v1/faqs');
      assert.ok(mine.body.data.total > 0);
      const other = await a.account();
      const theirs = await a.request('GET', '/v1/faqs', { key: other.key });
      assert.equal(theirs.status, 200, theirs.text);
      assert.equal(theirs.body.data.total, 0);
      const id = mine.body.data.faqs[0].id;
      assert.equal((await a.request('GET', `/v1/faqs/${id}`, { key: other.key })).status, 404);
    });
  });
}
