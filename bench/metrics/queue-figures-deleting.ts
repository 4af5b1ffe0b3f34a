// What the metrics' read of the webhook queue costs with accounts being deleted, on both dialects: the statement alone
// (what every scrape ran before 2026-11-25, counting their deliveries) against deliveriesRepository.queueFigures (a look
// for accounts being deleted, then that statement, or the one leaving their waiting deliveries out).
// Usage: node --import tsx bench/metrics/queue-figures-deleting.ts [--finished 200000] [--pending 5000] [--accounts 100]
//   [--account-index] (deliveries_due rebuilt on (next_attempt_at, account_id), the variant measured and not adopted) [--explain] (the plans, with the
//   large account being deleted)
// PostgreSQL at TEST_DATABASE_URL or 127.0.0.1:5432/test, in a schema of its own, dropped at the end; SQLite in memory,
// without ANALYZE (Parley never runs it); PostgreSQL ANALYZEd (autovacuum would have).
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import type { DeliveriesTable } from '../../src/db/schema.js';
import { deliveriesRepository, queueFiguresQuery } from '../../src/modules/webhooks/webhooks.repository.js';
import { createTestDatabase } from '../../test/helpers/db.js';

const { values } = parseArgs({
  options: {
    finished: { type: 'string', default: '200000' },
    pending: { type: 'string', default: '5000' },
    accounts: { type: 'string', default: '100' },
    'account-index': { type: 'boolean', default: false },
    rounds: { type: 'string', default: '15' },
    explain: { type: 'boolean', default: false },
  },
});
const finished = Number(values.finished);
const pending = Number(values.pending);
const accountCount = Number(values.accounts);
const rounds = Number(values.rounds);

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

for (const dialect of ['sqlite', 'postgres'] as const) {
  const d = await createTestDatabase(dialect);
  try {
    const db = d.db;
    if (values['account-index']) {
      await sql`drop index deliveries_due`.execute(db);
      await sql`create index deliveries_due on deliveries (next_attempt_at, account_id) where status = 'pending' and lease_owner is null`.execute(db);
    }
    const now = Date.now();
    // acct_0: a large account whose endpoint is gone (half the history, 60% of the pending deliveries, its due ones
    // the oldest); acct_1: a small one; the rest share what is left.
    const ids = Array.from({ length: accountCount }, (_, i) => `acct_${i}`);
    for (let i = 0; i < ids.length; i += 1_000) {
      await db
        .insertInto('accounts')
        .values(ids.slice(i, i + 1_000).map((id) => ({ id, name: 'a', plan: 'pro' as const, rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 0, deletion_started_at: null })))
        .execute();
    }
    const other = (i: number) => `acct_${1 + (i % (accountCount - 1))}`;
    let n = 0;
    const row = (account: string, status: DeliveriesTable['status'], next: number | null, lease: string | null): DeliveriesTable => ({
      id: `dlv_${String(n++).padStart(9, '0')}`, account_id: account, webhook_id: `wh_${n % 50}`, event_id: null, event: 'conversation.started',
      url: 'http://127.0.0.1/', secret: 's', body: '{}', status, attempt_count: 0, auto_attempts: 0, next_attempt_at: next, lease_owner: lease,
      lease_expires_at: lease ? now + 60_000 : null, created_at: now, updated_at: now,
    });
    let batch: DeliveriesTable[] = [];
    const push = async (r: DeliveriesTable) => {
      batch.push(r);
      if (batch.length === 2_000) {
        await db.insertInto('deliveries').values(batch).execute();
        batch = [];
      }
    };
    for (let i = 0; i < finished; i++) await push(row(i % 2 === 0 ? 'acct_0' : other(i), 'succeeded', null, null));
    // Pending: half due (acct_0's from 1-2 hours ago, the others' within the last 1000 s), 45% an hour away, 5% held.
    for (let i = 0; i < pending; i++) {
      const account = i % 5 < 3 ? 'acct_0' : other(i);
      const r = i % 20;
      const due = account === 'acct_0' ? now - 3_600_000 - (i % 3600) * 1000 : now - (i % 1000) * 1000;
      await push(r < 10 ? row(account, 'pending', due, null) : r === 10 ? row(account, 'pending', now, 'worker') : row(account, 'pending', now + 3_600_000, null));
    }
    if (batch.length) await db.insertInto('deliveries').values(batch).execute();
    if (dialect === 'postgres') await sql`analyze`.execute(db);

    console.log(`${dialect}: ${finished} finished + ${pending} pending deliveries, ${accountCount} accounts${values['account-index'] ? ', deliveries_due with account_id' : ''}`);
    for (const deleting of [null, 'acct_1', 'acct_0']) {
      await db.updateTable('accounts').set({ deletion_started_at: null }).where('deletion_started_at', 'is not', null).execute();
      if (deleting) await db.updateTable('accounts').set({ deletion_started_at: now }).where('id', '=', deleting).execute();
      const before: number[] = [];
      const after: number[] = [];
      let old;
      let figures;
      // Interleaved, so a load change on the machine falls on both.
      for (let k = 0; k < rounds; k++) {
        let t0 = performance.now();
        old = (await queueFiguresQuery(now).execute(db)).rows[0];
        before.push(performance.now() - t0);
        t0 = performance.now();
        figures = await deliveriesRepository.queueFigures(db, now);
        after.push(performance.now() - t0);
      }
      const what = deleting === null ? 'no account being deleted' : deleting === 'acct_0' ? 'the large account being deleted' : 'a small account being deleted';
      console.log(`  ${what}: statement alone ${median(before).toFixed(2)} ms, queueFigures ${median(after).toFixed(2)} ms (medians of ${rounds})`);
      console.log(`    before ${JSON.stringify(old)}\n    after  ${JSON.stringify(figures)}`);
      if (values.explain && deleting === 'acct_0') {
        const q = queueFiguresQuery(now, true);
        const plan =
          dialect === 'sqlite'
            ? (await sql<{ detail: string }>`explain query plan ${q}`.execute(db)).rows.map((x) => x.detail)
            : (await sql<{ 'QUERY PLAN': string }>`explain analyze ${q}`.execute(db)).rows.map((x) => x['QUERY PLAN']);
        console.log(`    ${plan.join('\n    ')}`);
      }
    }
  } finally {
    await d.cleanup();
  }
}
