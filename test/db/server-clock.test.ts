import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { sql } from 'kysely';
import { offsetWarning, postgresReferenceClock, startProcessClock } from '../../src/db/server-clock.js';
import { SyncedClock, systemClock, type Clock } from '../../src/lib/clock.js';
import { createTestDatabase, DIALECTS, type TestDatabase } from '../helpers/db.js';

/** How far the clock may be from the server's: its best reading's half round trip, rounding, and Date.now's whole ms. */
const TOLERANCE_MS = 5;

test('a clock more than 1 s off is said once when it goes off, and again only after it was back well under', () => {
  const said: Array<{ offsetMs: number; msg: string }> = [];
  const warn = offsetWarning({ info() {}, error() {}, warn: (obj, msg) => said.push({ offsetMs: (obj as { offsetMs: number }).offsetMs, msg: msg! }) });
  for (const offsetMs of [0, 3, 1_500, 1_200, 900, 1_500, 400, -2_000, -2_000]) warn({ offsetMs, roundTripMs: 1 });
  assert.deepEqual(
    said.map((w) => w.offsetMs),
    [1_500, -2_000],
  );
  assert.match(said[0]!.msg, /^this machine's clock is 1\.5 s behind the database server's; .*NTP/);
  assert.match(said[1]!.msg, /^this machine's clock is 2\.0 s ahead of the database server's/);
});

for (const dialect of DIALECTS) {
  describe(`the process clock (${dialect})`, () => {
    let d: TestDatabase;
    before(async () => {
      d = await createTestDatabase(dialect);
    });
    after(() => d.cleanup());

    if (dialect === 'sqlite') {
      test('SQLite is one machine: the process keeps the system clock, nothing to sync', async () => {
        const time = await startProcessClock(d);
        assert.equal(time.clock, systemClock);
        time.stop();
      });
      return;
    }

    /** Reads the server's clock_timestamp() between two readings of `clock`, on a connection of its own. */
    async function bracket(clock: Clock) {
      return d.db.connection().execute(async (conn) => {
        const before = clock.now();
        const server = Number((await sql<{ t: number }>`select extract(epoch from clock_timestamp()) * 1000 as t`.execute(conn)).rows[0]!.t);
        const after = clock.now();
        return { before, server, after };
      });
    }

    async function assertAgrees(clock: Clock) {
      for (let i = 0; i < 20; i++) {
        const { before, server, after } = await bracket(clock);
        assert.ok(
          server >= before - TOLERANCE_MS && server <= after + TOLERANCE_MS,
          `clock_timestamp() ${server} within ${TOLERANCE_MS} ms of [${before}, ${after}] read around it`,
        );
      }
    }

    test("the process clock on PostgreSQL agrees with the server's clock_timestamp() within a few ms", async () => {
      const time = await startProcessClock(d);
      try {
        assert.ok(time.clock instanceof SyncedClock);
        await assertAgrees(time.clock);
      } finally {
        time.stop();
      }
    });

    test("a machine whose clock is 90 s ahead or 42 s behind still tells the server's time within a few ms", async () => {
      for (const skew of [90_000, -42_000]) {
        const clock = new SyncedClock({ reference: postgresReferenceClock(d.db), local: () => Date.now() + skew });
        const s = await clock.sync();
        assert.ok(Math.abs(s.offsetMs + skew) <= TOLERANCE_MS, `offset ${s.offsetMs} measured for a skew of ${skew}`);
        await assertAgrees(clock);
      }
    });
  });
}
