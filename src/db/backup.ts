import { closeSync, existsSync, fsyncSync, openSync, rmSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { ensureDir } from '../lib/fs.js';

export class BackupError extends Error {}

/**
 * Copies an SQLite database, while the service keeps running, to a new file: `VACUUM INTO` reads one consistent
 * snapshot (a read transaction: writers in WAL mode go on meanwhile), so the copy holds exactly the transactions
 * committed before it began. The copy is synced to disk and checked (`PRAGMA quick_check`) before it is reported.
 */
export function backupSqlite(file: string, to: string): { path: string; bytes: number; durationMs: number } {
  const target = resolve(to);
  if (resolve(file) === target) throw new BackupError('--to is the database itself; choose a new file');
  if (existsSync(target)) throw new BackupError(`${target} already exists; choose a new file (a backup never overwrites one)`);
  if (!existsSync(file)) throw new BackupError(`no database at ${file}`);
  ensureDir(dirname(target));
  const started = performance.now();
  const source = new SQLite(file, { fileMustExist: true });
  try {
    source.pragma('busy_timeout = 5000');
    source.prepare('VACUUM INTO ?').run(target);
  } catch (err) {
    // A half-written copy (disk full, say) must not be mistaken for a backup later.
    rmSync(target, { force: true });
    throw err;
  } finally {
    source.close();
  }
  // VACUUM INTO does not sync what it writes: the backup (and its directory entry) must survive a power cut made
  // right after it.
  fsyncPath(target);
  fsyncPath(dirname(target));
  const copy = new SQLite(target, { readonly: true, fileMustExist: true });
  try {
    const check = copy.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw new BackupError(`the copy at ${target} failed its check: ${String(check)}`);
  } finally {
    copy.close();
  }
  return { path: target, bytes: statSync(target).size, durationMs: Math.round(performance.now() - started) };
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
