import type { Config } from '../config.js';
import { withoutPassword } from '../config.js';
import { migrateToLatest, openDatabase, type Database, type DatabaseOptions } from '../db/database.js';
import { startProcessClock, type ProcessClock } from '../db/server-clock.js';
import type { Logger } from '../lib/log.js';

/** A start-up failure the operator can fix (a port in use, a database that cannot be reached). */
export class StartupError extends Error {
  override name = 'StartupError';
}

/**
 * Opens DATABASE_URL and brings it to the latest migration (`applied`: those this run applied). A database that
 * cannot be opened (refused, unknown host, wrong password, no such database, a file that cannot be created) or
 * migrated is the operator's to fix: it is said as such, naming the URL without its password, not as an
 * unexpected error.
 *
 * `migrate: 'new-only'` (the commands that only read or add rows: init, demo, accounts, keys) sets up a new
 * database but leaves an older version's alone: migrations are forward-only and can change what the older version's
 * running nodes rely on (an upgrade audit had `parley accounts list` migrate a database under running nodes, which
 * then answered 500 to every document write). Such a database is refused with the steps to upgrade it.
 */
export async function openMigrated(
  config: Config,
  opts: Omit<DatabaseOptions, 'sqliteSynchronous'> & { migrate?: 'always' | 'new-only' } = {},
): Promise<{ database: Database; applied: string[] }> {
  const { migrate = 'always', ...dbOpts } = opts;
  let database: Database | undefined;
  try {
    database = openDatabase(config.databaseUrl, { ...dbOpts, sqliteSynchronous: config.sqliteSynchronous });
    const refuseOlder = (pending: string[]) =>
      new Error(
        `an older version of Parley set up this database and it needs this version's migrations (${pending.join(', ')}); ` +
          'stop the nodes still running the older version, back it up, then run `parley migrate` (README.md, Upgrading)',
      );
    const applied = await migrateToLatest(database.db, database.schema, migrate === 'new-only' ? { refuseOlder } : {});
    return { database, applied };
  } catch (err) {
    await database?.close().catch(() => undefined);
    throw new StartupError(`cannot open the database ${withoutPassword(config.databaseUrl)} (DATABASE_URL): ${(err as Error).message}`);
  }
}

/** The clock a command tells time by (src/db/server-clock.ts); the database server's clock that cannot be read is a start-up failure. */
export async function openClock(database: Database, log?: Logger): Promise<ProcessClock> {
  try {
    return await startProcessClock(database, log);
  } catch (err) {
    throw new StartupError(`cannot read the database server's clock, which every node tells time by: ${(err as Error).message}`);
  }
}
