import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import pg from 'pg';
import { systemClock } from '../../../src/lib/clock.js';
import { createAccountsService } from '../../../src/modules/accounts/accounts.service.js';
import { conversationsRepository } from '../../../src/modules/conversations/conversations.repository.js';
import { rundownsRepository } from '../../../src/modules/rundowns/rundowns.repository.js';
import { useTestApp, type SuiteApp } from '../../helpers/app.js';
import { DIALECTS, waitingOn } from '../../helpers/db.js';
import { until } from '../../helpers/until.js';
import { startWorker, waitFor, sleep } from '../webhooks/delivery-helpers.js';
import { startServer, type TestServer } from '../webhooks/helpers.js';
import { bulkFill, orphanAttempts, rowsOf, twoFilledAccounts } from './fixtures.js';

/** What a deletion cut short (a crash, a lost connection) leaves: the afterChunk hook that throws stands for it. */
class CutShort extends Error {}
const cutShortAfter = (chunks: number) => (n: number) => {
  if (n === chunks) throw new CutShort(`cut short after chunk ${n}`);
};

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

    test('deletes in chunks of the size given, children before parents, and counts what each run deleted', async () => {
      // The worker of an earlier test runs: the other account's deliveries go out meanwhile, so only this one is checked.
      const { a, filledA, before } = await twoFilledAccounts(t, dialect, receiver.url);
      const preview = await t.ctx.services.accounts.deletionPreview(a.accountId);
      const chunks: number[] = [];
      const r = await t.ctx.services.accounts.deleteAccount(a.accountId, { chunkRows: 1, afterChunk: (n) => void chunks.push(n) });
      assert.deepEqual(r.counts, preview.counts);
      assert.equal(r.resumed, false);
      // One row a chunk (a parent's chunk takes the rows referencing it): more chunks than kinds of rows.
      assert.ok(chunks.length >= Object.values(preview.counts).reduce((x, y) => x + y, 0) - before.delivery_attempts!, `${chunks.length} chunks`);
      assert.deepEqual(chunks, chunks.map((_, i) => i + 1));
      assert.deepEqual(await rowsOf(t.ctx.db, dialect, a.accountId, filledA.deliveryIds), zeroes(before));
    });

    test('writes that a node with the key cached makes after their table was done are deleted too: no orphan, no foreign-key failure', async () => {
      const { a, before, filledA } = await twoFilledAccounts(t, dialect, receiver.url);
      const conversationId = (await t.ctx.db.selectFrom('conversations').select('id').where('account_id', '=', a.accountId).executeTakeFirstOrThrow()).id;
      assert.equal((await t.request('GET', '/v1/faqs', { key: a.key })).status, 200, 'cached by this node');
      const left = async (table: 'messages' | 'documents') => (await t.ctx.db.selectFrom(table).select('id').where('account_id', '=', a.accountId).execute()).length;
      const wrote: Record<string, number> = {};
      // Deleted by another process (this node keeps the key), one row a chunk. Once the chunks are past the messages,
      // this node adds one to the conversation, still there (with its events, deliveries while the webhook lasts, a
      // workflow run); once past the documents, a document with an Idempotency-Key: what a request under way, or one
      // made with a key cached within AUTH_CACHE_TTL, writes after the deletion began.
      const r = await elsewhere(t).deleteAccount(a.accountId, {
        chunkRows: 1,
        afterChunk: async () => {
          if (wrote.message === undefined && (await left('messages')) === 0) {
            wrote.message = (await t.request('POST', `/v1/chat/conversations/${conversationId}/messages`, { key: a.key, body: { content: 'book a demo, my email is jo@acme.test' } })).status;
          }
          if (wrote.document === undefined && (await left('documents')) === 0) {
            wrote.document = (await t.request('POST', '/v1/documents', { key: a.key, body: { title: 'During', content: 'x' }, headers: { 'idempotency-key': 'during' } })).status;
          }
        },
      });
      assert.deepEqual(wrote, { message: 200, document: 201 }, 'both written while the deletion ran');
      assert.equal(r.counts.messages, before.messages! + 2, 'the question and its answer, deleted with their conversation');
      assert.equal(r.counts.documents, before.documents! + 1, 'the document, deleted by the last transaction');
      assert.deepEqual(await rowsOf(t.ctx.db, dialect, a.accountId, filledA.deliveryIds), zeroes(before));
      assert.equal(await orphanAttempts(t.ctx.db), 0);
      assert.deepEqual(await t.ctx.db.selectFrom('messages').select('id').where('conversation_id', '=', conversationId).execute(), []);
      // Afterwards, the same cached key: 401.
      assert.equal((await t.request('POST', '/v1/documents', { key: a.key, body: { title: 'After', content: 'x' } })).status, 401);
      assert.deepEqual(errors, []);
    });

    test(
      "two runs at once: a chunk passes over the rows the other run's chunk holds and deletes the next ones, instead of waiting for its commit",
      { skip: dialect !== 'postgres' && 'SQLite has one writer: two chunks never run at once there' },
      async () => {
        const a = await t.account({ plan: 'pro' });
        const filled = await bulkFill(t.ctx.db, a.accountId, { conversations: 2, messagesEach: 5, events: 30, deliveries: 30, attemptsEach: 1 });
        await t.ctx.db
          .insertInto('idempotency_keys')
          .values(Array.from({ length: 30 }, (_, i) => ({ account_id: a.accountId, key: `k-${String(i).padStart(2, '0')}`, fingerprint: 'f', method: 'POST', path: '/v1/documents', status_code: 201, response: '{}', created_at: 0, locked_at: 0, committed_at: 0 })))
          .execute();
        // The other run, in its chunk of deliveries (a table whose rows others reference: ids read and locked, their
        // attempts, then they), in one of events (one DELETE of the rows a bounded subquery names, by primary key) and
        // in one of Idempotency-Keys (the same, by ctid: a composite key): the first rows of the account in each
        // table's order, deleted and not yet committed.
        const other = new pg.Client({ connectionString: t.database.url });
        await other.connect();
        try {
          await other.query('begin');
          const held = (await other.query(`select id from deliveries where account_id = $1 and id is not null order by id limit 5 for update`, [a.accountId])).rows.map((r) => r.id as string);
          await other.query('delete from delivery_attempts where delivery_id = any($1)', [held]);
          await other.query('delete from deliveries where id = any($1)', [held]);
          await other.query(`delete from events where id in (select id from events where account_id = $1 order by created_at, id limit 5)`, [a.accountId]);
          await other.query(`delete from idempotency_keys where (account_id, key) in (select account_id, key from idempotency_keys where account_id = $1 order by key limit 5)`, [a.accountId]);
          const pid = (await other.query('select pg_backend_pid() as pid')).rows[0].pid as number;

          const chunks: number[] = [];
          const deleting = elsewhere(t).deleteAccount(a.accountId, { chunkRows: 5, afterChunk: (n) => void chunks.push(n) });
          // While the other's chunk is open, this run's chunks take the rest of both tables (and go on to the others):
          // all that is left of them is what the other holds.
          const left = async (table: 'deliveries' | 'events' | 'idempotency_keys') => Number((await t.ctx.db.selectFrom(table).select((eb) => eb.fn.countAll<number>().as('n')).where('account_id', '=', a.accountId).executeTakeFirstOrThrow()).n);
          await until(
            async () => (await left('deliveries')) === 5 && (await left('events')) === 5 && (await left('idempotency_keys')) === 5 && chunks.length >= 15,
            `this run's chunks deleting the rows the other does not hold (${chunks.length} chunks so far)`,
          );
          // Its last transaction waits for the other's chunk (lockOwnedRows), as for any write in flight.
          await waitingOn(pid, 1);
          await other.query('commit');
          const r = await deleting;
          assert.equal(r.finishedByAnotherRun, false);
          assert.equal(r.counts.deliveries, filled.deliveries - 5, 'the other run deleted 5 deliveries, this one the rest');
          assert.equal(r.counts.deliveryAttempts, filled.deliveryAttempts - 5);
          assert.equal(r.counts.events, filled.events - 5);
          assert.equal(r.counts.idempotencyKeys, 30 - 5);
          assert.equal(r.counts.messages, filled.messages);
          assert.equal(r.counts.conversations, filled.conversations);
        } finally {
          await other.end();
        }
        assert.ok(Object.values(await rowsOf(t.ctx.db, dialect, a.accountId, [])).every((n) => n === 0));
        assert.equal(await orphanAttempts(t.ctx.db), 0);
      },
    );

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

  describe(`accounts: a deletion cut short (${dialect})`, () => {
    // An app of its own: no worker may run before the test starts one.
    const errors: unknown[] = [];
    const t = useTestApp(dialect, { env: { AUTH_CACHE_TTL: '1h' }, log: { info() {}, warn() {}, error: (obj) => void errors.push(obj) } });

    test('cut short, the account stays unusable: its keys 401, the worker sends none of its deliveries and runs none of its timers; run again, it finishes', async () => {
      const hooks = await startServer();
      t.beforeClose(() => hooks.close());
      const a = await t.account({ plan: 'pro' });
      const b = await t.account({ plan: 'pro' });
      for (const [acct, path] of [[a, 'a'], [b, 'b']] as const) {
        const wh = await t.request('POST', '/v1/webhooks', { key: acct.key, body: { url: `${hooks.url}/${path}`, events: ['conversation.started'], secret: 'cut-short-secret' } });
        assert.equal(wh.status, 201, wh.text);
        // No worker runs yet: each start leaves a delivery pending and due, and an open conversation.
        for (let i = 0; i < 3; i++) assert.equal((await t.request('POST', '/v1/chat/conversations', { key: acct.key, body: { customerId: `cus_${i}` } })).status, 201);
      }
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 200, 'cached by this node');

      // Cut short after its first chunk: one of a's three deliveries.
      await assert.rejects(t.ctx.services.accounts.deleteAccount(a.accountId, { chunkRows: 1, afterChunk: cutShortAfter(1) }), CutShort);
      const left = await rowsOf(t.ctx.db, dialect, a.accountId, []);
      assert.equal(left.accounts, 1);
      assert.equal(left.deliveries, 2);
      assert.equal(left.conversations, 3);
      const marked = await t.ctx.db.selectFrom('accounts').select('deletion_started_at').where('id', '=', a.accountId).executeTakeFirstOrThrow();
      assert.notEqual(marked.deletion_started_at, null);

      // Its keys: refused at once by this node (the deletion forgot them), reads and writes; the other account's work.
      assert.equal((await t.request('GET', '/v1/documents', { key: a.key })).status, 401);
      assert.equal((await t.request('POST', '/v1/documents', { key: a.key, body: { title: 'x', content: 'y' } })).status, 401);
      assert.equal((await t.request('GET', '/v1/documents', { key: b.key })).status, 200);
      // A node that never cached them refuses them too.
      assert.equal(await elsewhere(t).authenticate(a.key), null);
      assert.notEqual(await elsewhere(t).authenticate(b.key), null);

      // The worker: b's deliveries go out, a's stay pending, unclaimed.
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());
      await waitFor(() => hooks.received.filter((r) => r.url === '/b').length === 3, "b's deliveries sent");
      await waitFor(() => t.ctx.deliveries.inFlight === 0, 'the worker idle');
      await sleep(300);
      assert.equal(hooks.received.filter((r) => r.url === '/a').length, 0, "none of a's deliveries was sent");
      const pending = await t.ctx.db.selectFrom('deliveries').select(['status', 'lease_owner', 'attempt_count']).where('account_id', '=', a.accountId).execute();
      assert.deepEqual(pending, [0, 1].map(() => ({ status: 'pending', lease_owner: null, attempt_count: 0 })));
      // Its timers: no conversation of a's is ended for idleness, none erased for retention, no rundown scheduled.
      await t.ctx.services.chat.endIdle(0);
      const statuses = await t.ctx.db.selectFrom('conversations').select(['account_id', 'status']).where('account_id', 'in', [a.accountId, b.accountId]).execute();
      assert.deepEqual(statuses.filter((c) => c.account_id === a.accountId).map((c) => c.status), ['active', 'active', 'active']);
      assert.deepEqual(statuses.filter((c) => c.account_id === b.accountId).map((c) => c.status), ['ended', 'ended', 'ended']);
      await t.ctx.db.updateTable('conversations').set({ status: 'ended', ended_at: 1 }).where('account_id', '=', a.accountId).execute();
      const erasable = await conversationsRepository.endedBefore(t.ctx.db, Date.now() + 60_000, 1_000);
      assert.ok(erasable.some((c) => c.account_id === b.accountId));
      assert.ok(!erasable.some((c) => c.account_id === a.accountId));
      const due = (await rundownsRepository.missingScheduled(t.ctx.db, [{ from: 0, to: Date.now() + 60_000, last: true }])).map((x) => ({ id: x.account_id }));
      assert.ok(due.some((x) => x.id === b.accountId));
      assert.ok(!due.some((x) => x.id === a.accountId));
      // Nothing can be added to it: a key, a change.
      await assert.rejects(t.ctx.services.accounts.createKey({ accountId: a.accountId }), /is being deleted/);
      await assert.rejects(t.ctx.services.accounts.updateAccount(a.accountId, { name: 'X' }), /is being deleted/);
      // Listed as being deleted since the first run's start.
      const listed = (await t.ctx.services.accounts.listAccounts()).find((x) => x.id === a.accountId);
      assert.equal(listed?.deletionStartedAt, new Date(marked.deletion_started_at!).toISOString());

      // Run again, it goes on from where the first stopped, counting what it deleted itself.
      const r = await t.ctx.services.accounts.deleteAccount(a.accountId);
      assert.equal(r.resumed, true);
      assert.equal(r.counts.deliveries, 2);
      assert.equal(r.counts.conversations, 3);
      assert.ok(Object.values(await rowsOf(t.ctx.db, dialect, a.accountId, [])).every((n) => n === 0));
      assert.equal(await orphanAttempts(t.ctx.db), 0);
      assert.equal(hooks.received.filter((r) => r.url === '/a').length, 0);
      assert.deepEqual(errors, []);
    });

  });
}
