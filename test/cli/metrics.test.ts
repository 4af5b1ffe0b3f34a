import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { openDatabase, type Database } from '../../src/db/database.js';
import { writeTransaction } from '../../src/db/unit-of-work.js';
import { systemClock } from '../../src/lib/clock.js';
import { DIALECTS } from '../helpers/db.js';
import { parseExposition } from '../helpers/metrics.js';
import { waitFor } from '../modules/webhooks/delivery-helpers.js';
import { startServer, type TestServer } from '../modules/webhooks/helpers.js';
import { cli, ENTRY, stopChild, useCliDatabase } from './cli-suite.js';

const TOKEN = 'cli-metrics-token-0123456789';

/** Starts a long-running command with --json and resolves with its one line on stdout once it is printed. */
function startJson(args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, [ENTRY, ...args, '--json'], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const said = new Promise<any>((resolve, reject) => {
    // On failure the child is killed: left running, its pipes would keep this file alive.
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args[0]} did not start: ${stderr}`));
    }, 60_000);
    child.stdout!.on('data', (c: Buffer) => {
      stdout += c.toString();
      if (!stdout.includes('\n')) return;
      clearTimeout(timer);
      resolve(JSON.parse(stdout.split('\n')[0]!));
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${args[0]} exited with ${code}: ${stderr}`));
    });
  });
  return { child, said, stderr: () => stderr };
}


const get = (url: string, token?: string) => fetch(url, token ? { headers: { authorization: `Bearer ${token}` } } : {});

