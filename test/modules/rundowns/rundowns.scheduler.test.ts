import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../../src/config.js';
import { createContext, type AppContext } from '../../../src/context.js';
import { openDatabase, type Database } from '../../../src/db/database.js';
import { resourceError } from '../../../src/db/resource-errors.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { rundownsRepository } from '../../../src/modules/rundowns/rundowns.repository.js';
import { RUNDOWN_CLAIM_LEASE_MS } from '../../../src/modules/rundowns/rundowns.service.js';
import type { FakeClock } from '../../../src/lib/clock.js';
import { createTestApp, useTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS, insertionOrder } from '../../helpers/db.js';
import { fillDatabase } from '../../helpers/full.js';
import { converse, DAY, HOUR, iso, loadKnowledge, MIN, T0 } from './helpers.js';

/** What createTestApp's config is made of (its own defaults). */
const TEST_ENV = { WEBHOOK_ALLOW_PRIVATE_URLS: 'true', AUTH_CACHE_TTL: '0' };

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
      const contexts = [...new Set(runners)];
      const builtBefore = contexts.map((c) => c.services.rundowns.counts.built.schedule);
      const made = await Promise.all(runners.map((c) => c.services.rundowns.generateDue()));
      assert.equal(made.reduce((x, y) => x + y, 0), 1, `made ${JSON.stringify(made)}`);
      // One digest built: the other runs found the window claimed (or, claiming it after, already made).
      const built = contexts.map((c, i) => c.services.rundowns.counts.built.schedule - builtBefore[i]!);
      assert.equal(built.reduce((x, y) => x + y, 0), 1, `built ${JSON.stringify(built)}`);
      assert.deepEqual(contexts.map((c) => c.services.rundowns.counts.discarded), contexts.map(() => 0));
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

    // This test said "missed windows are not back-filled: only the last complete one is made" until RUNDOWN_BACKFILL
    // (default 7): the same outage now gets its missed windows made. The old behaviour, RUNDOWN_BACKFILL=0, is below.
    test('a worker down for three windows: the next run makes their rundowns and the last one\'s, oldest first, once', async () => {
      // The last run was at T0 + 1 day + 5 min; nothing runs until T0 + 5 days: [T0 + 1d, T0 + 4d) are missed.
      await converse(t, t.key, T0 + 2 * DAY + 3 * HOUR, ['do you deliver to mars'], { end: true });
      t.fakeClock.set(T0 + 2 * DAY + 12 * HOUR);
      const mid = await t.account(); // created during the outage
      const late = (await t.ctx.services.accounts.listAccounts()).find((a) => a.id !== t.accountId && a.id !== mid.accountId)!;
      const eventsBefore = (await generatedEvents()).length;

      t.fakeClock.set(T0 + 5 * DAY + HOUR);
      assert.equal(await t.ctx.services.rundowns.generateDue(), 4 + 4 + 3);
      const windowsOf = async (accountId: string) =>
        (await scheduled()).filter((r) => r.account_id === accountId).map((r) => `${iso(r.from_ts)}/${iso(r.to_ts)}`);
      const days = (...n: number[]) => n.map((d) => `${iso(T0 + d * DAY)}/${iso(T0 + (d + 1) * DAY)}`);
      assert.deepEqual(await windowsOf(t.accountId), days(0, 1, 2, 3, 4));
      assert.deepEqual(await windowsOf(late.id), days(1, 2, 3, 4), 'created at T0 + 1d + 5 min: from the window it existed in');
      assert.deepEqual(await windowsOf(mid.accountId), days(2, 3, 4), 'created in the middle of the gap: the windows that ended after');

      // Each digest is of its own window: the question asked on day 2 is in that day's rundown only.
      const byFrom = new Map((await scheduled()).filter((r) => r.account_id === t.accountId).map((r) => [r.from_ts, JSON.parse(r.figures)]));
      assert.deepEqual([1, 2, 3, 4].map((d) => byFrom.get(T0 + d * DAY).conversations), [0, 1, 0, 0]);
      assert.deepEqual([1, 2, 3, 4].map((d) => byFrom.get(T0 + d * DAY).unansweredQuestions), [0, 1, 0, 0]);

      // Oldest window first: in the order the events were written (all of this run share a millisecond) ...
      const written = (await t.ctx.db.selectFrom('events').select('payload').where('kind', '=', 'rundown.generated').orderBy('created_at').orderBy(insertionOrder(dialect)).execute())
        .slice(eventsBefore)
        .map((e) => JSON.parse(e.payload).data.from as string);
      assert.equal(written.length, 11);
      assert.deepEqual(written, [...written].sort(), written.join(', '));
      // ... and as an account's integration reads them back (GET /v1/events is newest first: timestamp, then id).
      const feed = (await t.request('GET', '/v1/events?event=rundown.generated&limit=100', { key: t.key })).body.data.events;
      assert.deepEqual(
        feed.reverse().map((e: { data: { from: string } }) => e.data.from),
        [0, 1, 2, 3, 4].map((d) => iso(T0 + d * DAY)),
      );

      assert.equal(await t.ctx.services.rundowns.generateDue(), 0, 'each made once');
      const task = workerTasks(t.ctx).find((x) => x.name === 'rundown-scheduler')!;
      await task.run(new AbortController().signal);
      assert.equal((await scheduled()).length, 1 + 11);
      assert.equal((await generatedEvents()).length, eventsBefore + 11);
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

  describe(`scheduled rundowns: how far back RUNDOWN_BACKFILL reaches (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: T0 + 3 * HOUR });
    /** Another process's worth of scheduler on this database, with its own RUNDOWN_BACKFILL. */
    const withBackfill = (n: number) => createContext(loadConfig({ ...TEST_ENV, RUNDOWN_BACKFILL: String(n) }), t.database, t.clock).services.rundowns;
    const windows = async () => (await t.ctx.db.selectFrom('rundowns').select(['from_ts', 'to_ts']).where('trigger', '=', 'schedule').orderBy('from_ts').execute()).map((r) => (r.from_ts - T0) / DAY);

    test('RUNDOWN_BACKFILL=0 is the behaviour before it: the last complete window only', async () => {
      t.fakeClock.set(T0 + 4 * DAY + HOUR);
      assert.equal(await withBackfill(0).generateDue(), 1);
      assert.deepEqual(await windows(), [3]);
      assert.equal(await withBackfill(0).generateDue(), 0);
    });

    test('windows more than RUNDOWN_BACKFILL before the last one are not made', async () => {
      t.fakeClock.set(T0 + 8 * DAY + HOUR);
      assert.equal(await withBackfill(2).generateDue(), 3);
      // Days 0-2 and 4 are missing and stay so: 4 is three windows before the last (7).
      assert.deepEqual(await windows(), [3, 5, 6, 7]);
      assert.equal(await withBackfill(2).generateDue(), 0);
    });

    test('a run stops between rundowns when its signal is aborted; the next one goes on from the oldest missing', async () => {
      t.fakeClock.set(T0 + 8 * DAY + HOUR);
      let checks = 0;
      // Aborted once two rundowns were made: the scheduler looks at the signal before each one.
      const signal = { get aborted() { return ++checks > 2; } } as AbortSignal;
      assert.equal(await withBackfill(7).generateDue(signal), 2);
      assert.deepEqual(await windows(), [0, 1, 3, 5, 6, 7], 'the two oldest');
      // Days 2 and 4 too, though later days were made: a window missing behind made ones (left by an aborted or
      // failed run, or an older version) is still missing, and made.
      assert.equal(await withBackfill(7).generateDue(), 2);
      assert.deepEqual(await windows(), [0, 1, 2, 3, 4, 5, 6, 7]);
    });

    test(
      'a full database stops the run at its first refusal (the worker then backs off and logs once), instead of one error line per account and window; made once there is room',
      { skip: dialect !== 'postgres' && 'SQLite: whether a small rundown still fits in the pages the file has depends on its layout' },
      async () => {
        t.fakeClock.set(T0 + 10 * DAY + HOUR);
        const errors: unknown[] = [];
        const log = { info() {}, warn() {}, error: (obj: object) => void errors.push(obj) };
        const scheduler = createContext(loadConfig({ ...TEST_ENV, RUNDOWN_BACKFILL: '7' }), t.database, t.clock, log).services.rundowns;
        const lift = await fillDatabase(t.database);
        try {
          await assert.rejects(scheduler.generateDue(), (err: unknown) => resourceError(err)?.problem === 'full');
        } finally {
          await lift();
        }
        assert.deepEqual(errors, [], 'one failure for the worker to log, not a line per window');
        assert.deepEqual(await windows(), [0, 1, 2, 3, 4, 5, 6, 7]);
        assert.equal(await scheduler.generateDue(), 2);
        assert.deepEqual(await windows(), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
      },
    );
  });

  describe(`scheduled rundowns: RUNDOWN_INTERVAL changed (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: T0 + 3 * HOUR });
    const scheduler = (env: Record<string, string>) => createContext(loadConfig({ ...TEST_ENV, ...env }), t.database, t.clock).services.rundowns;
    const made = async () =>
      (await t.ctx.db.selectFrom('rundowns').select(['from_ts', 'to_ts']).where('trigger', '=', 'schedule').orderBy('from_ts').orderBy('to_ts').execute()).map(
        (r) => `${(r.from_ts - T0) / HOUR}h+${(r.to_ts - r.from_ts) / HOUR}`,
      );
    const hours = (from: number, to: number) => Array.from({ length: to - from }, (_, i) => `${from + i}h+1`);

    test('the windows of the new interval that rundowns of the old one already covered are not made again', async () => {
      const hourly = scheduler({ RUNDOWN_INTERVAL: '1h', RUNDOWN_BACKFILL: '30' });
      const daily = scheduler({ RUNDOWN_INTERVAL: '24h', RUNDOWN_BACKFILL: '7' });
      // Hourly first: the account was created at 3h, so its hours from then.
      t.fakeClock.set(T0 + DAY + MIN);
      assert.equal(await hourly.generateDue(), 21);
      // Then daily. Day 0 is covered by the hourly ones: not made again. Day 1 nothing covered: back-filled; day 2 is
      // the last. (Without that rule, day 0 would be made as well.)
      t.fakeClock.set(T0 + 3 * DAY + MIN);
      assert.equal(await daily.generateDue(), 2);
      assert.deepEqual(await made(), [...hours(3, 24), '24h+24', '48h+24']);
      // Back to hourly, 30 windows back: the hours of day 2 are in day 2's rundown; those since are made. (Without the
      // rule, 31 hourly rundowns, 21 of them of day 2 again.)
      t.fakeClock.set(T0 + 3 * DAY + 10 * HOUR + 30 * MIN);
      assert.equal(await hourly.generateDue(), 10);
      assert.deepEqual(await made(), [...hours(3, 24), '24h+24', '48h+24', ...hours(72, 82)]);
      assert.equal(await hourly.generateDue(), 0);
      assert.equal(await daily.generateDue(), 0);
    });

    test('the last complete window is made as before, even where rundowns of another interval cover it', async () => {
      // Back to daily on day 3 at 10h: the hours of day 3 made so far do not keep its daily rundown from being made.
      t.fakeClock.set(T0 + 4 * DAY + MIN);
      assert.equal(await scheduler({ RUNDOWN_INTERVAL: '24h' }).generateDue(), 1);
      assert.deepEqual(await made(), [...hours(3, 24), '24h+24', '48h+24', '72h+1', '72h+24', ...hours(73, 82)]);
    });
  });

  describe(`scheduled rundowns: two processes catching up at once (${dialect})`, () => {
    let dir: string;
    let a: TestApp;
    let b: TestApp;
    before(async () => {
      dir = mkdtempSync(join(tmpdir(), 'parley-backfill-'));
      a = await createTestApp(dialect, { fakeClock: T0 + 3 * HOUR, ...(dialect === 'sqlite' ? { sqliteFile: join(dir, 'parley.db') } : {}) });
      b = await createTestApp(dialect, { fakeClock: T0 + 3 * HOUR, sameDatabaseAs: a });
    });
    after(async () => {
      await b?.close();
      await a?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    test('each missing rundown is made once, with one event, whichever process gets to it', async () => {
      const accounts = [];
      for (let i = 0; i < 4; i++) accounts.push(await a.account());
      await converse(a, accounts[0]!.key, T0 + DAY + 2 * HOUR, ['do you deliver to mars'], { end: true });
      for (const app of [a, b]) (app.clock as FakeClock).set(T0 + 6 * DAY + HOUR);
      // Both processes' schedulers run twice at once over the same six windows of four accounts.
      const runs = await Promise.all([a, b, a, b].map((app) => app.ctx.services.rundowns.generateDue()));
      assert.equal(runs.reduce((x, y) => x + y, 0), 4 * 6, `made ${JSON.stringify(runs)}`);
      // Each digest built once, by whichever process claimed its window: none built twice and thrown away (before the
      // claims, every process built most of them and all but one discarded theirs at the unique index).
      const builds = [a, b].map((app) => app.ctx.services.rundowns.counts);
      assert.deepEqual(
        { built: builds[0]!.built.schedule + builds[1]!.built.schedule, discarded: builds[0]!.discarded + builds[1]!.discarded },
        { built: 4 * 6, discarded: 0 },
        JSON.stringify(builds),
      );
      assert.equal((await a.ctx.db.selectFrom('rundown_claims').selectAll().execute()).length, 0, 'every claim went with its rundown');
      const rows = await a.ctx.db.selectFrom('rundowns').select(['id', 'account_id', 'from_ts', 'to_ts']).where('trigger', '=', 'schedule').execute();
      assert.equal(rows.length, 4 * 6);
      assert.equal(new Set(rows.map((r) => `${r.account_id} ${r.from_ts} ${r.to_ts}`)).size, rows.length);
      const announced = (await a.ctx.db.selectFrom('events').select('payload').where('kind', '=', 'rundown.generated').execute()).map((e) => JSON.parse(e.payload).data.rundownId);
      assert.deepEqual(announced.sort(), rows.map((r) => r.id).sort(), 'one rundown.generated per rundown');
      // Each account's events in the order of their windows: a process makes a window only after its own attempt at
      // the one before has committed or found it made.
      for (const { accountId } of accounts) {
        const froms = (await a.ctx.db.selectFrom('events').select('payload').where('account_id', '=', accountId).where('kind', '=', 'rundown.generated').orderBy('created_at').orderBy(insertionOrder(dialect)).execute()).map((e) => JSON.parse(e.payload).data.from as string);
        assert.deepEqual(froms, [0, 1, 2, 3, 4, 5].map((d) => iso(T0 + d * DAY)));
      }
      assert.deepEqual(await Promise.all([a, b].map((app) => app.ctx.services.rundowns.generateDue())), [0, 0]);
    });
  });

  describe(`scheduled rundowns: a claim left by a worker that died (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: T0 + 3 * HOUR });
    const windowsOf = async (accountId: string) =>
      (await t.ctx.db.selectFrom('rundowns').select('from_ts').where('account_id', '=', accountId).where('trigger', '=', 'schedule').orderBy('from_ts').execute()).map(
        (r) => (r.from_ts - T0) / DAY,
      );
    const claims = () => t.ctx.db.selectFrom('rundown_claims').selectAll().orderBy('from_ts').execute();

    test('blocks its window and the account\'s later ones until it expires, then the next run takes it over', async () => {
      const other = await t.account();
      t.fakeClock.set(T0 + 4 * DAY + HOUR);
      // What a worker leaves when it dies building day 1's digest: its claim, taken as the scheduler takes one.
      const at = t.clock.now();
      assert.equal(await rundownsRepository.claimWindow(t.ctx.db, t.accountId, { from: T0 + DAY, to: T0 + 2 * DAY }, 'dead-worker', at, at + RUNDOWN_CLAIM_LEASE_MS), true);

      // Day 0 is made; day 1 is held, and the days after it are left to the holder so that the account's events stay
      // in order; the other account is not held up.
      assert.equal(await t.ctx.services.rundowns.generateDue(), 1 + 4);
      assert.deepEqual(await windowsOf(t.accountId), [0]);
      assert.deepEqual(await windowsOf(other.accountId), [0, 1, 2, 3]);
      t.fakeClock.set(at + RUNDOWN_CLAIM_LEASE_MS - 1);
      assert.equal(await t.ctx.services.rundowns.generateDue(), 0, 'not before the claim expires');
      assert.equal((await claims()).length, 1);

      // Expired: taken over, and the window made, with the later ones, oldest first; no claim is left.
      t.fakeClock.set(at + RUNDOWN_CLAIM_LEASE_MS);
      assert.equal(await t.ctx.services.rundowns.generateDue(), 3);
      assert.deepEqual(await windowsOf(t.accountId), [0, 1, 2, 3]);
      assert.deepEqual(await claims(), []);
      const froms = (await t.ctx.db.selectFrom('events').select('payload').where('account_id', '=', t.accountId).where('kind', '=', 'rundown.generated').orderBy('created_at').orderBy(insertionOrder(dialect)).execute()).map((e) => JSON.parse(e.payload).data.from as string);
      assert.deepEqual(froms, [0, 1, 2, 3].map((d) => iso(T0 + d * DAY)));
    });

    test('a build that fails gives its claim back at once: the next run tries again without waiting for the expiry', async () => {
      t.fakeClock.set(T0 + 5 * DAY + HOUR);
      const analytics = t.ctx.services.analytics;
      const figures = analytics.figures.bind(analytics);
      let failures = 0;
      analytics.figures = async (...args: Parameters<typeof figures>) => {
        if (args[0] === t.accountId && failures++ === 0) throw new Error('the database went away');
        return figures(...args);
      };
      try {
        const made = await t.ctx.services.rundowns.generateDue();
        assert.equal(made, 1, 'the other account\'s day 4');
        assert.deepEqual(await claims(), [], 'released');
        assert.equal(await t.ctx.services.rundowns.generateDue(), 1);
        assert.deepEqual(await windowsOf(t.accountId), [0, 1, 2, 3, 4]);
      } finally {
        analytics.figures = figures;
      }
    });
  });

  describe(`scheduled rundowns: runs after one that found nothing missing (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: T0 + 3 * HOUR });
    const scheduled = () => t.ctx.db.selectFrom('rundowns').select(['id', 'from_ts']).where('account_id', '=', t.accountId).where('trigger', '=', 'schedule').orderBy('from_ts').execute();
    /** What cannot happen in the service (a scheduled rundown is deleted only with its account): a window gone missing. */
    const lose = async (from: number) => {
      await t.ctx.db.deleteFrom('events').where('account_id', '=', t.accountId).where('kind', '=', 'rundown.generated').execute();
      await t.ctx.db.deleteFrom('rundowns').where('account_id', '=', t.accountId).where('from_ts', '=', from).where('trigger', '=', 'schedule').execute();
    };

    test('skip the look until the next window ends, once that run came a minute after the window ended', async () => {
      const rundowns = t.ctx.services.rundowns;
      t.fakeClock.set(T0 + DAY + 10_000);
      assert.equal(await rundowns.generateDue(), 1);
      // Nothing missing, but within a minute of the window's end (an account created just before it may not have
      // committed yet): the next run still looks, and finds the window missing.
      assert.equal(await rundowns.generateDue(), 0);
      await lose(T0);
      t.fakeClock.set(T0 + DAY + 30_000);
      assert.equal(await rundowns.generateDue(), 1);
      // A run a minute after the end that finds nothing missing settles the window: later runs before the next window
      // ends do not look.
      t.fakeClock.set(T0 + DAY + MIN);
      assert.equal(await rundowns.generateDue(), 0);
      await lose(T0);
      t.fakeClock.set(T0 + 2 * DAY - 1);
      assert.equal(await rundowns.generateDue(), 0, 'not looked for');
      assert.deepEqual((await scheduled()).map((r) => r.from_ts), []);
      // The next window's first run looks again, and finds both.
      t.fakeClock.set(T0 + 2 * DAY);
      assert.equal(await rundowns.generateDue(), 2);
      assert.deepEqual((await scheduled()).map((r) => r.from_ts), [T0, T0 + DAY]);
    });
  });
}
