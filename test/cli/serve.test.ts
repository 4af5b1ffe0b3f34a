import assert from 'node:assert/strict';
import { test } from 'node:test';
import { shutdownDeadline } from '../../src/cli/serve.js';
import { loadConfig } from '../../src/config.js';

// The deadline itself is exercised through a real `serve` in cli-suite.ts; this is the rule for its length.
test('shutdown deadline: 10 s, or long enough for a webhook attempt in flight to time out and be recorded', () => {
  assert.equal(shutdownDeadline(loadConfig({}), false), 10_000);
  assert.equal(shutdownDeadline(loadConfig({}), true), 35_000, 'default WEBHOOK_TIMEOUT 30s + 5 s');
  assert.equal(shutdownDeadline(loadConfig({ WEBHOOK_TIMEOUT: '2s' }), true), 10_000);
});
