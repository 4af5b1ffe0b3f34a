import { sql, type Kysely } from 'kysely';
import { SyncedClock, systemClock, type Clock, type ClockSync, type ReferenceClock } from '../lib/clock.js';
import { silentLogger, type Logger } from '../lib/log.js';
import type { Database } from './database.js';
import type { DB } from './schema.js';

/** Past this, the machine's clock is off enough for the operator to hear of it (the service itself is unaffected). */
export const LARGE_CLOCK_OFFSET_MS = 1_000;
/** Re-measured this often: ordinary drift is a few ms a minute, and a machine's clock fixed by hand is followed within it. */
export const CLOCK_SYNC_INTERVAL_MS = 30_000;

/**
 * PostgreSQL's clock: clock_timestamp() (the time of the reading, not of the transaction's start as now() is), in
 * µs, read on one pooled connection for all of a sync's readings.
 */
export function postgresReferenceClock(db: Kysely<DB>): ReferenceClock {
  const reading = sql<{ t: number }>`select extract(epoch from clock_timestamp()) * 1000 as t`;
  return {
    session: (fn) => db.connection().execute((conn) => fn(async () => Number((await reading.execute(conn)).rows[0]!.t))),
  };
}

/**
 * Tells the operator when this machine's clock is more than LARGE_CLOCK_OFFSET_MS off the server's: at start, or once
 * it went off later. Not at every sync, and again only after it was back well under the threshold, so an offset
 * hovering at it is not a line every 30 s.
 */
export function offsetWarning(log: Logger): (sync: ClockSync) => void {
  let large = false;
  return ({ offsetMs, roundTripMs }) => {
    const off = Math.abs(offsetMs);
    if (off > LARGE_CLOCK_OFFSET_MS && !large) {
      log.warn(
        { offsetMs, roundTripMs },
        `this machine's clock is ${(off / 1000).toFixed(1)} s ${offsetMs > 0 ? 'behind' : 'ahead of'} the database server's; ` +
          "Parley tells time by the database server's clock, but other programs on this machine do not: check its time synchronisation (NTP)",
      );
    }
    large = off > LARGE_CLOCK_OFFSET_MS || (large && off > LARGE_CLOCK_OFFSET_MS / 2);
  };
}

/** A process's clock and how to stop what keeps it right. */
export interface ProcessClock {
  clock: Clock;
  stop(): void;
}

/**
 * The clock for a process on `database`. PostgreSQL may be shared by processes on several machines, so their time is
 * the server's (SyncedClock, src/lib/clock.ts); SQLite is opened by processes of one machine, whose clock they
 * already share. Fails when the server's clock cannot be read: a process on its own clock could take over another
 * worker's live lease.
 */
export async function startProcessClock(database: Pick<Database, 'db' | 'dialect'>, log: Logger = silentLogger): Promise<ProcessClock> {
  if (database.dialect !== 'postgres') return { clock: systemClock, stop: () => undefined };
  const clock = new SyncedClock({
    reference: postgresReferenceClock(database.db),
    intervalMs: CLOCK_SYNC_INTERVAL_MS,
    onSync: offsetWarning(log),
    onError: (err) => log.warn({ err }, "reading the database server's clock failed; the last measured offset stays in use"),
  });
  await clock.start();
  return { clock, stop: () => clock.stop() };
}
