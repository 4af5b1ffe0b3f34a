import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import type { DialectName } from '../../src/db/database.js';
import { DELETE_CHUNK_ROWS } from '../../src/modules/accounts/accounts.service.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { until } from '../helpers/until.js';
import { bulkFill, orphanAttempts, rowsOf, twoFilledAccounts } from '../modules/accounts/fixtures.js';
import { startServer, type TestServer } from '../modules/webhooks/helpers.js';
import { assertBuildIsFresh, cli, ENTRY, oneJson } from './cli-suite.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A process's state letter (Linux /proc/PID/stat): `T` once it is stopped; null once it is gone. */
function processState(pid: number): string | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
  } catch {
    return null;
  }
}

/**
 * Another process's own connection to the database (not the node's, not the CLI's): on SQLite with a busy_timeout of
 * 500 ms, a tenth of the service's, so that a write held up by a transaction deleting a large account fails at a size
 * a test can fill in seconds, as the service's writes did with accounts ten times larger. `write` adds an event to `accountId`; `left` counts the rows of `accountId` in the three tables
 * the deletion goes through first.
 */
function otherConnection(dialect: DialectName, url: string) {
  const left = `select (select count(*) from deliveries where account_id = $1 and id is not null) + (select count(*) from events where account_id = $1) + (select count(*) from messages where account_id = $1) as n`;
  const insert = `insert into events (id, account_id, kind, payload, created_at) values ($1, $2, 'test.other', '{}', $3)`;
  if (dialect === 'sqlite') {
    const db = new SQLite(url.replace(/^sqlite:/, ''));
    db.pragma('busy_timeout = 500');
    const count = db.prepare(left.replaceAll('$1', '@a'));
    const add = db.prepare(insert.replace('$1', '@id').replace('$2', '@a').replace('$3', '@at'));
    return {
      write: async (accountId: string, id: string) => void add.run({ id, a: accountId, at: Date.now() }),
      left: async (accountId: string) => Number((count.get({ a: accountId }) as { n: number }).n),
      close: async () => db.close(),
    };
  }
  const client = new pg.Client({ connectionString: url });
  const connected = client.connect();
  return {
    write: async (accountId: string, id: string) => void (await connected, await client.query(insert, [id, accountId, Date.now()])),
    left: async (accountId: string) => (await connected, Number((await client.query(left, [accountId])).rows[0].n)),
    close: () => client.end(),
  };
}

/**
 * `parley accounts update` and `parley accounts delete` as an operator runs them (real child processes), against the
 * database of a running API node (an app in this process, its key cache on): what the node does after each.
 */
