import assert from 'node:assert/strict';
import { sql, type Kysely, type RawBuilder } from 'kysely';
import type { DialectName } from '../../../src/db/database.js';
import type { DB } from '../../../src/db/schema.js';
import { rundownsRepository } from '../../../src/modules/rundowns/rundowns.repository.js';
import { SUBSCRIBABLE_EVENTS } from '../../../src/modules/webhooks/events.js';
import { newId } from '../../../src/lib/ids.js';
import type { TestApp } from '../../helpers/app.js';

/**
 * The tables of the database, read from the database itself (not from src/db/schema.ts), split by whether they have
 * an account_id column: a table a later migration adds is covered by the checks below without being named here.
 */
export async function tablesOf(db: Kysely<DB>, dialect: DialectName): Promise<{ withAccount: string[]; without: string[] }> {
  const rows =
    dialect === 'sqlite'
      ? (
          await sql<{ name: string; has: number }>`
            select m.name as name, exists (select 1 from pragma_table_info(m.name) p where p.name = 'account_id') as has
            from sqlite_master m where m.type = 'table' and m.name not like 'sqlite\\_%' escape '\\'`.execute(db)
        ).rows
      : (
          await sql<{ name: string; has: boolean }>`
            select t.table_name as name,
              exists (select 1 from information_schema.columns c
                where c.table_schema = t.table_schema and c.table_name = t.table_name and c.column_name = 'account_id') as has
            from information_schema.tables t where t.table_schema = current_schema() and t.table_type = 'BASE TABLE'`.execute(db)
        ).rows;
  return {
    withAccount: rows.filter((r) => Boolean(r.has)).map((r) => r.name).sort(),
    without: rows.filter((r) => !r.has).map((r) => r.name).sort(),
  };
}

/**
 * Tables without account_id, each known to hold nothing of an account by itself: the accounts (by id), delivery
 * attempts (reached through their delivery) and the migrator's own. A new one must be added here on purpose.
 */
export const TABLES_WITHOUT_ACCOUNT_ID = ['accounts', 'delivery_attempts', 'kysely_migration', 'kysely_migration_lock'];

/** Rows per table that carry this account_id, for every such table in the database; plus the account row and the attempts of `deliveryIds`. */
export async function rowsOf(db: Kysely<DB>, dialect: DialectName, accountId: string, deliveryIds: string[]): Promise<Record<string, number>> {
  const { withAccount, without } = await tablesOf(db, dialect);
  assert.deepEqual(without, TABLES_WITHOUT_ACCOUNT_ID, 'a table without account_id: say how an account deletion reaches its rows');
  const out: Record<string, number> = {};
  for (const table of withAccount) {
    const r = await sql<{ n: number | string }>`select count(*) as n from ${sql.table(table)} where account_id = ${accountId}`.execute(db);
    out[table] = Number(r.rows[0]!.n);
  }
  out.accounts = (await db.selectFrom('accounts').select('id').where('id', '=', accountId).execute()).length;
  out.delivery_attempts = deliveryIds.length ? (await db.selectFrom('delivery_attempts').select('delivery_id').where('delivery_id', 'in', deliveryIds).execute()).length : 0;
  return out;
}

/** Attempts whose delivery is gone: none may be left behind by any deletion. */
export async function orphanAttempts(db: Kysely<DB>): Promise<number> {
  const r = await db
    .selectFrom('delivery_attempts')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where(({ not, exists, selectFrom }) => not(exists(selectFrom('deliveries').select('deliveries.id').whereRef('deliveries.id', '=', 'delivery_attempts.delivery_id'))))
    .executeTakeFirstOrThrow();
  return Number(r.n);
}

/**
 * Fills an account through the API so that every table holding account rows has some: a document and an FAQ (with
 * their knowledge-version counter), a workflow, a webhook with a test send to `receiverUrl` (a delivery and its attempt),
 * a conversation whose message fires the workflow (messages, a workflow run, events, pending deliveries), a rundown, a
 * scheduler's claim on a window, and Idempotency-Keys. Answers the ids of the account's deliveries.
 */
