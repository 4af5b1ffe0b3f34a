// The metrics' queue figures with and without leaving out the deliveries of accounts being deleted, on a large
// deliveries table, both dialects. Usage: node --import tsx bench/metrics/queue-figures-deleting.ts [--rows 200000]
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import type { DeliveriesTable } from '../../src/db/schema.js';
import { queueFiguresQuery } from '../../src/modules/webhooks/webhooks.repository.js';
import { createTestDatabase } from '../../test/helpers/db.js';

const { values } = parseArgs({ options: { rows: { type: 'string', default: '200000' } } });
const rows = Number(values.rows);
const live = sql`not exists (select 1 from accounts a where a.id = deliveries.account_id and a.deletion_started_at is not null)`;
const excluding = (now: number) => sql<Record<string, unknown>>`
  select
    (select count(*) from deliveries where status = 'pending' and lease_owner is null and ${live}) as waiting,
    (select count(*) from deliveries where status = 'pending' and lease_owner is null and next_attempt_at <= ${now} and ${live}) as due,
    (select next_attempt_at from deliveries where status = 'pending' and lease_owner is null and next_attempt_at is not null and ${live}
      order by next_attempt_at limit 1) as oldest,
    (select count(*) from deliveries where lease_owner is not null and status = 'pending') as leased,
    (select count(*) from webhooks where enabled = 0) as disabled`;

for (const dialect of ['sqlite', 'postgres'] as const) {
  const d = await createTestDatabase(dialect);
  try {
    const now = Date.now();
    const accounts = Array.from({ length: 100 }, (_, i) => ({ id: `acct_${i}`, name: 'a', plan: 'pro' as const, rate_limit_minute: null, rate_limit_day: null, assistant_settings: null, created_at: 0, deletion_started_at: null }));
    await d.db.insertInto('accounts').values(accounts).execute();
    const row = (i: number, status: DeliveriesTable['status'], next: number | null, lease: string | null): DeliveriesTable => ({
      id: `dlv_${String(i).padStart(9, '0')}`, account_id: `acct_${i % 100}`, webhook_id: `wh_${i % 50}`, event_id: null, event: 'conversation.started',
      url: 'http://127.0.0.1/', secret: 's', body: '{}', status, attempt_count: 0, auto_attempts: 0, next_attempt_at: next, lease_owner: lease,
      lease_expires_at: lease ? now + 60_000 : null, created_at: now, updated_at: now,
    });
    let batch: DeliveriesTable[] = [];
    for (let i = 0; i < rows; i++) {
      const r = i % 10;
      batch.push(r < 8 ? row(i, 'succeeded', null, null) : r === 8 ? row(i, 'pending', now - (i % 1000) * 1000, null) : i % 100 === 9 ? row(i, 'pending', now, 'worker') : row(i, 'pending', now + 3_600_000, null));
      if (batch.length === 2_000) {
        await d.db.insertInto('deliveries').values(batch).execute();
        batch = [];
      }
    }
    if (batch.length) await d.db.insertInto('deliveries').values(batch).execute();
    await sql`analyze`.execute(d.db);
    for (const [name, q] of [['as now', queueFiguresQuery], ['leaving out accounts being deleted', excluding]] as const) {
      const times: number[] = [];
      let r;
      for (let k = 0; k < 9; k++) {
        const t0 = performance.now();
        r = (await q(now).execute(d.db)).rows[0];
        times.push(performance.now() - t0);
      }
      times.sort((a, b) => a - b);
      console.log(`${dialect}, ${rows} deliveries, ${name}: median ${times[4]!.toFixed(1)} ms ${JSON.stringify(r)}`);
    }
  } finally {
    await d.cleanup();
  }
}