export function accountsCliSuite(dialect: DialectName) {
  describe(`parley accounts update / delete (${dialect})`, () => {
    /** The deleted account has no row left in any table, the other is as it was, and no attempt lost its delivery. */
    const assertOnlyOtherLeft = async (deleted: string, deliveryIds: string[], other: string, otherDeliveryIds: string[], otherBefore: unknown) => {
      const after = await rowsOf(t.ctx.db, dialect, deleted, deliveryIds);
      assert.ok(Object.values(after).every((n) => n === 0), `no row of the account left in any table: ${JSON.stringify(after)}`);
      assert.deepEqual(await rowsOf(t.ctx.db, dialect, other, otherDeliveryIds), otherBefore, 'the other account is untouched');
      assert.equal(await orphanAttempts(t.ctx.db), 0);
    };
    let t: TestApp;
    let env: Record<string, string>;
    let receiver: TestServer;
    let dir: string | undefined;
    before(async () => {
      assertBuildIsFresh();
      if (dialect === 'sqlite') dir = mkdtempSync(join(tmpdir(), 'parley-accounts-'));
      // AUTH_CACHE_TTL as by default: the node trusts a verified key for 1 s.
      t = await createTestApp(dialect, { env: { AUTH_CACHE_TTL: '1s' }, ...(dir ? { sqliteFile: join(dir, 'parley.db') } : {}) });
      env = { DATABASE_URL: t.database.url, LOG_LEVEL: 'silent' };
      receiver = await startServer();
    });
    after(async () => {
      await receiver?.close();
      await t?.close();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    test('update: refuses what create refuses, an unknown account and nothing to change (exit 2); changes nothing then', { skip: dialect !== 'sqlite' && 'covered on sqlite' }, async () => {
      const a = oneJson(await cli(['accounts', 'create', '--name', 'Acme', '--plan', 'pro', '--json'], env));
      const cases: Array<[string[], RegExp]> = [
        [[a.id], /^nothing to change: give --name, --plan, --rate-limit-minute or --rate-limit-day$/],
        [[], /^usage: parley accounts update ACCOUNT_ID/],
        [[a.id, '--name', '   '], /^--name must not be blank$/],
        [[a.id, '--plan', 'gold'], /^--plan must be one of free, pro, business, enterprise$/],
        [[a.id, '--plan', 'enterprise'], /^--rate-limit-minute is required for the enterprise plan$/],
        [[a.id, '--plan', 'enterprise', '--rate-limit-minute', '10'], /^--rate-limit-day is required for the enterprise plan$/],
        [[a.id, '--plan', 'enterprise', '--rate-limit-minute', '0', '--rate-limit-day', '10'], /^--rate-limit-minute must be a positive integer$/],
        [[a.id, '--plan', 'enterprise', '--rate-limit-minute', '10', '--rate-limit-day', '2147483648'], /^--rate-limit-day must be at most 2147483647$/],
        [[a.id, '--rate-limit-minute', '10'], /^--rate-limit-minute and --rate-limit-day are only accepted for the enterprise plan$/],
        [[a.id, '--force'], /^parley accounts update takes no --force/],
        [['acct_nope', '--name', 'X'], /^account acct_nope not found$/],
      ];
      const [help, ...runs] = await Promise.all([cli(['--help'], env), ...cases.map(([args]) => cli(['accounts', 'update', ...args, '--json'], env))]);
      assert.match(help.stdout, /parley accounts update ID \[--name NAME\] \[--plan free\|pro\|business\|enterprise\]/);
      assert.match(help.stdout, /parley accounts delete ID --yes/);
      runs.forEach((r, i) => {
        assert.equal(r!.code, 2, `${cases[i]![0].join(' ')}: ${r!.stderr}`);
        assert.match(oneJson(r!).error, cases[i]![1]);
      });
      const listed = oneJson(await cli(['accounts', 'list', '--json'], env)).accounts.find((x: any) => x.id === a.id);
      assert.deepEqual(listed, a, 'nothing changed');
    });

    test('update prints the account as create does; enterprise limits come and go with the plan', async () => {
      const a = oneJson(await cli(['accounts', 'create', '--name', 'Beta', '--plan', 'free', '--json'], env));
      const text = await cli(['accounts', 'update', a.id, '--name', 'Beta Ltd', '--plan', 'enterprise', '--rate-limit-minute', '50', '--rate-limit-day', '5000'], env);
      assert.equal(text.code, 0, text.stderr);
      assert.equal(text.stdout, `Updated account ${a.id} (Beta Ltd, plan enterprise, 50/minute, 5000/day).\n`);
      const day = await cli(['accounts', 'update', a.id, '--rate-limit-day', '6000', '--json'], env);
      assert.equal(day.code, 0, day.stderr);
      assert.deepEqual(oneJson(day), { ...a, name: 'Beta Ltd', plan: 'enterprise', rateLimitMinute: 50, rateLimitDay: 6000 });
      const off = oneJson(await cli(['accounts', 'update', a.id, '--plan', 'business', '--json'], env));
      assert.deepEqual(off, { ...a, name: 'Beta Ltd', plan: 'business' });
      assert.deepEqual(oneJson(await cli(['accounts', 'list', '--json'], env)).accounts.find((x: any) => x.id === a.id), off);
    });

    test("update reaches a running node within AUTH_CACHE_TTL: a pro account's server key answers 403 once free, 200 once pro again", async () => {
      const a = oneJson(await cli(['accounts', 'create', '--name', 'Gamma', '--plan', 'pro', '--json'], env));
      const key = oneJson(await cli(['keys', 'create', '--account', a.id, '--json'], env)).key as string;
      const docs = async () => (await t.request('GET', '/v1/documents', { key })).status;
      assert.equal(await docs(), 200);
      for (const [plan, status] of [['free', 403], ['pro', 200]] as const) {
        const r = await cli(['accounts', 'update', a.id, '--plan', plan, '--json'], env);
        assert.equal(r.code, 0, r.stderr);
        const changed = Date.now();
        while ((await docs()) !== status) {
          assert.ok(Date.now() - changed < 1_000 + 500, `the node answers ${status} within AUTH_CACHE_TTL (1 s) of the change`);
          await new Promise((res) => setTimeout(res, 50));
        }
      }
    });

    test('delete: without --yes refuses (exit 2) counting what would go; with --yes deletes it all, in every table, and the running node refuses its keys', async () => {
      const { a, b, filledA, filledB, before, otherBefore } = await twoFilledAccounts(t, dialect, receiver.url);
      // The node has the key cached.
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 200);

      const [refusedJson, refusedText, unknown] = await Promise.all([
        cli(['accounts', 'delete', a.accountId, '--json'], env),
        cli(['accounts', 'delete', a.accountId], env),
        cli(['accounts', 'delete', 'acct_nope', '--yes', '--json'], env),
      ]);
      assert.equal(refusedJson.code, 2, refusedJson.stderr);
      const refusal = oneJson(refusedJson);
      assert.match(refusal.error, new RegExp(`^refusing to delete account ${a.accountId} \\(test pro, plan pro\\) without --yes\\.`));
      assert.equal(refusal.id, a.accountId);
      assert.equal(refusal.deleted, false);
      assert.equal(refusal.counts.documents, before.documents);
      assert.equal(refusal.counts.deliveryAttempts, before.delivery_attempts);
      assert.equal(refusedText.code, 2);
      assert.equal(refusedText.stdout, '');
      assert.match(refusedText.stderr, /It would delete, for good \(there is no undo: back up first, README\.md Backups\): \d+ documents, \d+ faqs, /);
      assert.ok(refusedText.stderr.includes(`To delete it: parley accounts delete ${a.accountId} --yes`), refusedText.stderr);
      assert.equal(unknown.code, 2);
      assert.equal(oneJson(unknown).error, 'account acct_nope not found');
      assert.deepEqual(await rowsOf(t.ctx.db, dialect, a.accountId, filledA.deliveryIds), before, 'nothing deleted without --yes');

      const r = await cli(['accounts', 'delete', a.accountId, '--yes', '--json'], { ...env, LOG_LEVEL: 'info' });
      assert.equal(r.code, 0, r.stderr);
      const out = oneJson(r);
      assert.deepEqual(out, { id: a.accountId, deleted: true, resumed: false, finishedByAnotherRun: false, counts: refusal.counts });
      // Log lines (JSON on stderr, as every log of Parley's) say who deleted what, from its start (a run cut short
      // leaves that much); no webhook is told.
      const logged = r.stderr.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.deepEqual(logged.map((l) => [l.msg, l.accountId, l.counts]), [['account deletion started', a.accountId, undefined], ['account deleted', a.accountId, refusal.counts]]);
      await assertOnlyOtherLeft(a.accountId, filledA.deliveryIds, b.accountId, filledB.deliveryIds, otherBefore);

      // The node still trusts the cached key, but a write cannot leave a row behind: 401.
      const write = await t.request('POST', '/v1/documents', { key: a.key, body: { title: 'After', content: 'x' } });
      assert.equal(write.status, 401, write.text);
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 401);
      assert.equal((await t.request('GET', '/v1/documents', { key: b.key })).status, 200);
      assert.equal((await rowsOf(t.ctx.db, dialect, a.accountId, [])).documents, 0);

      const again = await cli(['accounts', 'delete', a.accountId, '--yes'], env);
      assert.equal(again.code, 2);
      assert.match(again.stderr, /account acct_\w+ not found/);
    });

    test('delete goes chunk by chunk: another connection writes to another account between the chunks and sees the account shrink', async () => {
      const a = await t.account({ plan: 'pro' });
      const b = await t.account({ plan: 'pro' });
      // SQLite: large enough that one transaction deleting it all (as before) holds the write lock past the other
      // connection's busy_timeout, 500 ms (measured: 1 to 1.5 s on a shared 2-vCPU machine), while a chunk holds it
      // for tens of milliseconds.
      const shape =
        dialect === 'sqlite'
          ? { conversations: 500, messagesEach: 100, events: 50_000, deliveries: 50_000, attemptsEach: 2 }
          : { conversations: 100, messagesEach: 50, events: 10_000, deliveries: 10_000, attemptsEach: 1 };
      const filled = await bulkFill(t.ctx.db, a.accountId, shape);
      const total = filled.deliveries + filled.events + filled.messages;
      const other = otherConnection(dialect, t.database.url);
      const writes: Array<{ at: number; tookMs: number; error?: string }> = [];
      const seen: Array<{ at: number; n: number }> = [];
      let done = false;
      // A write a few milliseconds apart, and a count of what is left in between.
      const writer = (async () => {
        for (let i = 0; !done; i++) {
          const began = Date.now();
          try {
            await other.write(b.accountId, `evt_other_${i}`);
            writes.push({ at: Date.now(), tookMs: Date.now() - began });
          } catch (err) {
            writes.push({ at: Date.now(), tookMs: Date.now() - began, error: (err as Error).message });
          }
          await sleep(5);
        }
      })();
      const observer = (async () => {
        while (!done) {
          seen.push({ at: Date.now(), n: await other.left(a.accountId) });
          await sleep(5);
        }
      })();
      let r;
      try {
        r = await cli(['accounts', 'delete', a.accountId, '--yes', '--json'], env);
      } finally {
        done = true;
        await Promise.all([writer, observer]);
        await other.close();
      }
      assert.equal(r.code, 0, r.stderr);
      const out = oneJson(r);
      for (const kind of ['messages', 'conversations', 'events', 'deliveries', 'deliveryAttempts'] as const) assert.equal(out.counts[kind], filled[kind], kind);

      assert.deepEqual(writes.filter((w) => w.error), [], 'every write of the other account went through (none waited past its busy_timeout)');
      const partial = seen.filter((s) => s.n > 0 && s.n < total);
      assert.ok(partial.length > 0, `the other connection saw the account part deleted (it saw ${[...new Set(seen.map((s) => s.n))].join(', ')} of ${total} rows): the deletion commits chunk by chunk`);
      const from = partial[0]!.at;
      const to = seen.filter((s) => s.n > 0).at(-1)!.at;
      const between = writes.filter((w) => w.at > from && w.at < to).length;
      assert.ok(between > 0, `a write of the other account committed while the deletion was under way (${writes.length} writes, the longest ${Math.max(...writes.map((w) => w.tookMs))} ms; ${to - from} ms under way)`);

      const after = await rowsOf(t.ctx.db, dialect, a.accountId, []);
      assert.ok(Object.values(after).every((n) => n === 0), JSON.stringify(after));
      assert.equal((await t.ctx.db.selectFrom('events').select('id').where('account_id', '=', b.accountId).where('kind', '=', 'test.other').execute()).length, writes.length);
    });

    test('two delete --yes runs of one account at once: both finish (exit 0), the account is gone, and what each deleted adds up to it', async () => {
      const { a, b, filledB, otherBefore } = await twoFilledAccounts(t, dialect, receiver.url);
      // Several chunks in each of the tables deleted first, so the two runs overlap in them.
      await bulkFill(t.ctx.db, a.accountId, { conversations: 50, messagesEach: 100, events: 3 * DELETE_CHUNK_ROWS, deliveries: 3 * DELETE_CHUNK_ROWS, attemptsEach: 1 });
      const deliveryIds = (await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', a.accountId).execute()).map((d) => d.id);
      const before = oneJson(await cli(['accounts', 'delete', a.accountId, '--json'], env)).counts as Record<string, number>;

      // Each stops itself after its first chunk (TEST_ACCOUNT_DELETE_STOP_AFTER), the second started once the first
      // has; then both go on together, through the same tables at the same time.
      const start = () => {
        const child = spawn(process.execPath, [ENTRY, 'accounts', 'delete', a.accountId, '--yes', '--json'], {
          env: { PATH: process.env.PATH ?? '', ...env, LOG_LEVEL: 'info', TEST_ACCOUNT_DELETE_STOP_AFTER: '1' },
          stdio: ['ignore', 'pipe', 'pipe'],
        });
        const run = { child, stdout: '', stderr: '', exited: new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal }))) };
        child.stdout.on('data', (c: Buffer) => (run.stdout += c.toString()));
        child.stderr.on('data', (c: Buffer) => (run.stderr += c.toString()));
        return run;
      };
      const runs = [start()];
      try {
        await until(() => processState(runs[0]!.child.pid!) === 'T', `the first run stopped after its first chunk (stderr: ${runs[0]!.stderr})`, 30_000);
        runs.push(start());
        await until(() => processState(runs[1]!.child.pid!) === 'T', `the second run stopped after its first chunk (stderr: ${runs[1]!.stderr})`, 30_000);
        for (const r of runs) r.child.kill('SIGCONT');
        const exits = await Promise.all(runs.map((r) => r.exited));
        assert.deepEqual(exits, [{ code: 0, signal: null }, { code: 0, signal: null }], runs.map((r) => r.stderr).join('\n'));
      } finally {
        for (const r of runs) if (r.child.exitCode === null && r.child.signalCode === null) r.child.kill('SIGKILL');
      }
      const outs = runs.map((r) => JSON.parse(r.stdout));
      // The second knows the first started it; whichever got to its last transaction second found the account gone.
      assert.deepEqual(outs.map((o) => [o.id, o.deleted, o.resumed]), [[a.accountId, true, false], [a.accountId, true, true]]);
      assert.deepEqual(outs.map((o) => o.finishedByAnotherRun).sort(), [false, true]);
      // Every row was deleted by exactly one of them.
      const sum = Object.fromEntries(Object.keys(before).map((k) => [k, outs[0].counts[k] + outs[1].counts[k]]));
      assert.deepEqual(sum, before);
      assert.ok(outs[1].counts.deliveries > 0 && outs[0].counts.deliveries > 0, `both deleted deliveries: ${JSON.stringify(outs.map((o) => o.counts))}`);
      const logged = runs.map((r) => r.stderr.split('\n').filter(Boolean).map((l) => JSON.parse(l) as { msg: string; finishedByAnotherRun?: boolean }));
      assert.deepEqual(logged.map((l) => l.map((x) => x.msg)), [['account deletion started', 'account deleted'], ['account deletion resumed', 'account deleted']]);
      assert.deepEqual(logged.map((l) => l[1]!.finishedByAnotherRun), outs.map((o) => o.finishedByAnotherRun));

      await assertOnlyOtherLeft(a.accountId, deliveryIds, b.accountId, filledB.deliveryIds, otherBefore);

      // A third, once both are done: nothing of it is left to delete.
      const text = await cli(['accounts', 'delete', a.accountId, '--yes'], env);
      assert.equal(text.code, 2);
      assert.match(text.stderr, /account acct_\w+ not found/);
    });

    test('delete killed part way (SIGKILL after its first chunk): the account stays unusable, and the same command run again finishes it', async () => {
      const { a, filledB, b, otherBefore } = await twoFilledAccounts(t, dialect, receiver.url);
      // More deliveries than one chunk, the first table deleted: the kill lands with most of the account still there.
      await bulkFill(t.ctx.db, a.accountId, { conversations: 5, messagesEach: 10, events: 500, deliveries: DELETE_CHUNK_ROWS + 1_000, attemptsEach: 1 });
      const deliveryIds = (await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', a.accountId).execute()).map((d) => d.id);
      const before = oneJson(await cli(['accounts', 'delete', a.accountId, '--json'], env)).counts;
      // The node has the key cached (AUTH_CACHE_TTL 1 s).
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 200);

      // TEST_ACCOUNT_DELETE_STOP_AFTER: the CLI stops itself (SIGSTOP) once its first chunk has committed.
      const child = spawn(process.execPath, [ENTRY, 'accounts', 'delete', a.accountId, '--yes', '--json'], {
        env: { PATH: process.env.PATH ?? '', ...env, LOG_LEVEL: 'info', TEST_ACCOUNT_DELETE_STOP_AFTER: '1' },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
      child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => child.once('exit', (code, signal) => resolve({ code, signal })));
      let mid;
      try {
        await until(() => processState(child.pid!) === 'T', `the CLI stopped after its first chunk (stderr: ${stderr})`, 30_000);
        mid = oneJson(await cli(['accounts', 'delete', a.accountId, '--json'], env));
      } finally {
        child.kill('SIGKILL');
      }
      assert.deepEqual(await exited, { code: null, signal: 'SIGKILL' });
      assert.equal(stdout, '', 'killed before it printed anything');
      assert.ok(stderr.split('\n').filter(Boolean).some((l) => (JSON.parse(l) as { msg: string }).msg === 'account deletion started'), stderr);
      // One chunk went: the first deliveries with their attempts, nothing else.
      assert.equal(mid.counts.deliveries, before.deliveries - DELETE_CHUNK_ROWS);
      assert.ok(mid.counts.deliveryAttempts < before.deliveryAttempts);
      for (const kind of ['documents', 'faqs', 'conversations', 'messages', 'events', 'keys', 'webhooks', 'rundowns'] as const) assert.equal(mid.counts[kind], before[kind], kind);
      assert.match(mid.error, /Its deletion started at \S+ and has not finished \(cut short, or still running\): the account is unusable until it does\./);

      // Unusable: its key answers 401 on the running node (within AUTH_CACHE_TTL), reads and writes alike.
      await until(async () => (await t.request('GET', '/v1/documents', { key: a.key })).status === 401, 'its key refused', 3_000, 50);
      const write = await t.request('POST', '/v1/documents', { key: a.key, body: { title: 'During', content: 'x' } });
      assert.equal(write.status, 401, write.text);
      // Listed as being deleted; nothing can be added to it or changed.
      const listed = oneJson(await cli(['accounts', 'list', '--json'], env)).accounts.find((x: any) => x.id === a.accountId);
      assert.equal(listed.deletionStartedAt, mid.deletionStartedAt);
      const listedText = await cli(['accounts', 'list'], env);
      assert.ok(listedText.stdout.includes(`(being deleted since ${mid.deletionStartedAt}; if that run was cut short: parley accounts delete ${a.accountId} --yes)`), listedText.stdout);
      for (const args of [['keys', 'create', '--account', a.accountId], ['accounts', 'update', a.accountId, '--name', 'X'], ['demo', '--account', a.accountId]]) {
        const refused = await cli([...args, '--json'], env);
        assert.equal(refused.code, 2, `${args.join(' ')}: ${refused.stderr}`);
        assert.match(oneJson(refused).error, new RegExp(`^account ${a.accountId} is being deleted \\(since \\S+\\); if that deletion was cut short, finish it: parley accounts delete ${a.accountId} --yes$`));
      }

      const again = await cli(['accounts', 'delete', a.accountId, '--yes', '--json'], { ...env, LOG_LEVEL: 'info' });
      assert.equal(again.code, 0, again.stderr);
      // What this run deleted: what the first left.
      assert.deepEqual(oneJson(again), { id: a.accountId, deleted: true, resumed: true, finishedByAnotherRun: false, counts: mid.counts });
      const logged = again.stderr.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.deepEqual(logged.map((l) => [l.msg, l.deletionStartedAt ?? l.resumed]), [['account deletion resumed', mid.deletionStartedAt], ['account deleted', true]]);
      await assertOnlyOtherLeft(a.accountId, deliveryIds, b.accountId, filledB.deliveryIds, otherBefore);
      const text = await cli(['accounts', 'delete', a.accountId, '--yes'], env);
      assert.equal(text.code, 2);
    });
  });
}
