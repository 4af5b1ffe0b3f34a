import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../../src/config.js';
import { newId } from '../../../src/lib/ids.js';
import { conversationsRepository } from '../../../src/modules/conversations/conversations.repository.js';
import { SUBSCRIBABLE_EVENTS } from '../../../src/modules/webhooks/events.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp, type SuiteApp } from '../../helpers/app.js';
import { DIALECTS, waitingOn } from '../../helpers/db.js';
import { DAY, HOUR, insertConversation, insertMessage } from './fixtures.js';

/** What the database still holds that names the conversation, table by table. */
async function traces(t: SuiteApp, accountId: string, id: string) {
  const db = t.ctx.db;
  // The erasure's own notice (conversation.erased: the ids only) is not a trace of the conversation.
  const events = (await db.selectFrom('events').select(['id', 'payload', 'kind']).where('account_id', '=', accountId).execute()).filter((e) => e.payload.includes(id) && e.kind !== 'conversation.erased');
  const deliveries = (await db.selectFrom('deliveries').select(['id', 'body', 'event']).where('account_id', '=', accountId).execute()).filter(
    (d) => d.body.includes(id) && d.event !== 'conversation.erased',
  );
  const attempts = deliveries.length ? await db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', 'in', deliveries.map((d) => d.id)).execute() : [];
  return {
    conversations: (await db.selectFrom('conversations').select('id').where('id', '=', id).execute()).length,
    messages: (await db.selectFrom('messages').select('id').where('conversation_id', '=', id).execute()).length,
    workflowRuns: (await db.selectFrom('workflow_runs').select('workflow_id').where('conversation_id', '=', id).execute()).length,
    events: events.length,
    deliveries: deliveries.length,
    attempts: attempts.length,
    idempotencyKeys: (await db.selectFrom('idempotency_keys').select(['key', 'path', 'response']).where('account_id', '=', accountId).execute()).filter(
      (k) => k.path.includes(id) || (k.response ?? '').includes(id),
    ).length,
  };
}

