/*
 * Builds the conversations benchmark data set: 100 accounts, 100,000 conversations, 1,000,000 messages.
 *
 *   DATABASE_URL=sqlite:./data/bench-conv.db npx tsx bench/conversations/seed.ts
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench npx tsx bench/conversations/seed.ts
 *
 * Account 0 ("big") holds 10% of the conversations; the 99 others share the rest (~909 each). Rows are
 * written in creation order with accounts interleaved, as a live service writes them, so an account's rows
 * are scattered over the whole table rather than clustered. Deterministic (fixed PRNG seed). Refuses a
 * database that already has conversations: point it at an empty one.
 */
import { loadConfig } from '../../src/config.js';
import { migrateToLatest, openDatabase } from '../../src/db/database.js';
import type { ConversationsTable, MessagesTable } from '../../src/db/schema.js';
import { sql, type Insertable } from 'kysely';

export const ACCOUNTS = 100;
export const CONVERSATIONS = 100_000;
export const MESSAGES = 1_000_000;
export const BIG_SHARE = 0.1;
/** The data set spans the 90 days before this instant. */
export const END = Date.UTC(2026, 2, 1);
export const SPAN = 90 * 86_400_000;
export const accountId = (i: number) => `acct_bench${String(i).padStart(3, '0')}`;

const TOPICS = ['billing', 'shipping', 'returns', 'account', 'login', 'pricing', 'refunds', 'delivery-time', 'api', 'integrations',
  'cancellation', 'invoices', 'warranty', 'sizes', 'discounts', 'gift-cards', 'privacy', 'export', 'mobile-app', 'other'];

// mulberry32: small, fast, deterministic.
function prng(seed: number) {
  return () => {
    seed |= 0;
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const pad = (n: number, w: number) => String(n).padStart(w, '0');

async function main() {
  const config = loadConfig();
  const database = openDatabase(config.databaseUrl);
  const { db } = database;
  const t0 = Date.now();
  await migrateToLatest(db);
  const existing = await db.selectFrom('conversations').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  if (Number(existing.n) > 0) throw new Error(`${config.databaseUrl} already has conversations; seed an empty database`);

  await db
    .insertInto('accounts')
    .values(Array.from({ length: ACCOUNTS }, (_, i) => ({
      id: accountId(i), name: i === 0 ? 'bench big' : `bench ${i}`, plan: 'enterprise' as const,
      rate_limit_minute: 100_000_000, rate_limit_day: 1_000_000_000, assistant_settings: null, created_at: END - SPAN,
    })))
    .execute();

  const rnd = prng(42);
  // Creation times, sorted, so rows go in in the order a live service would write them.
  const times = Array.from({ length: CONVERSATIONS }, () => END - SPAN + Math.floor(rnd() * SPAN)).sort((a, b) => a - b);
  // message counts 2..18 (mean 10), the last one adjusted so the total is exactly MESSAGES.
  const counts = Array.from({ length: CONVERSATIONS }, () => 2 + Math.floor(rnd() * 17));
  let sum = counts.reduce((s, c) => s + c, 0);
  for (let i = 0; sum !== MESSAGES; i = (i + 1) % CONVERSATIONS) {
    if (sum > MESSAGES && counts[i]! > 2) {
      counts[i]!--;
      sum--;
    } else if (sum < MESSAGES && counts[i]! < 18) {
      counts[i]!++;
      sum++;
    }
  }

  const CONV_BATCH = 1_000;
  const MSG_BATCH = 4_000;
  let convs: Insertable<ConversationsTable>[] = [];
  let msgs: Insertable<MessagesTable>[] = [];
  const flushConvs = async () => {
    if (convs.length) await db.insertInto('conversations').values(convs).execute();
    convs = [];
  };
  const flushMsgs = async () => {
    if (msgs.length) await db.insertInto('messages').values(msgs).execute();
    msgs = [];
  };

  const load = async () => {
    for (let i = 0; i < CONVERSATIONS; i++) {
      const created = times[i]!;
      const acct = rnd() < BIG_SHARE ? 0 : 1 + Math.floor(rnd() * (ACCOUNTS - 1));
      const id = `conv_b${pad(created, 14)}${pad(i, 6)}`;
      const n = counts[i]!;
      const last = created + (n - 1) * 20_000;
      const r = rnd();
      // 10% still active, 8% escalated and still open, 7% escalated then ended, 75% ended (70% of them resolved).
      const kind = r < 0.1 ? 'active' : r < 0.18 ? 'escalated-open' : r < 0.25 ? 'escalated-ended' : 'ended';
      const ended = kind === 'ended' || kind === 'escalated-ended';
      const topicPick = rnd();
      const topic = ended && topicPick > 0.2 ? TOPICS[Math.floor(TOPICS.length * Math.pow(rnd(), 2))]! : null;
      convs.push({
        id,
        account_id: accountId(acct),
        customer_id: `cust_${pad(Math.floor(rnd() * 5_000), 5)}`,
        customer_label: 'Visitor',
        customer_email: rnd() < 0.3 ? 'someone@example.com' : null,
        persona: null,
        metadata: '{}',
        status: kind === 'active' ? 'active' : kind === 'ended' ? 'ended' : 'escalated',
        outcome: kind === 'ended' ? (rnd() < 0.7 ? 'resolved' : 'unresolved') : kind === 'escalated-ended' ? 'escalated' : null,
        escalation_reason: kind.startsWith('escalated') ? 'customer_request' : null,
        tags: rnd() < 0.2 ? '["vip"]' : '[]',
        topic,
        message_count: n,
        created_at: created,
        last_message_at: last,
        escalated_at: kind.startsWith('escalated') ? created + 60_000 : null,
        ended_at: ended ? last + 60_000 : null,
      });
      for (let m = 0; m < n; m++) {
        const role = m % 2 === 0 ? 'assistant' : 'customer';
        msgs.push({
          id: `msg_b${pad(created, 14)}${pad(i, 6)}${pad(m, 2)}`,
          account_id: accountId(acct),
          conversation_id: id,
          role,
          content: role === 'assistant' ? 'Thanks for asking. Our standard delivery takes three to five working days within the EU.' : 'How long does delivery take to Germany?',
          sources: role === 'assistant' && m > 0 ? '["doc_bench1","faq_bench2"]' : null,
          created_at: created + m * 20_000,
          seq: m + 1,
        });
      }
      if (convs.length >= CONV_BATCH) {
        await flushConvs();
        // messages reference conversations, so they go after their batch of conversations
        await flushMsgs();
      } else if (msgs.length >= MSG_BATCH) {
        await flushConvs();
        await flushMsgs();
      }
      if (i % 10_000 === 0) process.stderr.write(`  ${i} conversations…\n`);
    }
    await flushConvs();
    await flushMsgs();
  };

  if (database.dialect === 'sqlite') {
    // One transaction: SQLite commits are the cost, not the rows.
    await sql`begin`.execute(db);
    await load();
    await sql`commit`.execute(db);
    await sql`analyze`.execute(db);
  } else {
    await load();
    await sql`vacuum analyze conversations`.execute(db);
    await sql`vacuum analyze messages`.execute(db);
  }
  const c = await db.selectFrom('conversations').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  const m = await db.selectFrom('messages').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
  process.stdout.write(`${JSON.stringify({ database: database.dialect, conversations: Number(c.n), messages: Number(m.n), seconds: (Date.now() - t0) / 1000 })}\n`);
  await database.close();
}

if (import.meta.url === `file://${process.argv[1]}`) {
  main().catch((err: unknown) => {
    process.stderr.write(`${(err as Error).stack ?? String(err)}\n`);
    process.exit(1);
  });
}
