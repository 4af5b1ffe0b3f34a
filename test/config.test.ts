import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { loadConfig } from '../src/config.js';

const read = (path: string) => readFileSync(new URL(`../${path}`, import.meta.url), 'utf8');

/** The variables src/config.ts reads: every quoted upper-case name in it (the tests' own hooks, TEST_…, left out). */
function readByConfig(): string[] {
  return [...new Set([...read('src/config.ts').matchAll(/'([A-Z][A-Z0-9_]{2,})'/g)].map((m) => m[1]!))].filter((v) => !v.startsWith('TEST_')).sort();
}

/** The variables README.md's Configuration table names in its first column (`PORT` / `HOST`, `LLM_BASE_URL`, `LLM_API_KEY`…). */
function documented(): string[] {
  const readme = read('README.md');
  const table = readme.slice(readme.indexOf('## Configuration'), readme.indexOf('\n## ', readme.indexOf('## Configuration') + 1));
  const names = table
    .split('\n')
    .filter((l) => l.startsWith('| `'))
    .flatMap((l) => [...l.split('|')[1]!.matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!));
  return [...new Set(names)].sort();
}

test("README's Configuration table names exactly the variables src/config.ts reads", () => {
  const inConfig = readByConfig();
  assert.ok(inConfig.length > 20, `read ${inConfig.length} names from src/config.ts`);
  assert.deepEqual(documented(), inConfig);
});

test('every variable the README names is one the service reads: a bad value of each is refused by name', () => {
  // Not just a quoted string in config.ts: loading with a nonsense value names the variable (or it is a free-form
  // text, which any value suits).
  const freeForm = new Set(['DATABASE_URL', 'LLM_API_KEY', 'LLM_MODEL', 'METRICS_TOKEN', 'REDIS_URL']);
  for (const name of documented()) {
    if (freeForm.has(name)) continue;
    assert.throws(() => loadConfig({ [name]: '\u0001not a value' }), (err: Error) => err.message.includes(name), name);
  }
});
