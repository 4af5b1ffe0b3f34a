import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import pg from 'pg';
import { systemClock } from '../../../src/lib/clock.js';
import { createAccountsService } from '../../../src/modules/accounts/accounts.service.js';
import { useTestApp, type SuiteApp } from '../../helpers/app.js';
import { DIALECTS, waitingOn } from '../../helpers/db.js';
import { startWorker, waitFor, sleep } from '../webhooks/delivery-helpers.js';
import { startServer, type TestServer } from '../webhooks/helpers.js';
import { orphanAttempts, rowsOf, twoFilledAccounts } from './fixtures.js';

/**
 * The accounts service of another process on the same database (the CLI's `parley accounts delete`): its deletion
 * leaves the app's key cache as it was, as a deletion elsewhere does.
 */
const elsewhere = (t: SuiteApp) => createAccountsService(t.ctx.db, systemClock, { dialect: t.database.dialect });

const zeroes = (rows: Record<string, number>) => Object.fromEntries(Object.keys(rows).map((k) => [k, 0]));


for (const dialect of DIALECTS) {
  describe(`accounts: deleteAccount (${dialect})`, () => {
    // What the app and its worker log as errors: a deletion under the worker must not make it fail.
    const errors: unknown[] = [];
    // Keys stay cached for the whole file: a deletion made elsewhere must hold against a node that still trusts them.
    const t = useTestApp(dialect, { env: { AUTH_CACHE_TTL: '1h' }, log: { info() {}, warn() {}, error: (obj) => void errors.push(obj) } });
    let receiver: TestServer;
    before(async () => {
      receiver = await startServer();
      t.beforeClose(() => receiver.close());
    });

    test('deletes every row of the account in every table that has account_id (listed from the database), and nothing of another account', async () => {
      const { a, b, filledA, filledB, before, otherBefore } = await twoFilledAccounts(t, dialect, receiver.url);

      const preview = await t.ctx.services.accounts.deletionPreview(a.accountId);
      const r = await t.ctx.services.accounts.deleteAccount(a.accountId);
      assert.equal(r.id, a.accountId);
      assert.equal(r.deleted, true);
      assert.deepEqual(r.counts, preview.counts, 'the preview counted what the deletion deleted');
      assert.equal(r.counts.documents, before.documents);
      assert.equal(r.counts.messages, before.messages);
      assert.equal(r.counts.deliveryAttempts, before.delivery_attempts);
      assert.equal(r.counts.keys, before.api_keys);

      const after = await rowsOf(t.ctx.db, dialect, a.accountId, filledA.deliveryIds);
      assert.deepEqual(after, zeroes(before), 'no row of the deleted account is left in any table');
      assert.deepEqual(await rowsOf(t.ctx.db, dialect, b.accountId, filledB.deliveryIds), otherBefore, 'the other account is untouched');
      assert.equal(await orphanAttempts(t.ctx.db), 0);
      // Its keys are refused at once by this process (its cache forgot them); the other account's work.
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 401);
      assert.equal((await t.request('GET', '/v1/documents', { key: b.key })).status, 200);
      await assert.rejects(t.ctx.services.accounts.deleteAccount(a.accountId), /account acct_\w+ not found/);
    });

    test('a key still cached by a node after the deletion (made elsewhere) cannot write: 401, and no orphan row', async () => {
      const writes: Array<[string, string, (receiverUrl: string) => unknown, Record<string, string>?]> = [
        ['POST', '/v1/documents', () => ({ title: 'Orphan?', content: 'x' })],
        ['POST', '/v1/documents', () => ({ title: 'Orphan?', content: 'x' }), { 'idempotency-key': 'orphan-1' }],
        ['POST', '/v1/faqs', () => ({ question: 'Orphan?', answer: 'x', category: 'x' })],
        ['POST', '/v1/webhooks', (url) => ({ url: `${url}/x`, events: ['escalation'], secret: 'orphan-secret' })],
        ['POST', '/v1/workflows', () => ({ slug: 'w', name: 'W', triggers: ['orphan'], fields: [] })],
        ['POST', '/v1/rundowns', () => ({ from: new Date(Date.now() - 60_000).toISOString(), to: new Date().toISOString() })],
        ['POST', '/v1/chat/conversations', () => ({ customerId: 'orphan' })],
      ];
      for (const [method, path, body, headers] of writes) {
        const a = await t.account({ plan: 'pro' });
        // Cached by this node, then deleted by another process.
        assert.equal((await t.request('GET', '/v1/faqs', { key: a.key })).status, 200);
        await elsewhere(t).deleteAccount(a.accountId);
        const w = await t.request(method, path, { key: a.key, body: body(receiver.url), headers: headers ?? {} });
        assert.equal(w.status, 401, `${path}: ${w.text}`);
        assert.deepEqual(w.body.error, { code: 'UNAUTHORIZED', message: 'invalid or revoked API key (its account was deleted)' });
        const left = await rowsOf(t.ctx.db, dialect, a.accountId, []);
        assert.ok(Object.values(left).every((n) => n === 0), `${path}: nothing written for the deleted account: ${JSON.stringify(left)}`);
        // The node forgot the account's keys when the write failed: reads are refused too from then on.
        assert.equal((await t.request('GET', '/v1/faqs', { key: a.key })).status, 401);
      }
    });

    test('a delivery pending or in flight when its account is deleted is not sent afterwards, writes nothing back, and the worker goes on', async () => {
      // /slow holds its answer until released (an attempt in flight); /fail answers 500 (the delivery waits for a retry).
      const held: Array<() => void> = [];
      const hooks = await startServer((req, res) => {
        if (req.url?.startsWith('/slow')) held.push(() => res.writeHead(200).end('ok'));
        else if (req.url?.startsWith('/fail')) res.writeHead(500).end('no');
        else res.writeHead(200).end('ok');
      });
      t.beforeClose(() => hooks.close());
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());
      const a = await t.account({ plan: 'pro' });
      const b = await t.account({ plan: 'pro' });
      for (const [acct, path] of [[a, 'slow'], [a, 'fail'], [b, 'ok']] as const) {
        const wh = await t.request('POST', '/v1/webhooks', { key: acct.key, body: { url: `${hooks.url}/${path}`, events: ['conversation.started'], secret: 'deleted-secret' } });
        assert.equal(wh.status, 201, wh.text);
      }
      assert.equal((await t.request('POST', '/v1/chat/conversations', { key: a.key, body: {} })).status, 201);
      await waitFor(() => held.length === 1 && hooks.received.some((r) => r.url === '/fail'), 'the held attempt in flight and the failed one recorded');
      const failed = await waitFor(
        async () => (await t.ctx.db.selectFrom('deliveries').selectAll().where('account_id', '=', a.accountId).where('url', 'like', '%/fail').where('attempt_count', '=', 1).executeTakeFirst()),
        'the failed attempt recorded',
      );
      assert.equal(failed.status, 'pending', 'waiting for its retry');
      const leased = await t.ctx.db.selectFrom('deliveries').selectAll().where('account_id', '=', a.accountId).where('url', 'like', '%/slow').executeTakeFirstOrThrow();
      assert.notEqual(leased.lease_owner, null, 'the in-flight delivery is leased');

      await elsewhere(t).deleteAccount(a.accountId);
      // The receiver answers the attempt that was in flight: the worker records it under its lease, which is gone.
      held.shift()!();
      // The failed delivery's retry would now be due.
      await t.ctx.db.updateTable('deliveries').set({ next_attempt_at: 0 }).where('id', '=', failed.id).execute();
      await waitFor(() => t.ctx.deliveries.inFlight === 0, 'the worker idle');
      await sleep(300);
      assert.equal(hooks.received.filter((r) => r.url === '/fail').length, 1, 'the pending delivery was not sent after the deletion');
      assert.equal(hooks.received.filter((r) => r.url === '/slow').length, 1);
      assert.equal((await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', a.accountId).execute()).length, 0, 'no delivery row came back');
      assert.equal((await t.ctx.db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', 'in', [failed.id, leased.id]).execute()).length, 0, 'no attempt recorded');
      assert.equal(await orphanAttempts(t.ctx.db), 0);
      // The worker is alive: another account's event is delivered.
      assert.equal((await t.request('POST', '/v1/chat/conversations', { key: b.key, body: {} })).status, 201);
      await waitFor(() => hooks.received.some((r) => r.url === '/ok'), "the other account's delivery");
      assert.deepEqual(errors, []);
    });

    test(
      'a test send racing the deletion of its account waits for it and finds no webhook: 404, nothing inserted, nothing sent',
      { skip: dialect !== 'postgres' && 'SQLite has one writer: the race needs concurrent transactions' },
      async () => {
        const a = await t.account({ plan: 'pro' });
        const wh = await t.request('POST', '/v1/webhooks', { key: a.key, body: { url: `${receiver.url}/race`, events: ['escalation'], secret: 'race-secret' } });
        assert.equal(wh.status, 201, wh.text);
        // The deletion, held open after locking the account's webhooks (as lockOwnedRows does) so the test send runs
        // its first read before it commits.
        const deleter = new pg.Client({ connectionString: t.database.url });
        await deleter.connect();
        try {
          await deleter.query('begin');
          await deleter.query('select id from accounts where id = $1 for update', [a.accountId]);
          await deleter.query('select id from webhooks where account_id = $1 order by id for update', [a.accountId]);
          const pid = (await deleter.query('select pg_backend_pid() as pid')).rows[0].pid as number;
          const sending = t.request('POST', `/v1/webhooks/${wh.body.data.id}/test`, { key: a.key });
          await waitingOn(pid, 1);
          for (const table of ['deliveries', 'webhooks', 'api_keys']) await deleter.query(`delete from ${table} where account_id = $1`, [a.accountId]);
          await deleter.query('delete from accounts where id = $1', [a.accountId]);
          await deleter.query('commit');
          const sent = await sending;
          assert.equal(sent.status, 404, sent.text);
        } finally {
          await deleter.end();
        }
        assert.equal((await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', a.accountId).execute()).length, 0);
        assert.equal(receiver.received.filter((r) => r.url === '/race').length, 0);
      },
    );
  });
}