export async function fillAccount(t: TestApp, a: { accountId: string; key: string }, receiverUrl: string, tag: string): Promise<{ deliveryIds: string[] }> {
  const key = a.key;
  const ok = (r: { status: number; text: string }, status: number) => assert.equal(r.status, status, r.text);
  ok(await t.request('POST', '/v1/documents', { key, body: { title: `Shipping ${tag}`, content: 'Orders ship the same day.' }, headers: { 'idempotency-key': `doc-${tag}` } }), 201);
  ok(await t.request('POST', '/v1/faqs', { key, body: { question: 'How do I track my order?', answer: 'Use the link in your email.', category: 'shipping' } }), 201);
  ok(await t.request('POST', '/v1/workflows', { key, body: { slug: 'demo', name: 'Demo', triggers: ['book a demo'], fields: [{ key: 'email', type: 'email' }] } }), 201);
  const wh = await t.request('POST', '/v1/webhooks', { key, body: { url: `${receiverUrl}/hooks/${tag}`, events: [...SUBSCRIBABLE_EVENTS], secret: `secret-${tag}` } });
  ok(wh, 201);
  ok(await t.request('POST', `/v1/webhooks/${wh.body.data.id}/test`, { key }), 200);
  const started = await t.request('POST', '/v1/chat/conversations', { key, body: { customerId: `cust-${tag}` }, headers: { 'idempotency-key': `start-${tag}` } });
  ok(started, 201);
  const conv = started.body.data.conversation.id as string;
  ok(await t.request('POST', `/v1/chat/conversations/${conv}/messages`, { key, body: { content: 'I want to book a demo, my email is jo@acme.test' } }), 200);
  const now = Date.now();
  ok(await t.request('POST', '/v1/rundowns', { key, body: { from: new Date(now - 3_600_000).toISOString(), to: new Date(now + 60_000).toISOString() } }), 201);
  // A worker's claim on a scheduled window, as it holds one while building that window's digest.
  const day = Math.floor(now / 86_400_000) * 86_400_000;
  assert.ok(await rundownsRepository.claimWindow(t.ctx.db, a.accountId, { from: day - 86_400_000, to: day }, `worker-${tag}`, now, now + 300_000));
  const deliveryIds = (await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', a.accountId).execute()).map((d) => d.id);
  return { deliveryIds };
}

/**
 * Two `pro` accounts filled by fillAccount, and the rows of each (rowsOf). The first is checked to have rows in every
 * table: a deletion check means something only if it does, so a table added later needs fillAccount to fill it.
 */
export async function twoFilledAccounts(t: TestApp, dialect: DialectName, receiverUrl: string) {
  const a = await t.account({ plan: 'pro' });
  const b = await t.account({ plan: 'pro' });
  const filledA = await fillAccount(t, a, receiverUrl, 'a');
  const filledB = await fillAccount(t, b, receiverUrl, 'b');
  const before = await rowsOf(t.ctx.db, dialect, a.accountId, filledA.deliveryIds);
  for (const [table, n] of Object.entries(before)) assert.ok(n > 0, `the filled account has rows in ${table}`);
  const otherBefore = await rowsOf(t.ctx.db, dialect, b.accountId, filledB.deliveryIds);
  return { a, b, filledA, filledB, before, otherBefore };
}

/** How many rows bulkFill writes: conversations (each with `messagesEach` messages), events, deliveries (each with `attemptsEach` attempts). */
export interface BulkShape {
  conversations: number;
  messagesEach: number;
  events: number;
  deliveries: number;
  attemptsEach: number;
}

/**
 * Gives an existing account many rows fast, written straight into the tables (the API would take minutes): a webhook,
 * conversations with their messages, events, and succeeded deliveries of those events with their attempts, each row
 * with a body of a few hundred bytes as real ones have. For the tests of a large account's deletion. Answers the rows
 * written per kind, named as the deletion reports them.
 */
export async function bulkFill(db: Kysely<DB>, accountId: string, shape: BulkShape, t0 = Date.UTC(2026, 0, 5)) {
  const filler = 'lorem ipsum dolor sit amet '.repeat(8);
  const inBatches = async <R>(rows: R[], insert: (slice: R[]) => Promise<unknown>) => {
    for (let i = 0; i < rows.length; i += 500) await insert(rows.slice(i, i + 500));
  };
  const webhookId = newId('wh', t0);
  await db.insertInto('webhooks').values({ id: webhookId, account_id: accountId, url: 'https://hooks.example.com/bulk', events: JSON.stringify(['conversation.started']), secret: 'bulk-secret', enabled: 1, disabled_reason: null, created_at: t0, updated_at: t0 }).execute();
  const conversations = Array.from({ length: shape.conversations }, (_, c) => ({
    id: newId('conv', t0 + c),
    account_id: accountId,
    customer_id: `cust_${c}`,
    customer_label: `Customer ${c}`,
    metadata: '{}',
    status: 'ended' as const,
    outcome: 'resolved' as const,
    tags: '[]',
    message_count: shape.messagesEach,
    created_at: t0 + c,
    last_message_at: t0 + c,
    ended_at: t0 + c,
  }));
  await inBatches(conversations, (slice) => db.insertInto('conversations').values(slice).execute());
  const messages = conversations.flatMap((c, ci) =>
    Array.from({ length: shape.messagesEach }, (_, i) => ({
      id: newId('msg', t0 + ci),
      account_id: accountId,
      conversation_id: c.id,
      role: i % 2 ? ('assistant' as const) : ('customer' as const),
      content: `${i % 2 ? 'Answer' : 'Question'} ${i}: ${filler}`,
      created_at: t0 + ci,
      seq: i + 1,
    })),
  );
  await inBatches(messages, (slice) => db.insertInto('messages').values(slice).execute());
  const events = Array.from({ length: shape.events }, (_, e) => ({
    id: newId('evt', t0 + e),
    account_id: accountId,
    kind: 'conversation.started',
    payload: JSON.stringify({ event: 'conversation.started', data: { conversationId: conversations[e % Math.max(1, conversations.length)]?.id ?? null, note: filler } }),
    created_at: t0 + e,
  }));
  await inBatches(events, (slice) => db.insertInto('events').values(slice).execute());
  const deliveries = Array.from({ length: shape.deliveries }, (_, d) => {
    const event = events[d % Math.max(1, events.length)];
    return {
      id: newId('dlv', t0 + d),
      account_id: accountId,
      webhook_id: webhookId,
      event_id: event?.id ?? null,
      event: 'conversation.started',
      url: 'https://hooks.example.com/bulk',
      secret: 'bulk-secret',
      body: event?.payload ?? '{}',
      status: 'succeeded' as const,
      attempt_count: shape.attemptsEach,
      auto_attempts: shape.attemptsEach,
      next_attempt_at: null,
      lease_owner: null,
      lease_expires_at: null,
      created_at: t0 + d,
      updated_at: t0 + d,
    };
  });
  await inBatches(deliveries, (slice) => db.insertInto('deliveries').values(slice).execute());
  const attempts = deliveries.flatMap((d) =>
    Array.from({ length: shape.attemptsEach }, (_, a) => ({
      delivery_id: d.id,
      attempt: a + 1,
      kind: 'auto' as const,
      at: d.created_at + a,
      status_code: a === shape.attemptsEach - 1 ? 200 : 500,
      duration_ms: 12,
      error: null,
      response_body: 'ok',
      worker: 'bulk',
    })),
  );
  await inBatches(attempts, (slice) => db.insertInto('delivery_attempts').values(slice).execute());
  return {
    conversations: conversations.length,
    messages: messages.length,
    events: events.length,
    webhooks: 1,
    deliveries: deliveries.length,
    deliveryAttempts: attempts.length,
  };
}

/**
 * Gives an existing account `n` rows in each of the tables that grow with its use, written by the database itself (a
 * recursive count, which both dialects have: 40,000 rows a table in a second or two): n messages in n/40 conversations,
 * n workflow runs (40 workflows, one run of each per conversation), n Idempotency-Keys, n quotes in n/100 rundowns
 * (their conversations scattered, so that the quotes' chunk order is not their key's), n events, n deliveries with one
 * attempt each; n/40 rundown claims, and a few of the rest (32 knowledge-version counters, 50 documents, 50 FAQs, 5 keys,
 * a webhook). Every table an account's deletion goes through, with its single-column and composite keys. Answers the
 * rows written per kind, named as the deletion reports them (bookkeeping tables left out).
 */
export async function fillEveryTable(db: Kysely<DB>, accountId: string, n: number) {
  const t0 = sql.lit(Date.UTC(2026, 0, 5));
  const account = sql.lit(accountId);
  const conversations = Math.ceil(n / 40);
  const rundowns = Math.ceil(n / 100);
  const claims = Math.ceil(n / 40);
  // Numbers as literals: better-sqlite3 binds a JS number as a REAL, and 'x' || (n + 1.0) is 'x2.0'.
  const upTo = (count: number, insert: RawBuilder<unknown>) => sql`with recursive g(n) as (select 1 union all select n + 1 from g where n < ${sql.lit(count)}) ${insert}`.execute(db);
  // Of a fixed width, so that their order is their number's.
  const id = (prefix: string, k: RawBuilder<unknown> = sql`n`) => sql`${sql.lit(`${prefix}_${accountId}_`)} || (10000000 + ${k})`;
  const filler = sql.lit('lorem ipsum dolor sit amet '.repeat(8));
  await db.insertInto('webhooks').values({ id: `wh_${accountId}`, account_id: accountId, url: 'https://hooks.example.com/x', events: '["conversation.started"]', secret: 'fill-secret', enabled: 1, disabled_reason: null, created_at: 0, updated_at: 0 }).execute();
  await upTo(conversations, sql`insert into conversations (id, account_id, customer_id, customer_label, metadata, status, outcome, tags, message_count, created_at, last_message_at, ended_at)
    select ${id('conv')}, ${account}, 'cust_' || n, 'Customer', '{}', 'ended', 'resolved', '[]', 40, ${t0} + n, ${t0} + n, ${t0} + n from g`);
  await upTo(n, sql`insert into messages (id, account_id, conversation_id, role, content, created_at, seq)
    select ${id('msg')}, ${account}, ${id('conv', sql`1 + (n - 1) / 40`)}, 'customer', 'Question ' || n || ': ' || ${filler}, ${t0} + n, 1 + (n - 1) % 40 from g`);
  await upTo(n, sql`insert into events (id, account_id, kind, payload, created_at)
    select ${id('evt')}, ${account}, 'conversation.started', '{"event":"conversation.started","note":"' || ${filler} || '"}', ${t0} + n from g`);
  await upTo(40, sql`insert into workflows (id, account_id, slug, name, triggers, fields, created_at, updated_at)
    select ${id('wf')}, ${account}, 'flow-' || n, 'Flow', '[]', '[]', ${t0} + n, ${t0} + n from g`);
  await upTo(n, sql`insert into workflow_runs (workflow_id, conversation_id, account_id, extracted, created_at)
    select ${id('wf', sql`1 + (n - 1) % 40`)}, ${id('conv', sql`1 + (n - 1) / 40`)}, ${account}, '{"email":"jo@acme.test"}', ${t0} + n from g`);
  await upTo(n, sql`insert into idempotency_keys (account_id, key, fingerprint, method, path, status_code, response, created_at, locked_at, committed_at)
    select ${account}, 'key-' || (10000000 + n), 'fp' || n, 'POST', '/v1/documents', 201, '{"data":{"note":"' || ${filler} || '"}}', ${t0} + n, ${t0} + n, ${t0} + n from g`);
  await upTo(rundowns, sql`insert into rundowns (id, account_id, trigger, from_ts, to_ts, figures, body, created_at)
    select ${id('rd')}, ${account}, 'manual', ${t0} + n, ${t0} + n + 1, '{}', '{}', ${t0} + n from g`);
  await upTo(n, sql`insert into rundown_quotes (account_id, rundown_id, position, message_id, conversation_id)
    select ${account}, ${id('rd', sql`1 + (n - 1) / 100`)}, 1 + (n - 1) % 100, ${id('msg')}, ${id('conv', sql`1 + ((n * 97) % ${sql.lit(n)}) / 40`)} from g`);
  await upTo(claims, sql`insert into rundown_claims (account_id, from_ts, to_ts, holder, expires_at)
    select ${account}, ${t0} + n * 1000, ${t0} + n * 1000 + 1000, 'fill', ${t0} from g`);
  await upTo(32, sql`insert into knowledge_versions (account_id, shard, n) select ${account}, n - 1, n from g`);
  await upTo(n, sql`insert into deliveries (id, account_id, webhook_id, event_id, event, url, secret, body, status, attempt_count, auto_attempts, created_at, updated_at)
    select ${id('dlv')}, ${account}, ${sql.lit(`wh_${accountId}`)}, ${id('evt')}, 'conversation.started', 'https://hooks.example.com/x', 'fill-secret', '{}', 'succeeded', 1, 1, ${t0} + n, ${t0} + n from g`);
  await upTo(n, sql`insert into delivery_attempts (delivery_id, attempt, kind, at, status_code, duration_ms, error, response_body, worker)
    select ${id('dlv')}, 1, 'auto', ${t0} + n, 200, 12, null, 'ok', 'fill' from g`);
  await upTo(50, sql`insert into documents (id, account_id, title, content, status, created_at, updated_at) select ${id('doc')}, ${account}, 'Doc ' || n, 'Text', 'published', ${t0} + n, ${t0} + n from g`);
  await upTo(50, sql`insert into faqs (id, account_id, question, answer, category, status, created_at, updated_at) select ${id('faq')}, ${account}, 'Q' || n, 'A', 'general', 'published', ${t0} + n, ${t0} + n from g`);
  await upTo(5, sql`insert into api_keys (id, account_id, type, scopes, hash, hint, created_at) select ${id('key')}, ${account}, 'server', '[]', ${sql.lit(`hash_${accountId}_`)} || n, 'sk_x', ${t0} + n from g`);
  return {
    conversations,
    messages: n,
    events: n,
    workflows: 40,
    workflowRuns: n,
    idempotencyKeys: n,
    rundowns,
    webhooks: 1,
    deliveries: n,
    deliveryAttempts: n,
    documents: 50,
    faqs: 50,
    keys: 5,
  };
}
