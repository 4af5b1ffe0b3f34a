import { existsSync, mkdirSync, statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p`: creates `dir` and its missing parents. Not `mkdirSync(dir, { recursive: true })`: where mkdir answers
 * ENOENT although the parent exists (under /proc, say), Node's recursive mkdir retries the parent for ever at
 * 100% CPU, so a mistyped DATABASE_URL hung the CLI instead of failing with the reason.
 */
export function ensureDir(dir: string) {
  const missing: string[] = [];
  let d = resolve(dir);
  for (; !existsSync(d); d = dirname(d)) {
    missing.push(d);
    if (dirname(d) === d) break;
  }
  // The nearest existing one must be a directory, as mkdir -p says: a file there is not one to write into.
  if (existsSync(d) && !statSync(d).isDirectory()) throw Object.assign(new Error(`ENOTDIR: not a directory, '${d}'`), { code: 'ENOTDIR' });
  for (const d of missing.reverse()) {
    try {
      mkdirSync(d);
    } catch (err) {
      // Made meanwhile by another process: fine, as with mkdir -p.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
  }
}
