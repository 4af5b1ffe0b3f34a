import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../../src/config.js';
import { createContext, type AppContext } from '../../../src/context.js';
import { openDatabase } from '../../../src/db/database.js';
import { systemClock } from '../../../src/lib/clock.js';
import { useTestApp } from '../../helpers/app.js';
import { quietLog } from '../webhooks/delivery-helpers.js';

type Query = { text: string; inTransaction: boolean; values: unknown[] };

// PostgreSQL only: there each statement is a round trip to the server (SQLite's writes go through its group commit).
describe('chat on PostgreSQL, in statements', () => {
  const api = useTestApp('postgres', { env: { WEBHOOK_ALLOW_PRIVATE_URLS: 'true' } });
  // Every query of the database opened below (its clients bind `query` when they connect, so the patch comes first).
  const seen: Query[] = [];
  const original = pg.Client.prototype.query;
  /** Runs before the next query whose text starts with the given prefix, once. */
  let beforeNext: { prefix: string; run: () => Promise<void> } | undefined;
  let ctx: AppContext;
  let close: () => Promise<void>;

  before(() => {
    const open = new WeakSet<object>();
    pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
      const first = args[0];
      const text = (typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '')).trim().toLowerCase();
      if (text === 'begin' || text.startsWith('start transaction')) open.add(this);
      const values = (Array.isArray(args[1]) ? args[1] : ((first as { values?: unknown[] } | undefined)?.values ?? [])) as unknown[];
      seen.push({ text, inTransaction: open.has(this), values });
      if (text === 'commit' || text === 'rollback') open.delete(this);
      const hook = beforeNext;
      if (hook && text.startsWith(hook.prefix)) {
        beforeNext = undefined;
        return hook.run().then(() => (original as (...a: unknown[]) => Promise<unknown>).apply(this, args));
      }
      return (original as (...a: unknown[]) => unknown).apply(this, args);
    } as typeof original;
    const database = openDatabase(api.database.url);
    ctx = createContext(loadConfig({ DATABASE_URL: api.database.url }), database, systemClock, quietLog);
    close = () => database.close();
  });
  after(async () => {
    pg.Client.prototype.query = original;
    await close();
  });

  /** The statements `fn` ran. */
  async function statementsOf(fn: () => Promise<unknown>) {
    const from = seen.length;
    await fn();
    return seen.slice(from);
  }
  const startConversation = async () => (await ctx.services.chat.start(api.accountId, {})).conversation.id;
  const stored = (id: string) =>
    ctx.db.selectFrom('messages').select(['role', 'content', 'seq']).where('conversation_id', '=', id).orderBy('seq').execute();

  test('a plain question and its answer: the read, then one statement with no transaction (the row, the messages and their events)', async () => {
    const id = await startConversation();
    // The first message of the process also loads the account's knowledge base into the assistant's cache.
    await ctx.services.chat.send(api.accountId, id, 'hello there');
    const qs = await statementsOf(() => ctx.services.chat.send(api.accountId, id, 'how are you?'));
    assert.equal(qs.length, 2, qs.map((q) => q.text).join('\n'));
    assert.ok(qs[0]!.text.startsWith('select "conversations".*'), qs[0]!.text);
    assert.ok(qs[1]!.text.startsWith('with "changed" as (update "conversations"'), qs[1]!.text);
    assert.ok(qs.every((q) => !q.inTransaction));
    assert.deepEqual((await stored(id)).map((m) => m.seq), [1, 2, 3, 4, 5]);
    const c = await ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(c.message_count, 5);
    const events = await ctx.db.selectFrom('events').select('payload').where('account_id', '=', api.accountId).where('kind', '=', 'conversation.message').execute();
    const positions = events.map((e) => (JSON.parse(e.payload) as { data: { conversationId: string; position: number } }).data).filter((d) => d.conversationId === id);
    assert.deepEqual(positions.map((d) => d.position).sort(), [1, 2, 3, 4, 5]);
  });

  test('another message counted between the read and the write: the statement writes nothing, and the exchange is decided again under lock', async () => {
    const id = await startConversation();
    // Another request's message lands after this one read the conversation, just before its write.
    beforeNext = { prefix: 'with "changed"', run: async () => void (await api.ctx.services.chat.send(api.accountId, id, 'first')) };
    const qs = await statementsOf(() => ctx.services.chat.send(api.accountId, id, 'second'));
    assert.ok(qs.some((q) => q.inTransaction && q.text.includes('for update')), 'the locked read ran');
    assert.deepEqual(
      (await stored(id)).map((m) => [m.role, m.seq]),
      [['assistant', 1], ['customer', 2], ['assistant', 3], ['customer', 4], ['assistant', 5]],
    );
    assert.deepEqual((await stored(id)).filter((m) => m.role === 'customer').map((m) => m.content), ['first', 'second']);
    const c = await ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    assert.equal(c.message_count, 5);
  });

  test('a lone surrogate is stored as U+FFFD by the one statement, as a text parameter of the transaction stores it', async () => {
    const id = await startConversation();
    // The HTTP layer refuses one in a request; a reply cut at a length can still end in one.
    const content = 'hello \ud83d there';
    const qs = await statementsOf(() => ctx.services.chat.send(api.accountId, id, content));
    assert.ok(qs.some((q) => q.text.startsWith('with "changed"')));
    const customer = (await stored(id)).find((m) => m.role === 'customer');
    assert.equal(customer?.content, Buffer.from(content, 'utf8').toString('utf8'));
    assert.equal(customer?.content, 'hello \ufffd there');
  });

  test('an exchange that escalates still writes in one transaction', async () => {
    const id = await startConversation();
    const qs = await statementsOf(() => ctx.services.chat.send(api.accountId, id, 'talk to a person please'));
    assert.ok(qs.some((q) => q.text === 'begin') && qs.some((q) => q.text === 'commit'));
    assert.ok(!qs.some((q) => q.text.startsWith('with "changed"')));
  });

  const deliveriesOf = (eventIds: string[]) =>
    ctx.db.selectFrom('deliveries').selectAll().where('event_id', 'in', eventIds.length ? eventIds : ['none']).orderBy('event_id').orderBy('webhook_id').execute();
  const createWebhook = async (events: string[], secret: string) => {
    const r = await api.request('POST', '/v1/webhooks', { key: api.key, body: { url: `http://127.0.0.1:9/${secret}`, events, secret } });
    assert.equal(r.status, 201, r.text);
    return (r.body as { data: { id: string } }).data.id;
  };
  /** The events of a conversation (conversation.started first, then its messages in order). */
  const eventsOf = async (id: string) =>
    (await ctx.db.selectFrom('events').selectAll().where('account_id', '=', api.accountId).execute())
      .map((e) => ({ ...e, data: (JSON.parse(e.payload) as { data: { conversationId?: string; position?: number } }).data }))
      .filter((e) => e.data.conversationId === id)
      .sort((a, b) => (a.kind === 'conversation.started' ? -1 : b.kind === 'conversation.started' ? 1 : a.data.position! - b.data.position!));
  const messageEventsOf = async (id: string) => (await eventsOf(id)).filter((e) => e.kind === 'conversation.message');
  /** POST /v1/chat/conversations under an Idempotency-Key: a unit of work, so the start is written in a transaction. */
  const startUnderKey = async (key: string, body: object) => {
    const r = await api.request('POST', '/v1/chat/conversations', { key: api.key, body, headers: { 'idempotency-key': key } });
    assert.equal(r.status, 201, r.text);
    return (r.body as { data: { conversation: { id: string } } }).data.conversation.id;
  };
  /** Statements of the exchange itself: the announcement that follows new deliveries is sent on its own. */
  const isNotify = (q: Query) => q.text.startsWith('select pg_notify');
  const exchangeStatements = (qs: Query[]) => qs.filter((q) => !isNotify(q));
  /** Whether a NOTIFY was sent since `seen` held `from` statements: it follows new deliveries on a statement of its own. */
  const announcedSince = async (from: number) => {
    for (let i = 0; i < 100 && !seen.slice(from).some(isNotify); i++) await new Promise((r) => setTimeout(r, 10));
    return seen.slice(from).some(isNotify);
  };

  test('with enabled webhooks the exchange is still one statement, and writes the deliveries the fan-out writes in a transaction', async () => {
    const messages = await createWebhook(['conversation.message', 'conversation.started'], 'whsec_rt_messages');
    const other = await createWebhook(['escalation'], 'whsec_rt_other');
    const disabled = await createWebhook(['conversation.message'], 'whsec_rt_disabled');
    assert.equal((await api.request('PUT', `/v1/webhooks/${disabled}`, { key: api.key, body: { enabled: false } })).status, 200);
    let kicks = 0;
    const kick = ctx.deliveries.kick;
    ctx.deliveries.kick = () => void kicks++;
    try {
      const id = await startConversation();
      await ctx.services.chat.send(api.accountId, id, 'hello there');
      const before = kicks;
      const from = seen.length;
      const qs = await statementsOf(() => ctx.services.chat.send(api.accountId, id, 'how are you?'));
      const exchange = exchangeStatements(qs);
      assert.equal(exchange.length, 2, exchange.map((q) => q.text).join('\n'));
      assert.ok(exchange[1]!.text.startsWith('with "changed" as (update "conversations"'), exchange[1]!.text);
      assert.ok(exchange[1]!.text.includes('insert into "deliveries"'), exchange[1]!.text);
      assert.ok(qs.every((q) => !q.inTransaction));
      assert.equal(kicks, before + 1, 'the worker of this process is woken');
      // The other processes' workers are told by a NOTIFY of its own, once the statement has run.
      assert.ok(await announcedSince(from), 'new deliveries are announced');

      // The greeting's event (written with the conversation) and the two exchanges' (each one statement).
      const events = await messageEventsOf(id);
      assert.equal(events.length, 5);
      const rows = await deliveriesOf(events.map((e) => e.id));
      // One per message event, to the one enabled webhook subscribed to conversation.message.
      assert.equal(rows.length, 5);
      // A start under an Idempotency-Key is written in a transaction: its deliveries are the fan-out's.
      const reference = await startUnderKey('rt-webhooks', {});
      const started = (await deliveriesOf((await eventsOf(reference)).map((e) => e.id))).find((d) => d.event === 'conversation.started')!;
      const startedEvent = await ctx.db.selectFrom('events').selectAll().where('id', '=', started.event_id!).executeTakeFirstOrThrow();
      const byEvent = new Map(events.map((e) => [e.id, e]));
      for (const d of rows) {
        const e = byEvent.get(d.event_id!)!;
        assert.equal(d.webhook_id, messages);
        assert.equal(d.account_id, api.accountId);
        assert.equal(d.event, 'conversation.message');
        assert.equal(d.url, 'http://127.0.0.1:9/whsec_rt_messages');
        assert.equal(d.secret, 'whsec_rt_messages');
        assert.equal(d.body, e.payload, 'the bytes the event was stored with');
        assert.match(d.id, /^dlv_[0-9a-hjkmnp-tv-z]{26}$/);
        // As the fan-out in a transaction writes them (the conversation.started delivery was written that way).
        assert.equal(d.status, started.status);
        assert.equal(Number(d.next_attempt_at) - Number(e.created_at), Number(started.next_attempt_at) - Number(startedEvent.created_at));
        assert.deepEqual([d.attempt_count, d.auto_attempts, d.lease_owner, d.lease_expires_at], [0, 0, null, null]);
        assert.ok(Number(d.created_at) >= Number(e.created_at));
      }
      assert.equal(new Set(rows.map((d) => d.id)).size, 5);
      assert.ok(!rows.some((d) => d.webhook_id === other || d.webhook_id === disabled));
    } finally {
      ctx.deliveries.kick = kick;
      for (const w of [messages, other, disabled]) await api.request('DELETE', `/v1/webhooks/${w}`, { key: api.key });
    }
  });

  test('each shape of the exchange has its own statement: every one written alone, with its own conversation’s values', async () => {
    // The statement is compiled once per shape and then only given new values: one reused for another shape (its
    // `escalated_at is null` for an escalated row, `customer_email is null` for one with an address), or a value
    // kept from an earlier call (an address, the number of webhooks), would miss the row and fall back to the
    // transaction, or write the wrong rows.
    const shapes = [
      { name: 'plain', email: undefined, escalated: false },
      { name: 'escalated', email: undefined, escalated: true },
      { name: 'with an address', email: 'b@acme.test', escalated: false },
      { name: 'escalated with an address', email: 'e@acme.test', escalated: true },
      { name: 'another address', email: 'c@acme.test', escalated: false },
      { name: 'plain again', email: undefined, escalated: false },
    ];
    const hooks: string[] = [];
    try {
      for (const webhooks of [0, 1, 2]) {
        if (webhooks > 0) hooks.push(await createWebhook(['conversation.message'], `whsec_rt_shape_${webhooks}`));
        for (const shape of shapes) {
          const what = `${shape.name}, ${webhooks} webhooks`;
          const id = (await ctx.services.chat.start(api.accountId, shape.email ? { customerEmail: shape.email } : {})).conversation.id;
          if (shape.escalated) await ctx.services.chat.escalate(api.accountId, id, {});
          const before = await ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
          const qs = exchangeStatements(await statementsOf(() => ctx.services.chat.send(api.accountId, id, 'how do I track my order?')));
          assert.equal(qs.length, 2, `${what}:\n${qs.map((q) => q.text).join('\n')}`);
          assert.ok(qs[1]!.text.startsWith('with "changed" as (update "conversations"'), what);
          assert.equal(qs[1]!.text.includes('"customer_email" is null'), shape.email === undefined, what);
          assert.equal(qs[1]!.text.includes('"escalated_at" is not null'), shape.escalated, what);
          assert.equal(qs[1]!.text.includes('insert into "deliveries"'), webhooks > 0, what);
          assert.ok(qs.every((q) => !q.inTransaction), what);

          const after = await ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
          // The exchange's figures changed, nothing else.
          const unchanged = ({ message_count: _m, answered_count: _a, unanswered_streak: _u, last_message_at: _l, ...rest }: typeof after) => rest;
          assert.deepEqual(unchanged(after), unchanged(before), what);
          assert.equal(after.message_count, before.message_count + 2, what);
          assert.equal(after.customer_email, shape.email ?? null, what);
          assert.equal(after.escalated_at !== null, shape.escalated, what);
          const messages = await stored(id);
          assert.deepEqual(messages.slice(-2).map((m) => [m.role, m.seq]), [['customer', after.message_count - 1], ['assistant', after.message_count]], what);
          assert.equal(messages.at(-2)!.content, 'how do I track my order?', what);
          const events = (await messageEventsOf(id)).filter((e) => (JSON.parse(e.payload) as { data: { position: number } }).data.position >= after.message_count - 1);
          assert.equal(events.length, 2, what);
          const deliveries = await deliveriesOf(events.map((e) => e.id));
          assert.equal(deliveries.length, 2 * webhooks, what);
          assert.deepEqual([...new Set(deliveries.map((d) => d.webhook_id))].sort(), [...hooks].sort(), what);
        }
      }
    } finally {
      for (const w of hooks) await api.request('DELETE', `/v1/webhooks/${w}`, { key: api.key });
    }
  });

  test('a webhook enabled between the read and the write: the statement writes nothing, and the transaction delivers to it too', async () => {
    const first = await createWebhook(['conversation.message'], 'whsec_rt_first');
    let late: string | undefined;
    try {
      const id = await startConversation();
      await ctx.services.chat.send(api.accountId, id, 'hello there');
      beforeNext = { prefix: 'with "changed"', run: async () => void (late = await createWebhook(['conversation.message'], 'whsec_rt_late')) };
      const qs = await statementsOf(() => ctx.services.chat.send(api.accountId, id, 'how are you?'));
      assert.ok(qs.some((q) => q.inTransaction && q.text.includes('for update')), 'decided again under lock');
      const events = await messageEventsOf(id);
      // The greeting's and both exchanges' events; the second's went to both webhooks, and nothing was written twice.
      assert.equal(events.length, 5);
      const second = events.filter((e) => [4, 5].includes((JSON.parse(e.payload) as { data: { position: number } }).data.position));
      const rows = await deliveriesOf(second.map((e) => e.id));
      assert.deepEqual(rows.map((d) => d.webhook_id).sort(), [first, first, late!, late!].sort());
      assert.deepEqual((await stored(id)).map((m) => m.seq), [1, 2, 3, 4, 5]);
    } finally {
      for (const w of [first, late]) if (w) await api.request('DELETE', `/v1/webhooks/${w}`, { key: api.key });
    }
  });

  /** What a start wrote that does not depend on its ids and time: the conversation, its messages, events and deliveries. */
  async function startRows(id: string) {
    const c = await ctx.db.selectFrom('conversations').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
    const messages = await ctx.db.selectFrom('messages').selectAll().where('conversation_id', '=', id).orderBy('seq').execute();
    const events = await eventsOf(id);
    const deliveries = await deliveriesOf(events.map((e) => e.id));
    const byId = new Map(events.map((e) => [e.id, e]));
    const { id: _i, created_at: _c, last_message_at: _l, ...conversation } = c;
    assert.equal(c.last_message_at, c.created_at);
    return {
      conversation,
      messages: messages.map(({ id: _m, conversation_id, created_at, ...m }) => {
        assert.deepEqual([conversation_id, created_at], [id, c.created_at]);
        return m;
      }),
      events: events.map((e) => {
        const { conversationId, messageId: _m, timestamp: _t, ...data } = e.data as Record<string, unknown>;
        assert.equal(conversationId, id);
        return { kind: e.kind, account: e.account_id, data };
      }),
      deliveries: deliveries
        .map((d) => {
          const e = byId.get(d.event_id!)!;
          assert.equal(d.body, e.payload, 'the bytes the event was stored with');
          assert.equal(d.event, e.kind);
          assert.match(d.id, /^dlv_[0-9a-hjkmnp-tv-z]{26}$/);
          assert.ok(Number(d.created_at) >= Number(e.created_at) && d.updated_at === d.created_at);
          const { id: _d, event_id: _e, body: _b, created_at: _c2, updated_at: _u, next_attempt_at, ...rest } = d;
          return { ...rest, due: Number(next_attempt_at) - Number(e.created_at) };
        })
        .sort((a, b) => `${a.event} ${a.webhook_id}`.localeCompare(`${b.event} ${b.webhook_id}`)),
    };
  }
  /**
   * Whether the app's service (whose statements `seen` does not see: its clients connected before the patch) wrote
   * each start `fn` made alone: what each of its events.emitAlone calls answered (none: written in a transaction).
   */
  async function aloneWrites(fn: () => Promise<unknown>) {
    const bus = api.ctx.events;
    const emitAlone = bus.emitAlone;
    const written: boolean[] = [];
    bus.emitAlone = async (...a) => {
      const emitted = await emitAlone(...a);
      written.push(emitted !== undefined);
      return emitted;
    };
    try {
      await fn();
    } finally {
      bus.emitAlone = emitAlone;
    }
    return written;
  }
  const START_BODY = { customerId: 'cus_rt_start', customerLabel: 'Jo Start', customerEmail: 'jo@acme.test', persona: 'Robin', metadata: { plan: 'gold', n: 3 } };

  test('starting a conversation: one read, then one statement with no transaction (the conversation, its greeting, both events)', async () => {
    const qs = exchangeStatements(await statementsOf(() => ctx.services.chat.start(api.accountId, START_BODY)));
    assert.equal(qs.length, 2, qs.map((q) => q.text).join('\n'));
    assert.ok(qs[0]!.text.startsWith('select "assistant_settings", (select count(*)'), qs[0]!.text);
    assert.ok(qs[1]!.text.startsWith('with "changed" as (insert into "conversations"'), qs[1]!.text);
    assert.ok(!qs[1]!.text.includes('insert into "deliveries"'), 'no webhook: no deliveries to write');
    assert.ok(qs.every((q) => !q.inTransaction));
    // The events in the order the transaction emits them: the start, then the greeting.
    const eventsJson = qs[1]!.values.find((v) => typeof v === 'string' && v.includes('"kind":"conversation.'));
    assert.deepEqual((JSON.parse(eventsJson as string) as Array<{ kind: string }>).map((e) => e.kind), ['conversation.started', 'conversation.message']);
  });

  test('a start written alone writes what the transaction writes (the rows, the events, the deliveries) and answers the same', async () => {
    const both = await createWebhook(['conversation.started', 'conversation.message'], 'whsec_rt_start_both');
    const startedOnly = await createWebhook(['conversation.started'], 'whsec_rt_start_started');
    const disabled = await createWebhook(['conversation.started', 'conversation.message'], 'whsec_rt_start_disabled');
    assert.equal((await api.request('PUT', `/v1/webhooks/${disabled}`, { key: api.key, body: { enabled: false } })).status, 200);
    let kicks = 0;
    const kick = ctx.deliveries.kick;
    ctx.deliveries.kick = () => void kicks++;
    try {
      const from = seen.length;
      const qs = await statementsOf(() => ctx.services.chat.start(api.accountId, START_BODY));
      const start = exchangeStatements(qs);
      assert.equal(start.length, 2, start.map((q) => q.text).join('\n'));
      assert.ok(start[1]!.text.startsWith('with "changed" as (insert into "conversations"') && start[1]!.text.includes('insert into "deliveries"'), start[1]!.text);
      assert.ok(qs.every((q) => !q.inTransaction));
      assert.equal(kicks, 1, 'the worker of this process is woken');
      assert.ok(await announcedSince(from), 'new deliveries are announced');

      // Over HTTP, alone and in a transaction (under an Idempotency-Key): the same rows and the same answer.
      let alone!: Awaited<ReturnType<typeof api.request>>;
      let keyed!: typeof alone;
      assert.deepEqual(await aloneWrites(async () => void (alone = await api.request('POST', '/v1/chat/conversations', { key: api.key, body: START_BODY }))), [true]);
      assert.equal(alone.status, 201, alone.text);
      const underKey = { key: api.key, body: START_BODY, headers: { 'idempotency-key': 'rt-start-same' } };
      assert.deepEqual(await aloneWrites(async () => void (keyed = await api.request('POST', '/v1/chat/conversations', underKey))), [], 'written in a transaction');
      assert.equal(keyed.status, 201, keyed.text);
      const ids = [alone, keyed].map((r) => (r.body as { data: { conversation: { id: string } } }).data.conversation.id);
      const [a, k] = await Promise.all(ids.map(startRows));
      assert.deepEqual(a, k);
      assert.deepEqual(a!.events.map((e) => e.kind), ['conversation.started', 'conversation.message']);
      assert.deepEqual(a!.deliveries.map((d) => [d.event, d.webhook_id, d.url, d.secret]), [
        ['conversation.message', both, 'http://127.0.0.1:9/whsec_rt_start_both', 'whsec_rt_start_both'],
        ...[
          ['conversation.started', both, 'http://127.0.0.1:9/whsec_rt_start_both', 'whsec_rt_start_both'],
          ['conversation.started', startedOnly, 'http://127.0.0.1:9/whsec_rt_start_started', 'whsec_rt_start_started'],
        ].sort((x, y) => x[1]!.localeCompare(y[1]!)),
      ]);
      // The answers differ only in ids and times.
      const bare = (r: typeof alone) => JSON.parse(r.text.replaceAll(/(conv|msg)_[0-9a-z]{26}|anon_[0-9a-z]{26}|\d{4}-\d\d-\d\dT[\d:.]+Z/g, 'x')) as unknown;
      assert.deepEqual(bare(alone), bare(keyed));
    } finally {
      ctx.deliveries.kick = kick;
      for (const w of [both, startedOnly, disabled]) await api.request('DELETE', `/v1/webhooks/${w}`, { key: api.key });
    }
  });

  test('a webhook enabled between the read and the start: the statement writes nothing, and the transaction writes it all once', async () => {
    const first = await createWebhook(['conversation.started', 'conversation.message'], 'whsec_rt_start_first');
    let late: string | undefined;
    try {
      const conversations = async () => Number((await ctx.db.selectFrom('conversations').select((e) => e.fn.countAll().as('n')).where('account_id', '=', api.accountId).executeTakeFirstOrThrow()).n);
      const before = await conversations();
      beforeNext = {
        prefix: 'with "changed" as (insert into "conversations"',
        run: async () => void (late = await createWebhook(['conversation.started', 'conversation.message'], 'whsec_rt_start_late')),
      };
      let id = '';
      const qs = await statementsOf(async () => void (id = (await ctx.services.chat.start(api.accountId, START_BODY)).conversation.id));
      assert.ok(late, 'the webhook was enabled before the statement ran');
      assert.ok(qs.some((q) => q.text.startsWith('with "changed" as (insert into "conversations"') && !q.inTransaction), 'the statement ran');
      assert.ok(qs.some((q) => q.inTransaction && q.text.startsWith('insert into "conversations"')), 'then the transaction');
      assert.equal(await conversations(), before + 1);
      const rows = await startRows(id);
      assert.deepEqual(rows.messages.map((m) => [m.role, m.seq]), [['assistant', 1]]);
      assert.deepEqual(rows.events.map((e) => e.kind), ['conversation.started', 'conversation.message']);
      // Both events to both webhooks, once each.
      assert.deepEqual(rows.deliveries.map((d) => `${d.event} ${d.webhook_id}`), [
        ...[first, late!].sort().map((w) => `conversation.message ${w}`),
        ...[first, late!].sort().map((w) => `conversation.started ${w}`),
      ]);
    } finally {
      for (const w of [first, late]) if (w) await api.request('DELETE', `/v1/webhooks/${w}`, { key: api.key });
    }
  });

  test('a start under an Idempotency-Key is written in a transaction, which also marks the key', async () => {
    let id = '';
    assert.deepEqual(await aloneWrites(async () => void (id = await startUnderKey('rt-start-key', START_BODY))), []);
    // Replayed, not started again.
    const again = await api.request('POST', '/v1/chat/conversations', { key: api.key, body: START_BODY, headers: { 'idempotency-key': 'rt-start-key' } });
    assert.equal((again.body as { data: { conversation: { id: string } } }).data.conversation.id, id);
    assert.equal((await eventsOf(id)).length, 2);
  });
});
