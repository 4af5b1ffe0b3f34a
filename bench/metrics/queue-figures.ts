// What the metrics endpoint's read of the webhook queue costs on a large deliveries table, on both dialects, with
// the plan each database chose. Usage: node --import tsx bench/metrics/queue-figures.ts [--rows 200000]
// (PostgreSQL at TEST_DATABASE_URL or 127.0.0.1:5432/test, in a schema of its own, dropped at the end).
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import type { DeliveriesTable } from '../../src/db/schema.js';
import { deliveriesRepository, queueFiguresQuery } from '../../src/modules/webhooks/webhooks.repository.js';
import { createTestDatabase } from '../../test/helpers/db.js';

const { values } = parseArgs({ options: { rows: { type: 'string', default: '200000' } } });
const rows = Number(values.rows);

for (const dialect of ['sqlite', 'postgres'] as const) {
  const d = await createTestDatabase(dialect);
  try {
    const now = Date.now();
    const row = (i: number, status: DeliveriesTable['status'], next: number | null, lease: string | null): DeliveriesTable => ({
      id: `dlv_${String(i).padStart(9, '0')}`,
      account_id: 'acct',
      webhook_id: `wh_${i % 50}`,
      event_id: null,
      event: 'conversation.started',
      url: 'http://127.0.0.1/',
      secret: 's',
      body: '{}',
      status,
      attempt_count: 0,
      auto_attempts: 0,
      next_attempt_at: next,
      lease_owner: lease,
      lease_expires_at: lease ? now + 60_000 : null,
      created_at: now,
      updated_at: now,
    });
    // 80% delivered; 10% due (up to 1000 s late); 9% retries an hour away; 1% being attempted.
    let batch: DeliveriesTable[] = [];
    for (let i = 0; i < rows; i++) {
      const r = i % 10;
      batch.push(
        r < 8
          ? row(i, 'succeeded', null, null)
          : r === 8
            ? row(i, 'pending', now - (i % 1000) * 1000, null)
            : i % 100 === 9
              ? row(i, 'pending', now, 'worker')
              : row(i, 'pending', now + 3_600_000, null),
      );
      if (batch.length === 2_000) {
        await d.db.insertInto('deliveries').values(batch).execute();
        batch = [];
      }
    }
    if (batch.length) await d.db.insertInto('deliveries').values(batch).execute();
    await sql`analyze`.execute(d.db);
    const plan =
      dialect === 'sqlite'
        ? (await sql<{ detail: string }>`explain query plan ${queueFiguresQuery(now)}`.execute(d.db)).rows.map((x) => x.detail)
        : (await sql<{ 'QUERY PLAN': string }>`explain ${queueFiguresQuery(now)}`.execute(d.db)).rows.map((x) => x['QUERY PLAN']);
    console.log(`${dialect}, ${rows} deliveries:\n  ${plan.join('\n  ')}`);
    const times: number[] = [];
    let figures;
    for (let k = 0; k < 7; k++) {
      const t0 = performance.now();
      figures = await deliveriesRepository.queueFigures(d.db, now);
      times.push(performance.now() - t0);
    }
    times.sort((a, b) => a - b);
    console.log(`  ${JSON.stringify(figures)}\n  median ${times[3]!.toFixed(1)} ms (min ${times[0]!.toFixed(1)}, max ${times[6]!.toFixed(1)})`);
  } finally {
    await d.cleanup();
  }
}
