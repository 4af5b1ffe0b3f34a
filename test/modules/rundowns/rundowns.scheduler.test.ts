import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { createContext, type AppContext } from '../../../src/context.js';
import { openDatabase, type Database } from '../../../src/db/database.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { converse, DAY, HOUR, iso, loadKnowledge, MIN, T0 } from './helpers.js';

for (const dialect of DIALECTS) {
  describe(`scheduled rundowns (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: T0 + 3 * HOUR });
    // PostgreSQL: a second process's worth of context (its own pool) racing for the same windows.
    let other: { ctx: AppContext; database: Database } | null = null;

    before(async () => {
      await loadKnowledge(t, t.key);
      await converse(t, t.key, T0 + 4 * HOUR, ['Do you sell coffee beans?'], { end: true });
      await converse(t, t.key, T0 + 5 * HOUR, ['do you sell coffee beans'], { end: true });
      if (dialect === 'postgres') {
        const database = openDatabase(t.database.url);
        other = { database, ctx: createContext(t.config, database, t.clock) };
        t.beforeClose(() => database.close());
        // Open a few connections in both pools first, so the racing runs below really overlap instead of
        // the first one finishing while the others are still connecting.
        for (const db of [t.ctx.db, database.db]) await Promise.all([1, 2, 3].map(() => sql`select pg_sleep(0.05)`.execute(db)));
      }
    });

    const scheduled = () => t.ctx.db.selectFrom('rundowns').selectAll().where('trigger', '=', 'schedule').orderBy('from_ts').execute();
    const generatedEvents = () => t.ctx.db.selectFrom('events').select('payload').where('kind', '=', 'rundown.generated').execute();

    test('the task runs a few times per interval, never more often than every 100 ms', () => {
      const task = workerTasks(t.ctx).find((x) => x.name === 'rundown-scheduler');
      assert.ok(task, 'registered with the worker');
      assert.equal(task.intervalMs, 60_000, 'min(60 s, 24h / 4)');
    });

    test('nothing before a complete window has passed since the account was created', async () => {
      t.fakeClock.set(T0 + 23 * HOUR);
      assert.equal(await t.ctx.services.rundowns.generateDue(), 0);
      assert.equal((await scheduled()).length, 0);
    });

    test('concurrent scheduler runs for one window: exactly one rundown, one event, one suggestion', async () => {
      t.fakeClock.set(T0 + DAY + 5 * MIN);
      const late = await t.account(); // created after the window closed: not its rundown
      const runners = [t.ctx, t.ctx, other?.ctx ?? t.ctx, other?.ctx ?? t.ctx];
      const made = await Promise.all(runners.map((c) => c.services.rundowns.generateDue()));
      assert.equal(made.reduce((x, y) => x + y, 0), 1, `made ${JSON.stringify(made)}`);
      const rows = await scheduled();
      assert.equal(rows.length, 1);
      assert.equal(rows[0]!.account_id, t.accountId);
      assert.notEqual(rows[0]!.account_id, late.accountId);
      assert.equal((await generatedEvents()).length, 1);

      const rd = (await t.request('GET', `/v1/rundowns/${rows[0]!.id}`, { key: t.key })).body.data;
      assert.equal(rd.trigger, 'schedule');
      assert.equal(rd.from, iso(T0), 'windows are aligned on UTC midnight for a 24h interval');
      assert.equal(rd.to, iso(T0 + DAY));
      assert.equal(rd.figures.conversations, 2);
      assert.equal(rd.figures.unansweredQuestions, 2);
      assert.equal(rd.suggestedFaqs.length, 1);
      assert.equal((await t.request('GET', '/v1/faqs?status=pending', { key: t.key })).body.data.total, 1);

      assert.deepEqual(await Promise.all(runners.map((c) => c.services.rundowns.generateDue())), [0, 0, 0, 0], 'already made');
    });

    test('missed windows are not back-filled: only the last complete one is made', async () => {
      t.fakeClock.set(T0 + 4 * DAY + HOUR);
      const task = workerTasks(t.ctx).find((x) => x.name === 'rundown-scheduler')!;
      await task.run(new AbortController().signal);
      const rows = await scheduled();
      const windows = [...new Set(rows.map((r) => `${iso(r.from_ts)}/${iso(r.to_ts)}`))];
      assert.deepEqual(windows, [`${iso(T0)}/${iso(T0 + DAY)}`, `${iso(T0 + 3 * DAY)}/${iso(T0 + 4 * DAY)}`]);
      // Both accounts existed before T0 + 4 days; the empty window suggests nothing and counts zeros.
      const last = rows.filter((r) => r.from_ts === T0 + 3 * DAY);
      assert.equal(last.length, 2);
      for (const r of last) assert.equal(JSON.parse(r.figures).conversations, 0);
      assert.equal((await generatedEvents()).length, 3);
    });

    test('manual rundowns of a period with something to suggest, requested together, all succeed', async () => {
      // On PostgreSQL each inserted its rundown (a key-share lock on the account row, by the foreign key) and then
      // asked for the account row's update lock: two of them deadlocked, and one answered 500.
      for (let round = 0; round < 2; round++) {
        const made = await Promise.all(
          [1, 2, 3, 4, 5].map(() => t.request('POST', '/v1/rundowns', { key: t.key, body: { from: iso(T0), to: iso(T0 + DAY) } })),
        );
        assert.deepEqual(made.map((r) => r.status), [201, 201, 201, 201, 201], made.map((r) => r.text).join('\n'));
        for (const r of made) assert.equal(r.body.data.figures.unansweredQuestions, 2);
      }
      const pending = await t.request('GET', '/v1/faqs?status=pending', { key: t.key });
      assert.equal(pending.body.data.total, 1, 'the question is filed once, by the scheduled rundown');
    });
  });
}
