import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { promisify } from 'node:util';
import { createVersionedAnswers } from '../../src/http/versioned-answers.js';
import { createTestApp, type TestApp, type TestResponse } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

const run = promisify(execFile);
const MAIN = new URL('../../src/cli/main.ts', import.meta.url).href;

/** `parley …` from these sources, in a process of its own, on `databaseUrl`. */
const cli = (databaseUrl: string, ...args: string[]) =>
  run(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', `import { run } from ${JSON.stringify(MAIN)}; await run(process.argv.slice(1));`, ...args], {
    env: { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'silent' },
  });

// The documents and FAQs reads keep their serialised answers per knowledge version (keptReads). Two apps on one
// database stand for two processes on one SQLite file or two API nodes on one PostgreSQL: each keeps its own
// answers and hears nothing from the other, so only the version read from the database can tell a kept answer is
// out of date. Every read below is made twice before the write, so the second one is given the kept answer.
for (const dialect of DIALECTS) {
  describe(`documents and FAQs reads after writes elsewhere (${dialect})`, () => {
    let dir: string;
    let a: TestApp;
    let b: TestApp;
    let key: string;
    let accountId: string;

    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'parley-answers-'));
      a = await createTestApp(dialect, dialect === 'sqlite' ? { sqliteFile: join(dir, 'parley.db') } : {});
      b = await createTestApp(dialect, { sameDatabaseAs: a });
      ({ key, accountId } = await a.account());
    });
    after(async () => {
      await b?.close();
      await a?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    /** A read on `app`, twice: the second answer must be the first one (kept, or made again from the same rows). */
    async function read(app: TestApp, path: string): Promise<TestResponse> {
      const first = await app.request('GET', path, { key });
      const second = await app.request('GET', path, { key });
      assert.equal(second.status, first.status);
      assert.equal(second.text, first.text);
      return second;
    }
    const titles = (r: TestResponse) => r.body.data.documents.map((d: { title: string }) => d.title);
    const questions = (r: TestResponse) => r.body.data.faqs.map((f: { question: string }) => f.question);

    test('create, update and delete through the other app are in this app\'s next reads', async () => {
      const one = await b.request('POST', '/v1/documents', { key, body: { title: 'One', content: 'First.' } });
      assert.equal(one.status, 201, one.text);
      const id = one.body.data.id;
      assert.deepEqual(titles(await read(a, '/v1/documents')), ['One']);
      assert.equal((await read(a, `/v1/documents/${id}`)).body.data.title, 'One');
      assert.deepEqual(titles(await read(a, '/v1/documents?status=draft')), []);

      const two = await b.request('POST', '/v1/documents', { key, body: { title: 'Two', content: 'Second.', status: 'draft' } });
      assert.equal(two.status, 201, two.text);
      const list = await read(a, '/v1/documents');
      assert.deepEqual(titles(list), ['Two', 'One']);
      assert.equal(list.body.data.total, 2);
      assert.deepEqual(titles(await read(a, '/v1/documents?status=draft')), ['Two']);

      const put = await b.request('PUT', `/v1/documents/${id}`, { key, body: { title: 'One, renamed', content: 'Changed.', status: 'draft' } });
      assert.equal(put.status, 200, put.text);
      const got = await read(a, `/v1/documents/${id}`);
      assert.equal(got.body.data.title, 'One, renamed');
      assert.equal(got.body.data.content, 'Changed.');
      assert.deepEqual(titles(await read(a, '/v1/documents')), ['Two', 'One, renamed']);
      assert.deepEqual(titles(await read(a, '/v1/documents?status=draft')), ['Two', 'One, renamed']);

      const del = await b.request('DELETE', `/v1/documents/${id}`, { key });
      assert.equal(del.status, 200, del.text);
      assert.equal((await read(a, `/v1/documents/${id}`)).status, 404);
      assert.deepEqual(titles(await read(a, '/v1/documents')), ['Two']);
      assert.deepEqual(titles(await read(a, '/v1/documents?status=draft')), ['Two']);
    });

    test("FAQs: create, update and delete through the other app are in this app's next reads, filters included", async () => {
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

    test('writes through this app are in its own next reads', async () => {
      const doc = await a.request('POST', '/v1/documents', { key, body: { title: 'Three', content: 'Third.' } });
      assert.equal(doc.status, 201, doc.text);
      const id = doc.body.data.id;
      assert.equal((await read(a, '/v1/documents?limit=1')).body.data.documents[0].title, 'Three');
      assert.equal((await read(a, `/v1/documents/${id}`)).body.data.content, 'Third.');
      await a.request('PUT', `/v1/documents/${id}`, { key, body: { content: 'Third, changed.' } });
      assert.equal((await read(a, `/v1/documents/${id}`)).body.data.content, 'Third, changed.');
      await a.request('DELETE', `/v1/documents/${id}`, { key });
      assert.notEqual((await read(a, '/v1/documents?limit=1')).body.data.documents[0]?.title, 'Three');
      assert.equal((await read(a, `/v1/documents/${id}`)).status, 404);
    });

    test("documents and FAQs a CLI process loads in its own transaction (`parley demo`) are in both apps' next reads", async () => {
      const totals = async (path: string) => [(await read(a, path)).body.data.total, (await read(b, path)).body.data.total];
      const before = { documents: await totals('/v1/documents'), faqs: await totals('/v1/faqs') };
      const out = await cli(a.database.url, 'demo', '--account', accountId, '--json');
      const loaded = JSON.parse(out.stdout) as { documents: number; faqs: number };
      assert.ok(loaded.documents > 0 && loaded.faqs > 0, out.stdout);
      assert.deepEqual(await totals('/v1/documents'), before.documents.map((n) => n + loaded.documents));
      assert.deepEqual(await totals('/v1/faqs'), before.faqs.map((n) => n + loaded.faqs));
    });

    test("a kept answer is this account's only: another account's key reads its own documents", async () => {
      await read(a, '/v1/documents');
      const other = await a.account();
      const theirs = await a.request('GET', '/v1/documents', { key: other.key });
      assert.equal(theirs.status, 200, theirs.text);
      assert.equal(theirs.body.data.total, 0);
    });

    test("FAQs: a kept answer is this account's only", async () => {
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

describe('versioned answers', () => {
  test('an answer is given only at the version it was kept at, and a newer one is not replaced by an older', () => {
    const answers = createVersionedAnswers();
    answers.set('acct_1', 3, 'k', 'three');
    assert.equal(answers.get('acct_1', 3, 'k'), 'three');
    assert.equal(answers.get('acct_1', 4, 'k'), undefined);
    assert.equal(answers.get('acct_1', 2, 'k'), undefined);
    assert.equal(answers.get('acct_2', 3, 'k'), undefined);
    answers.set('acct_1', 5, 'k', 'five');
    answers.set('acct_1', 4, 'k', 'four');
    assert.equal(answers.get('acct_1', 5, 'k'), 'five');
    assert.equal(answers.get('acct_1', 4, 'k'), undefined);
  });

  test('the kept answers stay within their size, those given lately last', () => {
    const answers = createVersionedAnswers(160);
    answers.set('a', 1, 'too long', 'x'.repeat(11));
    assert.equal(answers.get('a', 1, 'too long'), undefined);
    for (let i = 0; i < 16; i++) answers.set('a', 1, `k${i}`, 'x'.repeat(10));
    assert.equal(answers.get('a', 1, 'k0'), 'x'.repeat(10));
    answers.set('a', 1, 'k16', 'y'.repeat(10));
    assert.equal(answers.get('a', 1, 'k16'), 'y'.repeat(10));
    assert.equal(answers.get('a', 1, 'k0'), 'x'.repeat(10), 'given lately: kept');
    assert.equal(answers.get('a', 1, 'k1'), undefined, 'the oldest not given: gone');
    const kept = Array.from({ length: 17 }, (_, i) => answers.get('a', 1, `k${i}`)).filter((x) => x !== undefined);
    assert.equal(kept.length, 16);
  });

  test('a new answer is kept when every other one was given since the last pass', () => {
    const answers = createVersionedAnswers(160);
    for (let i = 0; i < 16; i++) answers.set('a', 1, `k${i}`, 'x'.repeat(10));
    for (let i = 0; i < 16; i++) assert.equal(answers.get('a', 1, `k${i}`), 'x'.repeat(10));
    answers.set('a', 1, 'new', 'y'.repeat(10));
    assert.equal(answers.get('a', 1, 'new'), 'y'.repeat(10));
    const kept = Array.from({ length: 16 }, (_, i) => answers.get('a', 1, `k${i}`)).filter((x) => x !== undefined);
    assert.equal(kept.length, 15, 'one of the others made room');
  });
});
