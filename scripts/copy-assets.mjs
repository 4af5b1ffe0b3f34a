// Copies every `assets/` folder under src/ to the same place under dist/, so a built install finds the dashboard's
// files and the word-vector table beside the compiled modules that read them, with or without src/ next to it.
import { cpSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

function assetDirs(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (!statSync(p).isDirectory()) return [];
    return name === 'assets' ? [p] : assetDirs(p);
  });
}

for (const from of assetDirs('src')) cpSync(from, join('dist', relative('src', from)), { recursive: true });
