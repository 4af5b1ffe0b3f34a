import type { Config } from '../config.js';
import { withoutPassword } from '../config.js';
import { migrateToLatest, openDatabase, type Database, type DatabaseOptions } from '../db/database.js';

/** A start-up failure the operator can fix (a port in use, a database that cannot be reached). */
export class StartupError extends Error {
  override name = 'StartupError';
}

/**
 * Opens DATABASE_URL and brings it to the latest migration (`applied`: those this run applied), as every command
 * that touches the database does first. A database that cannot be opened (refused, unknown host, wrong password,
 * no such database, a file that cannot be created) or migrated is the operator's to fix: it is said as such,
 * naming the URL without its password, not as an unexpected error.
 */
export async function openMigrated(
  config: Config,
  opts: Omit<DatabaseOptions, 'sqliteSynchronous'> = {},
): Promise<{ database: Database; applied: string[] }> {
  let database: Database | undefined;
  try {
    database = openDatabase(config.databaseUrl, { ...opts, sqliteSynchronous: config.sqliteSynchronous });
    const applied = await migrateToLatest(database.db, database.schema);
    return { database, applied };
  } catch (err) {
    await database?.close().catch(() => undefined);
    throw new StartupError(`cannot open the database ${withoutPassword(config.databaseUrl)} (DATABASE_URL): ${(err as Error).message}`);
  }
}
