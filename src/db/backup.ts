import { closeSync, existsSync, fsyncSync, linkSync, openSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs';
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
 * A run that fails removes its temporary file; one that is killed cannot, so each run first removes those of
 * earlier runs for the same target whose process is gone (see removeStalePartials).
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
  // SQLite owns these names: the next open of the database (by the service, any CLI command, the next backup)
  // takes such a file for its own journal, finds no valid header and deletes it, after this run said it succeeded.
  // Compared resolved, as SQLite names them after the database's real path: a symbolic link does not hide them.
  const live = realpathSync(file);
  const named = join(realpathSync(dirname(target)), basename(target));
  for (const suffix of ['-wal', '-shm', '-journal']) {
    if (named === `${live}${suffix}`) throw new BackupError(`--to ${target} is a file of the database itself (its ${suffix} file, which SQLite deletes); choose a new file`);
  }
  const partial = join(dirname(target), `${partialPrefix(target)}${process.pid}`);
  const removePartial = () => {
    rmSync(partial, { force: true });
    rmSync(`${partial}-journal`, { force: true });
  };
  const started = performance.now();
  removePartial();
  removeStalePartials(target);
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

/**
 * Removes what killed runs (OOM, SIGKILL, a reboot) left beside `target`: its `.NAME.partial-PID` files (and their
 * `-journal`) whose PID is no longer a running process, as large as the database each. Never the file of a live
 * process (another backup to the same name still running: `kill(pid, 0)` succeeds, or fails with EPERM for
 * another user's process), nor the files of other targets. Best effort: a file it cannot list or remove is left
 * as it is, and the backup goes on. The PIDs are this machine's: a directory shared with other machines (or
 * containers with their own PID namespace) holding a backup running there is not a case this handles.
 */
function removeStalePartials(target: string): void {
  const dir = dirname(target);
  const prefix = partialPrefix(target);
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch {
    return;
  }
  for (const name of names) {
    if (!name.startsWith(prefix)) continue;
    const m = /^([1-9]\d*)(-journal)?$/.exec(name.slice(prefix.length));
    if (!m) continue;
    const pid = Number(m[1]);
    if (pid === process.pid || processExists(pid)) continue;
    try {
      rmSync(join(dir, name), { force: true });
    } catch {
      // left for a later run, or for the user
    }
  }
}

/** The start of a run's temporary file name beside `target`; the run's PID completes it. */
function partialPrefix(target: string): string {
  return `.${basename(target)}.partial-`;
}

function processExists(pid: number): boolean {
  if (!Number.isSafeInteger(pid)) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // ESRCH: no such process. EPERM: one exists, owned by another user.
    return (err as NodeJS.ErrnoException).code !== 'ESRCH';
  }
}

function fsyncPath(path: string): void {
  const fd = openSync(path, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}