for (const dialect of DIALECTS) {
  describe(`METRICS_PORT: the metrics of parley worker and serve on a port of their own (${dialect})`, () => {
    const c = useCliDatabase(dialect);
    let rx: TestServer;
    let database: Database;
    let ctx: ReturnType<typeof createContext>;
    let accountId: string;
    const children: ChildProcess[] = [];
    before(async () => {
      const m = await cli(['migrate'], c.env);
      assert.equal(m.code, 0, m.stderr);
      rx = await startServer();
      // This process writes the events a worker process delivers, as an API node would.
      database = openDatabase(c.env.DATABASE_URL!);
      ctx = createContext(loadConfig({ ...c.env, WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }), database, systemClock);
      accountId = (await ctx.services.accounts.createAccount({ name: 'Metrics', plan: 'pro' })).id;
      await ctx.services.webhooks.create(accountId, { url: `${rx.url}/hook`, events: ['conversation.started'], secret: 'whsec_cli_metrics' });
    });
    after(async () => {
      for (const child of children) await stopChild(child);
      await database?.close();
      await rx?.close();
    });

    test('parley worker: refused without the token, then its attempts and the queue; it stops cleanly', async () => {
      const w = startJson(['worker'], { ...c.env, METRICS_TOKEN: TOKEN, METRICS_PORT: '0', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' });
      children.push(w.child);
      const said = await w.said;
      assert.equal(said.worker, 'started');
      assert.match(said.metrics, /^http:\/\/127\.0\.0\.1:\d+\/metrics$/, 'METRICS_HOST defaults to 127.0.0.1');

      const refused = await get(said.metrics);
      assert.equal(refused.status, 401);
      assert.equal(((await refused.json()) as { error: { code: string } }).error.code, 'UNAUTHORIZED');
      assert.equal((await get(said.metrics, `${TOKEN}x`)).status, 401);
      const other = await get(said.metrics.replace(/\/metrics$/, '/v1/documents'), TOKEN);
      assert.equal(other.status, 404, 'only /metrics is served there');
      assert.equal(((await other.json()) as { error: { code: string } }).error.code, 'NOT_FOUND');

      await writeTransaction(ctx.db, (trx) => ctx.events.emit(trx, accountId, 'conversation.started', { conversationId: 'conv_cli', customerId: 'c' }));
      await waitFor(() => rx.received.length === 1, 'the delivery, made by the worker process');
      const m = await waitFor(async () => {
        const r = await get(said.metrics, TOKEN);
        assert.equal(r.status, 200);
        assert.equal(r.headers.get('content-type'), 'text/plain; version=0.0.4; charset=utf-8');
        const parsed = parseExposition(await r.text());
        // The queue is cached for 2 s: read until the recorded delivery has left it.
        const done = parsed.value('parley_webhook_attempts_total', { kind: 'auto', outcome: 'succeeded' }) === 1 && parsed.value('parley_webhook_deliveries_pending') === 0;
        return done ? parsed : undefined;
      }, 'the attempt in the worker process figures');
      assert.equal(m.value('parley_webhook_queue_up'), 1);
      assert.equal(m.matching('parley_info')[0]!.labels.dialect, dialect);
      assert.ok(m.value('parley_process_uptime_seconds')! > 0);
      assert.ok(m.value('parley_event_loop_lag_p99_seconds')! >= 0);
      // A worker serves no API: no request figures. Its rundown scheduler's counters are its own (the account, made
      // just now, has no complete window yet: nothing claimed).
      assert.equal(m.types.has('parley_http_requests_total'), false);
      assert.equal(m.value('parley_rundown_claims_total', { outcome: 'taken' }), 0);
      assert.equal(m.value('parley_rundowns_built_total', { trigger: 'schedule' }), 0);

      assert.equal(await stopChild(w.child), 0, w.stderr());
    });

    test('parley serve --no-worker: the same figures on METRICS_PORT and on the API port', async () => {
      const s = startJson(['serve', '--no-worker'], { ...c.env, PORT: '0', METRICS_TOKEN: TOKEN, METRICS_PORT: '0' });
      children.push(s.child);
      const said = await s.said;
      assert.notEqual(new URL(said.metrics).port, new URL(said.listening).port);
      assert.equal((await get(`${said.api}/health`)).status, 200);
      for (const url of [said.metrics, `${said.listening}/metrics`]) {
        assert.equal((await get(url)).status, 401, url);
        const r = await get(url, TOKEN);
        assert.equal(r.status, 200, url);
        const m = parseExposition(await r.text());
        assert.equal(m.value('parley_http_requests_total', { method: 'GET', route: '/v1/health', code: '200' }), 1, url);
      }
      assert.equal(await stopChild(s.child), 0, s.stderr());
    });

    test('METRICS_PORT on a port already taken stops the start, naming the variables', async () => {
      const r = await cli(['worker'], { ...c.env, METRICS_TOKEN: TOKEN, METRICS_PORT: String(rx.port), LOG_LEVEL: 'silent' });
      assert.equal(r.code, 1, r.stderr);
      assert.match(r.stderr, new RegExp(`cannot listen on 127\\.0\\.0\\.1:${rx.port} \\(METRICS_HOST, METRICS_PORT\\): the port is already in use`));
    });
  });
}

describe('metrics configuration', () => {
  test('a bad or incomplete metrics configuration stops the start, naming each variable, never the token', async () => {
    const env = { DATABASE_URL: 'sqlite::memory:' };
    const cases: Array<[Record<string, string>, RegExp]> = [
      [{ METRICS_TOKEN: 'short' }, /METRICS_TOKEN: must be 16 to 256 printable ASCII characters without spaces/],
      [{ METRICS_TOKEN: 'has a space in it, 0123456789' }, /METRICS_TOKEN: must be 16/],
      [{ METRICS_PORT: '9100' }, /METRICS_PORT is set but METRICS_TOKEN is not/],
      [{ METRICS_TOKEN: TOKEN, METRICS_PORT: '70000' }, /METRICS_PORT="70000": must be an integer from 0 to 65535/],
      [{ METRICS_TOKEN: TOKEN, METRICS_HOST: '0.0.0.0' }, /METRICS_HOST is set but METRICS_PORT is not/],
      [{ METRICS_TOKEN: TOKEN, METRICS_PORT: '9100', METRICS_HOST: 'bad host' }, /METRICS_HOST="bad host": must be an IP address or a host name/],
    ];
    const results = await Promise.all(cases.map(([vars]) => cli(['worker'], { ...env, ...vars })));
    results.forEach((r, i) => {
      const [vars, re] = cases[i]!;
      assert.equal(r.code, 2, JSON.stringify(vars));
      assert.match(r.stderr, re);
      assert.doesNotMatch(r.stderr, /has a space|short"/, 'the token is not echoed');
    });
    assert.equal(loadConfig({}).metrics, null, 'off by default');
    assert.deepEqual(loadConfig({ METRICS_TOKEN: TOKEN }).metrics, { token: TOKEN, port: null, host: '127.0.0.1' });
  });
});
