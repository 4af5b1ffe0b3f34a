import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { withoutPassword, type Config } from '../config.js';
import { checkSource, CopyError, copyDatabase } from '../db/copy.js';
import { openDatabase, sqliteFileOf, type Database } from '../db/database.js';
import { openMigrated } from './database.js';

/**
 * `parley copy --from URL`: every row of the database at URL into DATABASE_URL (set up by this version if new, and
 * empty). The move from the embedded SQLite file to PostgreSQL when one machine is no longer enough, or back.
 */
export async function copyCommand(config: Config, from: string | undefined, out: (obj: Record<string, unknown>, text: string) => void): Promise<number> {
  if (!from) throw new CopyError('--from is required: the database to copy from (sqlite:FILE or postgres://…); DATABASE_URL is the one copied into');
  if (!/^(sqlite:|postgres(ql)?:\/\/)/.test(from)) throw new CopyError(`--from ${withoutPassword(from)}: must start with sqlite: or postgres://`);
  const file = sqliteFileOf(from);
  if (file === ':memory:') throw new CopyError('--from names an in-memory database, which has nothing to copy');
  const into = sqliteFileOf(config.databaseUrl);
  if (from === config.databaseUrl || (file !== null && into !== null && into !== ':memory:' && resolve(file) === resolve(into))) {
    throw new CopyError('--from is DATABASE_URL itself: copy into another database');
  }
  // openDatabase would create a missing file (and its directory) and then find no Parley database in it.
  if (file !== null && !existsSync(file)) throw new CopyError(`--from: no database at ${file}`);
  let source: Database;
  try {
    source = openDatabase(from, { poolSize: 2 });
  } catch (err) {
    throw new CopyError(`cannot open the source database ${withoutPassword(from)}: ${(err as Error).message}`);
  }
  let target: Database | undefined;
  try {
    // Before DATABASE_URL is set up: a source that cannot be copied leaves no new database behind.
    await checkSource(source);
    target = (await openMigrated(config, { migrate: 'new-only', poolSize: 2 })).database;
    const result = await copyDatabase(source, target, {
      onTable: (table, rows) => process.stderr.write(`parley: copied ${table} (${rows} row${rows === 1 ? '' : 's'})\n`),
      onRows: (table, copied, of) => process.stderr.write(`parley: copying ${table}: ${copied} of ${of} rows\n`),
    });
    const summary = { from: withoutPassword(from), to: withoutPassword(config.databaseUrl), ...result };
    if (result.sourceChangedDuringCopy.length) {
      // The likeliest mistake of a move: a node left running on the source. The copy is consistent, but behind.
      process.stderr.write(
        `parley: warning: the source was written to during the copy (${result.sourceChangedDuringCopy.join(', ')}): the copy lacks those writes. ` +
          'Stop every node using the source, then copy again into a new, empty database\n',
      );
    }
    out(summary, `Copied ${result.rows} rows in ${result.durationMs} ms from ${summary.from} to ${summary.to}.`);
    return 0;
  } finally {
    await source.close().catch(() => undefined);
    await target?.close();
  }
}
