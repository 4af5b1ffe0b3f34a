// What DELETE /v1/conversations/:id costs in a busy account, on both dialects: the erasure reads the account's events
// since the conversation started (events_account_created_id, then each payload is checked), and finds their deliveries
// through deliveries_event_webhook. Usage: node --import tsx bench/conversations/erase.ts [--conversations 5000]
// (each conversation: 10 events, each delivered to 2 webhooks; PostgreSQL at TEST_DATABASE_URL or
// 127.0.0.1:5432/test, in a schema of its own, dropped at the end).
import { parseArgs } from 'node:util';
import { performance } from 'node:perf_hooks';
import { sql } from 'kysely';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import type { DeliveriesTable, EventsTable } from '../../src/db/schema.js';
import { systemClock } from '../../src/lib/clock.js';
import { newId } from '../../src/lib/ids.js';
import { createTestDatabase } from '../../test/helpers/db.js';

const { values } = parseArgs({ options: { conversations: { type: 'string', default: '5000' } } });
const conversations = Number(values.conversations);
const EVENTS = 10;
const WEBHOOKS = 2;

for (const dialect of ['sqlite', 'postgres'] as const) {
  const d = await createTestDatabase(dialect);
  const ctx = createContext(loadConfig({}), d, systemClock);
  try {
    const accountId = (await ctx.services.accounts.createAccount({ name: 'bench', plan: 'pro' })).id;
    const start = Date.now() - 30 * 86_400_000;
    const ids: string[] = [];
    let events: EventsTable[] = [];
    let deliveries: DeliveriesTable[] = [];
    const flush = async () => {
      if (events.length) await d.db.insertInto('events').values(events).execute();
      if (deliveries.length) await d.db.insertInto('deliveries').values(deliveries).execute();
      events = [];
      deliveries = [];
    };
    // Conversations one minute apart, oldest first; each one's events during its minute.
    for (let c = 0; c < conversations; c++) {
      const at = start + c * 60_000;
      const id = newId('conv', at);
      ids.push(id);
      await d.db
        .insertInto('conversations')
        .values({
          id, account_id: accountId, customer_id: `cus_${c}`, customer_label: 'Visitor', customer_email: null, persona: null, metadata: '{}', status: 'ended',
          outcome: 'resolved', escalation_reason: null, tags: '[]', topic: null, message_count: EVENTS, answered_count: 1, unanswered_streak: 0, created_at: at,
          last_message_at: at + 50_000, escalated_at: null, ended_at: at + 50_000,
        })
        .execute();
      for (let e = 0; e < EVENTS; e++) {
        const t = at + e * 5_000;
        const eventId = newId('evt', t);
        const payload = JSON.stringify({ event: 'conversation.message', timestamp: new Date(t).toISOString(), data: { conversationId: id, role: 'customer', content: 'where is my parcel? '.repeat(5) } });
        events.push({ id: eventId, account_id: accountId, kind: 'conversation.message', payload, created_at: t });
        for (let w = 0; w < WEBHOOKS; w++) {
          deliveries.push({
            id: newId('dlv', t), account_id: accountId, webhook_id: `wh_${w}`, event_id: eventId, event: 'conversation.message', url: 'http://127.0.0.1/', secret: 's', body: payload,
            status: 'succeeded', attempt_count: 1, auto_attempts: 1, next_attempt_at: null, lease_owner: null, lease_expires_at: null, created_at: t, updated_at: t,
          });
        }
      }
      if (events.length >= 1_000) await flush();
    }
    await flush();
    await sql`analyze`.execute(d.db);
    // The oldest conversations read every later event of the account; the newest, a minute's worth.
    for (const [label, picks] of [
      ['oldest', ids.slice(0, 5)],
      ['newest', ids.slice(-5)],
    ] as const) {
      const times: number[] = [];
      for (const id of picks) {
        const t0 = performance.now();
        await ctx.services.conversations.erase(accountId, id);
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      console.log(`${dialect}, ${conversations} conversations (${conversations * EVENTS} events, ${conversations * EVENTS * WEBHOOKS} deliveries), erasing the ${label}: median ${times[2]!.toFixed(1)} ms (min ${times[0]!.toFixed(1)}, max ${times[4]!.toFixed(1)})`);
    }
  } finally {
    await d.cleanup();
  }
}
