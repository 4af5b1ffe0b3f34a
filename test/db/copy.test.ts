import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { copyDatabase } from '../../src/db/copy.js';
import { newId } from '../../src/lib/ids.js';
import { createTestDatabase, DIALECTS } from '../helpers/db.js';

// The CLI's copy is tested end to end in test/cli/copy.test.ts; this is what it tells while a large table goes over.
for (const dialect of DIALECTS) {
  describe(`copyDatabase progress (${dialect} → ${dialect === 'sqlite' ? 'postgres' : 'sqlite'})`, () => {
    test('a table larger than the interval reports how far it is, in order, then once as done', async () => {
      const source = await createTestDatabase(dialect);
      const target = await createTestDatabase(dialect === 'sqlite' ? 'postgres' : 'sqlite');
      try {
        const at = Date.UTC(2026, 10, 1);
        const accountId = newId('acct', at);
        await source.db.insertInto('accounts').values({ id: accountId, name: 'A', plan: 'pro', rate_limit_minute: null, rate_limit_day: null, created_at: at } as never).execute();
        const rows = Array.from({ length: 2_500 }, (_, i) => ({ id: newId('evt', at + i), account_id: accountId, kind: 'conversation.started', payload: '{}', created_at: at + i }));
        for (let i = 0; i < rows.length; i += 500) await source.db.insertInto('events').values(rows.slice(i, i + 500)).execute();
        const told: string[] = [];
        const result = await copyDatabase(source, target, {
          every: 1_000,
          onRows: (table, copied, of) => told.push(`${table} ${copied}/${of}`),
          onTable: (table, n) => {
            if (n > 0) told.push(`${table} done ${n}`);
          },
        });
        assert.deepEqual(told, ['accounts done 1', 'events 1000/2500', 'events 2000/2500', 'events done 2500']);
        assert.equal(result.tables.events, 2_500);
        assert.deepEqual(result.sourceChangedDuringCopy, []);
      } finally {
        await source.cleanup();
        await target.cleanup();
      }
    });
  });
}
