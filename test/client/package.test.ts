// The package as users install it: `import … from 'parley/client'` resolves through package.json "exports" to the
// build (scripts/test.mjs builds before a run that includes test/client), and that build loads nothing but itself
// and node: built-ins.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, test } from 'node:test';

const ROOT = join(import.meta.dirname, '..', '..');

describe('parley/client as a package', () => {
  test("import { Parley } from 'parley/client' works, with its errors and verifyWebhook", () => {
    const script = `
      import { Parley, ParleyError, ParleyConnectionError, ParleyTimeoutError, WebhookVerificationError, verifyWebhook } from 'parley/client';
      import Default from 'parley/client';
      const p = new Parley({ apiKey: 'sk_x', baseUrl: 'http://127.0.0.1:3000' });
      console.log(JSON.stringify({
        base: p.baseUrl, same: Default === Parley, resources: Object.keys(p).filter((k) => k !== 'transport').sort(),
        classes: [ParleyError, ParleyConnectionError, WebhookVerificationError].map((c) => c.prototype instanceof Error).concat(ParleyTimeoutError.prototype instanceof ParleyConnectionError),
        verify: typeof verifyWebhook,
      }));`;
    const out = JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { cwd: ROOT, encoding: 'utf8' }));
    assert.deepEqual(out, {
      base: 'http://127.0.0.1:3000/v1',
      same: true,
      resources: ['analytics', 'assistant', 'assistantSettings', 'chat', 'conversations', 'documents', 'events', 'faqs', 'rundowns', 'webhooks', 'workflows'],
      classes: [true, true, true, true],
      verify: 'function',
    });
    const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));
    assert.equal(pkg.exports['./client'].types, './dist/client/index.d.ts');
    assert.ok(readdirSync(join(ROOT, 'dist', 'client')).includes('index.d.ts'), 'the build ships the types');
  });

  test('the built client loads only its own files and node: built-ins', () => {
    const dir = join(ROOT, 'dist', 'client');
    const files = readdirSync(dir).filter((f) => f.endsWith('.js'));
    assert.ok(files.length >= 5);
    for (const f of files) {
      const specifiers = [...readFileSync(join(dir, f), 'utf8').matchAll(/^(?:import|export)\b[^;]*?from\s+'([^']+)'/gm)].map((m) => m[1]!);
      for (const s of specifiers) assert.match(s, /^(node:|\.\/[\w-]+\.js$)/, `${f} loads ${s}`);
    }
  });

  test('the CLI still runs beside the exports map', () => {
    assert.match(execFileSync(process.execPath, [join(ROOT, 'bin', 'parley.js'), '--help'], { cwd: ROOT, encoding: 'utf8' }), /parley serve/);
  });
});
