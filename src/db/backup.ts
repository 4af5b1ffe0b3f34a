import { closeSync, existsSync, fsyncSync, linkSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { ensureDir } from '../lib/fs.js';

export class BackupError extends Error {}

/**
 * Copies an SQLite database, while the service keeps running, to a new file: `VACUUM INTO` reads one consistent
 * snapshot (a read transaction: writers in WAL mode go on meanwhile), so the copy holds exactly the transactions
 * committed before it began. The copy is written under a temporary name beside the target, synced to disk and
 * checked (`PRAGMA quick_check`), and only then given the target's name (a hard link, which fails rather than
 * overwrite a file that appeared meanwhile): a run that is killed or fails leaves nothing under the backup's name.
 */
export function backupSqlite(file: string, to: string): { path: string; bytes: number; durationMs: number } {
  const target = resolve(to);
  if (resolve(file) === target) throw new BackupError('--to is the database itself; choose a new file');
  if (existsSync(target)) throw new BackupError(`${target} already exists; choose a new file (a backup never overwrites one)`);
  if (!existsSync(file)) throw new BackupError(`no database at ${file}`);
  const cannotWrite = (err: unknown) => new BackupError(`cannot write the backup to ${target}: ${(err as Error).message}`);
  try {
    ensureDir(dirname(target));
  } catch (err) {
    throw cannotWrite(err);
  }
  const partial = join(dirname(target), `.${basename(target)}.partial-${process.pid}`);
  const removePartial = () => {
    rmSync(partial, { force: true });
    rmSync(`${partial}-journal`, { force: true });
  };
  const started = performance.now();
  removePartial();
  try {
    const source = new SQLite(file, { fileMustExist: true });
    try {
      source.pragma('busy_timeout = 5000');
      try {
        source.prepare('VACUUM INTO ?').run(partial);
      } catch (err) {
        throw cannotWrite(err);
      }
    } finally {
      source.close();
    }
    // VACUUM INTO does not sync what it writes: the backup (and its directory entry) must survive a power cut made
    // right after it.
    fsyncPath(partial);
    const copy = new SQLite(partial, { readonly: true, fileMustExist: true });
    try {
      const check = copy.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new BackupError(`the copy of ${file} failed its check: ${String(check)}`);
    } finally {
      copy.close();
    }
    const appeared = () => new BackupError(`${target} appeared while the backup ran; choose a new file`);
    try {
      linkSync(partial, target);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code === 'EEXIST') throw appeared();
      // A file system without hard links: a rename, after checking again that the name is free.
      if (code !== 'EPERM' && code !== 'ENOTSUP' && code !== 'EOPNOTSUPP') throw cannotWrite(err);
      if (existsSync(target)) throw appeared();
      renameSync(partial, target);
    }
    fsyncPath(dirname(target));
  } finally {
    removePartial();
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
