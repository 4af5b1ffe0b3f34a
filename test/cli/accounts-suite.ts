import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import type { DialectName } from '../../src/db/database.js';
import { createTestApp, type TestApp } from '../helpers/app.js';
import { orphanAttempts, rowsOf, twoFilledAccounts } from '../modules/accounts/fixtures.js';
import { startServer, type TestServer } from '../modules/webhooks/helpers.js';
import { assertBuildIsFresh, cli, oneJson } from './cli-suite.js';

/**
 * `parley accounts update` and `parley accounts delete` as an operator runs them (real child processes), against the
 * database of a running API node (an app in this process, its key cache on): what the node does after each.
 */
export function accountsCliSuite(dialect: DialectName) {
  describe(`parley accounts update / delete (${dialect})`, () => {
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
      assert.deepEqual(out, { id: a.accountId, deleted: true, counts: refusal.counts });
      // A log line (JSON on stderr, as every log of Parley's) says who deleted what; no webhook is told.
      const logged = r.stderr.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
      assert.deepEqual(logged.map((l) => [l.msg, l.accountId, l.counts]), [['account deleted', a.accountId, refusal.counts]]);
      const after = await rowsOf(t.ctx.db, dialect, a.accountId, filledA.deliveryIds);
      assert.ok(Object.values(after).every((n) => n === 0), `no row of the account left in any table: ${JSON.stringify(after)}`);
      assert.deepEqual(await rowsOf(t.ctx.db, dialect, b.accountId, filledB.deliveryIds), otherBefore, 'the other account is untouched');
      assert.equal(await orphanAttempts(t.ctx.db), 0);

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
  });
}