for (const dialect of DIALECTS) {
  describe(`DELETE /v1/conversations/:id erases a conversation (${dialect})`, () => {
    const t = useTestApp(dialect);

    /** A conversation with messages, a fired workflow, webhook deliveries (pending: no worker runs here) and Idempotency-Keys. */
    async function conversation(key: string, tag: string, customerId = `cust-${tag}`) {
      const started = await t.request('POST', '/v1/chat/conversations', { key, body: { customerId, customerEmail: `${tag}@example.test` }, headers: { 'idempotency-key': `start-${tag}` } });
      assert.equal(started.status, 201, started.text);
      const id = started.body.data.conversation.id as string;
      for (const [i, content] of ['I want to book a demo, my email is jo@acme.test', 'how long does shipping take?'].entries()) {
        const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key, body: { content }, headers: { 'idempotency-key': `send-${tag}-${i}` } });
        assert.equal(r.status, 200, r.text);
      }
      return id;
    }

    async function setUp() {
      const a = await t.account();
      const wh = await t.request('POST', '/v1/webhooks', { key: a.key, body: { url: 'http://127.0.0.1:9/hook', events: [...SUBSCRIBABLE_EVENTS], secret: 'erase-secret' } });
      assert.equal(wh.status, 201, wh.text);
      const wf = await t.request('POST', '/v1/workflows', { key: a.key, body: { slug: 'demo', name: 'Demo', triggers: ['book a demo'], fields: [{ key: 'email', type: 'email' }] } });
      assert.equal(wf.status, 201, wf.text);
      return a;
    }

    test('the conversation, its messages, workflow runs, events, deliveries and kept answers go; another conversation stays', async () => {
      const a = await setUp();
      const gone = await conversation(a.key, 'gone');
      const kept = await conversation(a.key, 'kept');
      const before = await traces(t, a.accountId, gone);
      // Everything the test means to erase is there to begin with.
      assert.deepEqual(
        Object.entries(before).filter(([, n]) => n === 0).map(([k]) => k),
        ['attempts'],
        JSON.stringify(before),
      );
      const keptBefore = await traces(t, a.accountId, kept);

      const r = await t.request('DELETE', `/v1/conversations/${gone}`, { key: a.key });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body, { success: true, data: { deleted: true } });

      assert.deepEqual(await traces(t, a.accountId, gone), { conversations: 0, messages: 0, workflowRuns: 0, events: 0, deliveries: 0, attempts: 0, idempotencyKeys: 0 });
      assert.deepEqual(await traces(t, a.accountId, kept), keptBefore);
      // Webhooks are told, with the ids only, so the owner's systems can erase their copies.
      const notices = await t.ctx.db.selectFrom('deliveries').select(['event', 'body']).where('account_id', '=', a.accountId).where('event', '=', 'conversation.erased').execute();
      assert.equal(notices.length, 1);
      assert.deepEqual(JSON.parse(notices[0]!.body).data, { conversationId: gone, customerId: 'cust-gone' });
      assert.equal((await t.request('GET', `/v1/conversations/${gone}`, { key: a.key })).status, 404);
      assert.equal((await t.request('GET', `/v1/chat/conversations/${gone}`, { key: a.key })).status, 404);
      const send = await t.request('POST', `/v1/chat/conversations/${gone}/messages`, { key: a.key, body: { content: 'hello?' } });
      assert.equal(send.status, 404);
      assert.equal((await t.request('GET', `/v1/conversations/${kept}`, { key: a.key })).body.data.messageCount, 5);
      const list = await t.request('GET', '/v1/conversations', { key: a.key });
      assert.deepEqual(list.body.data.conversations.map((c: { id: string }) => c.id), [kept]);
      // Erased is gone: a second DELETE is a 404.
      const again = await t.request('DELETE', `/v1/conversations/${gone}`, { key: a.key });
      assert.equal(again.status, 404);
      assert.equal(again.body.error.code, 'NOT_FOUND');
    });

    test("the kept answer of a manual delivery retry (it repeats the delivery's body) goes too", async () => {
      const a = await setUp();
      const id = await conversation(a.key, 'retried');
      const wh = (await t.request('GET', '/v1/webhooks', { key: a.key })).body.data.webhooks[0].id as string;
      const list = await t.request('GET', `/v1/webhooks/${wh}/deliveries?limit=100`, { key: a.key });
      const delivery = list.body.data.deliveries.find((d: { event: string }) => d.event === 'conversation.message').id as string;
      // The dashboard and the client send an Idempotency-Key with every POST.
      const retry = await t.request('POST', `/v1/webhooks/${wh}/deliveries/${delivery}/retry`, { key: a.key, headers: { 'idempotency-key': 'retry-1' } });
      assert.equal(retry.status, 200, retry.text);
      assert.ok(retry.text.includes(id));
      const r = await t.request('DELETE', `/v1/conversations/${id}`, { key: a.key });
      assert.equal(r.status, 200, r.text);
      assert.equal((await traces(t, a.accountId, id)).idempotencyKeys, 0);
    });

    test('the kept answer of a send to a percent-encoded path (conv%5F…, routed to the same conversation) goes too', async () => {
      const a = await setUp();
      const id = await conversation(a.key, 'encoded');
      const sent = await t.request('POST', `/v1/chat/conversations/${id.replace('_', '%5F')}/messages`, {
        key: a.key,
        body: { content: 'my order number is 4242' },
        headers: { 'idempotency-key': 'send-encoded' },
      });
      assert.equal(sent.status, 200, sent.text);
      const kept = () => t.ctx.db.selectFrom('idempotency_keys').select('response').where('account_id', '=', a.accountId).where('key', '=', 'send-encoded').execute();
      assert.ok((await kept())[0]?.response?.includes('4242'));
      const r = await t.request('DELETE', `/v1/conversations/${id}`, { key: a.key });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(await kept(), []);
    });

    test('a manual retry of one of its deliveries, held up by the erasure, is a 404', { skip: dialect !== 'postgres' }, async () => {
      const a = await setUp();
      await conversation(a.key, 'retry-race');
      const wh = (await t.request('GET', '/v1/webhooks', { key: a.key })).body.data.webhooks[0].id as string;
      const delivery = (await t.request('GET', `/v1/webhooks/${wh}/deliveries?limit=1`, { key: a.key })).body.data.deliveries[0].id as string;
      const db = t.ctx.db;
      let retry: Promise<{ status: number; text: string }> | undefined;
      await db.transaction().execute(async (trx) => {
        // The erasure's delete of the delivery, not yet committed when the retry takes the delivery's lease.
        await trx.deleteFrom('delivery_attempts').where('delivery_id', '=', delivery).execute();
        await trx.deleteFrom('deliveries').where('id', '=', delivery).execute();
        const locker = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;
        retry = t.request('POST', `/v1/webhooks/${wh}/deliveries/${delivery}/retry`, { key: a.key });
        await waitingOn(locker, 1);
      });
      const r = await retry!;
      assert.equal(r.status, 404, r.text);
      assert.equal(JSON.parse(r.text).error.code, 'NOT_FOUND');
    });

    test('an escalation held up by the erasure finds no conversation (404), as a message or an end does', { skip: dialect !== 'postgres' }, async () => {
      const a = await setUp();
      // Not escalated yet: the escalation has something to write.
      const started = await t.request('POST', '/v1/chat/conversations', { key: a.key, body: { customerId: 'cust-held' } });
      assert.equal(started.status, 201, started.text);
      const id = started.body.data.conversation.id as string;
      let escalate: Promise<{ status: number; text: string }> | undefined;
      await t.ctx.db.transaction().execute(async (trx) => {
        // The erasure: the row lock, then the deletes once the escalation waits on it.
        await conversationsRepository.find(trx, a.accountId, id, true);
        const locker = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;
        escalate = t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key: a.key, body: {} });
        await waitingOn(locker, 1);
        await conversationsRepository.delete(trx, a.accountId, id);
      });
      const r = await escalate!;
      assert.equal(r.status, 404, r.text);
      assert.equal(JSON.parse(r.text).error.code, 'NOT_FOUND');
    });

    test('an event dated a little before the start (another node, its clock behind) is erased too', async () => {
      const a = await setUp();
      const id = await conversation(a.key, 'skewed');
      const c = await t.ctx.db.selectFrom('conversations').select('created_at').where('id', '=', id).executeTakeFirstOrThrow();
      const at = Number(c.created_at) - 60_000;
      const eventId = newId('evt', at);
      const body = JSON.stringify({ event: 'escalation', timestamp: new Date(at).toISOString(), data: { conversationId: id } });
      await t.ctx.db.insertInto('events').values({ id: eventId, account_id: a.accountId, kind: 'escalation', payload: body, created_at: at }).execute();
      const webhook = await t.ctx.db.selectFrom('webhooks').select('id').where('account_id', '=', a.accountId).executeTakeFirstOrThrow();
      await t.ctx.db
        .insertInto('deliveries')
        .values({
          id: newId('dlv', at), account_id: a.accountId, webhook_id: webhook.id, event_id: eventId, event: 'escalation', url: 'http://127.0.0.1:9/hook', secret: 's', body,
          status: 'pending', attempt_count: 0, auto_attempts: 0, next_attempt_at: at, lease_owner: null, lease_expires_at: null, created_at: at, updated_at: at,
        })
        .execute();
      assert.equal((await t.request('DELETE', `/v1/conversations/${id}`, { key: a.key })).status, 200);
      assert.deepEqual(await traces(t, a.accountId, id), { conversations: 0, messages: 0, workflowRuns: 0, events: 0, deliveries: 0, attempts: 0, idempotencyKeys: 0 });
    });

    test("another account's conversation is a 404 and stays; the conversations:write scope is required", async () => {
      const a = await setUp();
      const other = await t.account();
      const id = await conversation(a.key, 'theirs');
      const r = await t.request('DELETE', `/v1/conversations/${id}`, { key: other.key });
      assert.equal(r.status, 404);
      assert.equal(r.body.error.code, 'NOT_FOUND');
      const reader = await t.ctx.services.accounts.createKey({ accountId: a.accountId, scopes: ['conversations:read', 'chat'] });
      const denied = await t.request('DELETE', `/v1/conversations/${id}`, { key: reader.key });
      assert.equal(denied.status, 403);
      assert.deepEqual(denied.body.error, { code: 'FORBIDDEN', message: 'this API key lacks the conversations:write scope' });
      const before = await traces(t, a.accountId, id);
      assert.equal(before.conversations, 1);
      assert.equal(before.messages, 5);
    });

    test('DELETE /v1/conversations?customerId= erases every conversation of that customer, each with its notice; others stay', async () => {
      const a = await setUp();
      const other = await t.account();
      // An id with characters a query string must encode.
      const customer = 'crm/42 & co?';
      const gone = [await conversation(a.key, 'c1', customer), await conversation(a.key, 'c2', customer), await conversation(a.key, 'c3', customer)];
      const kept = await conversation(a.key, 'c4', 'crm/43');
      const theirs = await conversation(other.key, 'c5', customer);
      const keptBefore = await traces(t, a.accountId, kept);
      const theirsBefore = await traces(t, other.accountId, theirs);

      const path = `/v1/conversations?customerId=${encodeURIComponent(customer)}`;
      const reader = await t.ctx.services.accounts.createKey({ accountId: a.accountId, scopes: ['conversations:read', 'chat'] });
      assert.equal((await t.request('DELETE', path, { key: reader.key })).status, 403);
      const r = await t.request('DELETE', path, { key: a.key });
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(r.body, { success: true, data: { deleted: true, count: 3 } });
      for (const id of gone) {
        assert.deepEqual(await traces(t, a.accountId, id), { conversations: 0, messages: 0, workflowRuns: 0, events: 0, deliveries: 0, attempts: 0, idempotencyKeys: 0 });
      }
      assert.deepEqual(await traces(t, a.accountId, kept), keptBefore);
      assert.deepEqual(await traces(t, other.accountId, theirs), theirsBefore);
      const notices = await t.ctx.db.selectFrom('deliveries').select('body').where('account_id', '=', a.accountId).where('event', '=', 'conversation.erased').execute();
      assert.deepEqual(notices.map((n) => JSON.parse(n.body).data).sort((x, y) => x.conversationId.localeCompare(y.conversationId)), gone.map((id) => ({ conversationId: id, customerId: customer })).sort((x, y) => x.conversationId.localeCompare(y.conversationId)));
      // Nothing left: a repeat (a retry whose answer was lost) succeeds and erases nothing.
      assert.deepEqual((await t.request('DELETE', path, { key: a.key })).body, { success: true, data: { deleted: true, count: 0 } });

      // customerId is required, so a bare DELETE never means "every conversation"; other parameters are refused.
      for (const [bad, message] of [
        ['/v1/conversations', /customerId/],
        ['/v1/conversations?customerId=', /customerId/],
        ['/v1/conversations?customerId=crm%2F43&status=ended', /status/],
      ] as const) {
        const refused = await t.request('DELETE', bad, { key: a.key });
        assert.equal(refused.status, 400, bad);
        assert.equal(refused.body.error.code, 'INVALID_REQUEST');
        assert.match(refused.body.error.message, message);
      }
      assert.deepEqual(await traces(t, a.accountId, kept), keptBefore);
    });

    test('erasing a customer walks past a page of conversations (100) without skipping or repeating any', async () => {
      const a = await t.account();
      // Rows as the chat channel leaves them, several in the same millisecond, so the walk's tie-break (id) is used.
      const base = Date.now() - DAY;
      const ids: string[] = [];
      for (let i = 0; i < 205; i++) {
        const id = await insertConversation(t.ctx.db, a.accountId, { customer_id: 'bulk', created_at: base + Math.floor(i / 3) });
        await insertMessage(t.ctx.db, a.accountId, id, { created_at: base + Math.floor(i / 3) });
        ids.push(id);
      }
      const other = await insertConversation(t.ctx.db, a.accountId, { customer_id: 'bulky', created_at: base });
      const r = await t.request('DELETE', '/v1/conversations?customerId=bulk', { key: a.key });
      assert.equal(r.status, 200, r.text);
      assert.equal(r.body.data.count, 205);
      const left = await t.ctx.db.selectFrom('conversations').select('id').where('account_id', '=', a.accountId).execute();
      assert.deepEqual(left.map((c) => c.id), [other]);
      assert.equal((await t.ctx.db.selectFrom('messages').select('id').where('account_id', '=', a.accountId).execute()).length, 0);
    });

    test('messages sent while it is erased either are erased with it or find no conversation: nothing is left behind', async () => {
      const a = await setUp();
      for (let round = 0; round < 3; round++) {
        const id = await conversation(a.key, `race-${round}`);
        const sends = Array.from({ length: 6 }, (_, i) =>
          t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: a.key, body: { content: i % 2 ? 'book a demo please' : `where is my parcel ${i}` } }),
        );
        const contact = t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: a.key, body: { email: 'late@example.test' } });
        const erase = t.request('DELETE', `/v1/conversations/${id}`, { key: a.key });
        const statuses = (await Promise.all([...sends, contact])).map((r) => r.status);
        assert.equal((await erase).status, 200);
        assert.ok(statuses.every((s) => s === 200 || s === 404), JSON.stringify(statuses));
        assert.deepEqual(await traces(t, a.accountId, id), { conversations: 0, messages: 0, workflowRuns: 0, events: 0, deliveries: 0, attempts: 0, idempotencyKeys: 0 });
      }
    });
  });
}

