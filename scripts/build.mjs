// The build: TypeScript to dist/, then every `assets/` folder under src/ copied to the same place under dist/, so a
// built install finds the dashboard's files and the word-vector table beside the compiled modules that read them,
// with or without src/ next to it. `npm run build`, `prepare` and the test runner (before the CLI tests) all run this.
import { spawnSync } from 'node:child_process';
import { cpSync, readdirSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';

const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const b = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json'], { stdio: 'inherit' });
if (b.status !== 0) process.exit(b.status ?? 1);

function assetDirs(dir) {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    if (!statSync(p).isDirectory()) return [];
    return name === 'assets' ? [p] : assetDirs(p);
  });
}

for (const from of assetDirs('src')) cpSync(from, join('dist', relative('src', from)), { recursive: true });
