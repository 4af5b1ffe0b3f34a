// What one run of the rundown scheduler costs when nothing is missing (the common case, once a minute per worker): the
// statement that looks for missing scheduled rundowns (rundowns.repository.ts missingScheduled), over N accounts that
// each have every scheduled rundown of the windows it looks at and a history before them, on both dialects.
// Usage: node --import tsx bench/rundowns/scheduler-check.ts [--accounts 300,3000] [--backfill 7] [--history 30]
// (PostgreSQL at TEST_DATABASE_URL or 127.0.0.1:5432/test, in a schema of its own, dropped at the end).
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { rundownsRepository } from '../../src/modules/rundowns/rundowns.repository.js';
import { windowsToSchedule } from '../../src/modules/rundowns/rundowns.service.js';
import { createTestDatabase } from '../../test/helpers/db.js';

const { values } = parseArgs({
  options: { accounts: { type: 'string', default: '300,3000' }, backfill: { type: 'string', default: '7' }, history: { type: 'string', default: '30' } },
});
const sizes = values.accounts.split(',').map(Number);
const backfill = Number(values.backfill);
const history = Math.max(Number(values.history), backfill + 1);
const DAY = 86_400_000;
const now = Date.UTC(2026, 10, 25, 0, 30);
const windows = windowsToSchedule(now, DAY, backfill);
const lastTo = windows[windows.length - 1]!.to;

for (const dialect of ['sqlite', 'postgres'] as const) {
  for (const n of sizes) {
    const d = await createTestDatabase(dialect);
    try {
      const accounts = Array.from({ length: n }, (_, i) => ({
        id: `acct_${String(i).padStart(6, '0')}`, name: `a${i}`, plan: 'pro' as const, rate_limit_minute: null, rate_limit_day: null,
        assistant_settings: null, created_at: 0, deletion_started_at: null,
      }));
      for (let i = 0; i < accounts.length; i += 1_000) await d.db.insertInto('accounts').values(accounts.slice(i, i + 1_000)).execute();
      let batch = [];
      for (const a of accounts) {
        for (let k = history; k >= 1; k--) {
          const from = lastTo - k * DAY;
          batch.push({ id: `rd_${a.id}_${k}`, account_id: a.id, trigger: 'schedule' as const, from_ts: from, to_ts: from + DAY, figures: '{}', body: '{}', created_at: from + DAY });
          if (batch.length === 2_000) {
            await d.db.insertInto('rundowns').values(batch).execute();
            batch = [];
          }
        }
      }
      if (batch.length) await d.db.insertInto('rundowns').values(batch).execute();
      await sql`analyze`.execute(d.db);
      const times: number[] = [];
      for (let k = 0; k < 15; k++) {
        const t0 = performance.now();
        const missing = await rundownsRepository.missingScheduled(d.db, windows);
        times.push(performance.now() - t0);
        if (missing.length !== 0) throw new Error(`expected nothing missing, found ${missing.length}`);
      }
      times.sort((a, b) => a - b);
      console.log(`${dialect}, ${n} accounts x ${windows.length} windows (${history} days of history each): median ${times[7]!.toFixed(1)} ms (min ${times[0]!.toFixed(1)}, max ${times[14]!.toFixed(1)})`);
    } finally {
      await d.cleanup();
    }
  }
}