test('CONVERSATION_RETENTION: off by default; 0 keeps everything; under a day is refused (a bare number is milliseconds)', () => {
  assert.equal(loadConfig({}).conversationRetentionMs, 0);
  assert.equal(loadConfig({ CONVERSATION_RETENTION: '365d' }).conversationRetentionMs, 365 * DAY);
  assert.throws(() => loadConfig({ CONVERSATION_RETENTION: '12h' }), /CONVERSATION_RETENTION="12h": must be 0 \(keep every conversation\) or at least 1d/);
  assert.throws(() => loadConfig({ CONVERSATION_RETENTION: '365' }), /CONVERSATION_RETENTION="365"/);
});

for (const dialect of DIALECTS) {
  describe(`CONVERSATION_RETENTION erases conversations ended longer ago (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('the worker erases conversations that ended before the cut, of every account, silently; open and recent ones stay', async () => {
      const now = Date.now();
      const a = await t.account();
      const b = await t.account();
      const wh = await t.request('POST', '/v1/webhooks', { key: a.key, body: { url: 'http://127.0.0.1:9/hook', events: ['conversation.erased'], secret: 'erase-secret' } });
      assert.equal(wh.status, 201, wh.text);
      const old = now - 400 * DAY;
      const oldEnded = await insertConversation(t.ctx.db, a.accountId, { created_at: old, status: 'ended', outcome: 'resolved', ended_at: old + HOUR, last_message_at: old + HOUR, message_count: 1 });
      await insertMessage(t.ctx.db, a.accountId, oldEnded, { created_at: old });
      const oldEscalated = await insertConversation(t.ctx.db, b.accountId, { created_at: old, status: 'escalated', outcome: 'escalated', ended_at: old + DAY, last_message_at: old + DAY });
      // Escalated long ago and never ended: not erased (it has not ended).
      const stillOpen = await insertConversation(t.ctx.db, b.accountId, { created_at: old, status: 'escalated', escalated_at: old, last_message_at: old });
      const recent = await insertConversation(t.ctx.db, a.accountId, { created_at: now - 10 * DAY, status: 'ended', outcome: 'resolved', ended_at: now - 10 * DAY });
      // Ended just after the cut: a message long ago does not make it old.
      const endedLate = await insertConversation(t.ctx.db, a.accountId, { created_at: old, status: 'ended', outcome: 'resolved', ended_at: now - 300 * DAY, last_message_at: old });

      const run = (env: Record<string, string>) =>
        workerTasks({ ...t.ctx, config: { ...t.ctx.config, ...loadConfig(env) } })
          .find((k) => k.name === 'conversation-retention')!
          .run(new AbortController().signal);
      const exists = async (id: string) => (await t.ctx.db.selectFrom('conversations').select('id').where('id', '=', id).execute()).length === 1;

      await run({});
      assert.ok(await exists(oldEnded), 'off by default');
      await run({ CONVERSATION_RETENTION: '365d' });
      assert.deepEqual(
        await Promise.all([oldEnded, oldEscalated, stillOpen, recent, endedLate].map(exists)),
        [false, false, true, true, true],
      );
      assert.equal((await t.ctx.db.selectFrom('messages').select('id').where('conversation_id', '=', oldEnded).execute()).length, 0);
      // Retention is the owner's policy, not a customer's request: no conversation.erased notice.
      assert.equal((await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', a.accountId).execute()).length, 0);
    });

    test('two workers erasing at once: each conversation once, no error', async () => {
      const now = Date.now();
      const a = await t.account();
      const old = now - 800 * DAY;
      const ids = [];
      for (let i = 0; i < 12; i++) ids.push(await insertConversation(t.ctx.db, a.accountId, { created_at: old + i, status: 'ended', outcome: 'resolved', ended_at: old + i + 1, last_message_at: old + i }));
      const cut = now - 700 * DAY;
      const [x, y] = await Promise.all([t.ctx.services.conversations.eraseEnded(cut, undefined, 5), t.ctx.services.conversations.eraseEnded(cut, undefined, 4)]);
      assert.equal(x + y >= 12, true, `${x} + ${y}`);
      assert.equal((await t.ctx.db.selectFrom('conversations').select('id').where('id', 'in', ids).execute()).length, 0);
    });
  });
}
