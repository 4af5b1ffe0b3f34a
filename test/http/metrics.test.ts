import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, test } from 'node:test';
import type { DeliveriesTable } from '../../src/db/schema.js';
import { DURATION_BUCKETS } from '../../src/http/metrics.js';
import type { FakeClock } from '../../src/lib/clock.js';
import { QUEUE_CACHE_MS, QUEUE_WAIT_MS } from '../../src/metrics.js';
import { rundownsRepository } from '../../src/modules/rundowns/rundowns.repository.js';
import { RUNDOWN_CLAIM_LEASE_MS } from '../../src/modules/rundowns/rundowns.service.js';
import { deliveriesRepository } from '../../src/modules/webhooks/webhooks.repository.js';
import { createTestApp, useTestApp, type TestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';
import { parseExposition, type Exposition } from '../helpers/metrics.js';
import { emit, startWorker, waitFor } from '../modules/webhooks/delivery-helpers.js';
import { freePort, startServer, type TestServer } from '../modules/webhooks/helpers.js';

const TOKEN = 'metrics-token-0123456789abcdef';
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

async function scrape(t: TestApp, token = TOKEN): Promise<Exposition> {
  const r = await fetch(`${t.baseUrl}/metrics`, { headers: { authorization: `Bearer ${token}` } });
  const text = await r.text();
  assert.equal(r.status, 200, text);
  assert.equal(r.headers.get('content-type'), CONTENT_TYPE);
  return parseExposition(text);
}

/**
 * The metric families README.md's Metrics table names, with their types and the setting they need when the row says
 * "with `SETTING` only". A cell may name several, the later ones shortened to the suffix that differs
 * (`parley_event_loop_lag_p50_seconds`, `…_p99_seconds`), with one type per name or one for all.
 */
function readmeMetrics(): Map<string, { type: string; onlyWith: string | undefined }> {
  const readme = readFileSync(new URL('../../README.md', import.meta.url), 'utf8');
  const found = new Map<string, { type: string; onlyWith: string | undefined }>();
  for (const line of readme.split('\n')) {
    const cells = /^\| (`parley_[^|]*)\| ([a-z, ]+) \|[^|]*\| (?:with `([A-Z_]+)` only:)?/.exec(line);
    if (!cells) continue;
    const names = [...cells[1]!.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    const types = cells[2]!.split(',').map((x) => x.trim());
    const first = names[0]!;
    names.forEach((name, i) => {
      const full = name.startsWith('…_') ? `${first.split('_').slice(0, -(name.split('_').length - 1)).join('_')}${name.slice(1)}` : name;
      found.set(full, { type: types.length === 1 ? types[0]! : types[i]!, onlyWith: cells[3] });
    });
  }
  assert.ok(found.size > 20, `README's Metrics table was read (${found.size} families)`);
  return found;
}

/** What a counter moved by between two scrapes (a series absent before counts from 0). */
const delta = (before: Exposition, after: Exposition, name: string, labels: Record<string, string>) =>
  (after.value(name, labels) ?? 0) - (before.value(name, labels) ?? 0);

for (const dialect of DIALECTS) {
  describe(`GET /metrics (${dialect})`, () => {
    // A fake clock: the queue figures are cached by it, and the age of a due delivery is measured with it.
    const t = useTestApp(dialect, { env: { METRICS_TOKEN: TOKEN, WEBHOOK_RETRY_DELAYS: '0,1h,1h,1h,1h', WEBHOOK_TIMEOUT: '2s' }, fakeClock: true });
    let rx: TestServer;
    before(async () => {
      // The path names the answer: /ok 200, /gone 410, anything else 500.
      rx = await startServer((req, res) => {
        res.writeHead(req.url === '/ok' ? 200 : req.url === '/gone' ? 410 : 500);
        res.end();
      });
      t.beforeClose(() => rx.close());
    });
    /**
     * The app's own worker, started once and stopped only at the end: stopping it closes the delivery engine the
     * API's test sends go through too.
     */
    let worker: ReturnType<typeof startWorker> | null = null;
    const ensureWorker = () => {
      if (worker) return;
      worker = startWorker(t);
      t.beforeClose(() => worker!.stop());
    };
    /** Past the queue figures' cache, so the next scrape reads the database. */
    const expireQueueCache = () => t.fakeClock.advance(QUEUE_CACHE_MS + 1);
    const hook = async (path: string, events = ['conversation.started']) => {
      const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}${path}`, events, secret: 'whsec_metrics' } });
      assert.equal(r.status, 201, r.text);
      return r.body.data.id as string;
    };

    test('refused without the token, with another token, or with an API key: 401 in the error envelope', async () => {
      const cases: Array<[string, Record<string, string>]> = [
        ['no header', {}],
        ['token with a character more', { authorization: `Bearer ${TOKEN}x` }],
        ['token with a character less', { authorization: `Bearer ${TOKEN.slice(0, -1)}` }],
        ['an API key', { authorization: `Bearer ${t.key}` }],
        ['Basic scheme', { authorization: `Basic ${Buffer.from(`x:${TOKEN}`).toString('base64')}` }],
        ['token without a scheme', { authorization: TOKEN }],
      ];
      for (const [what, headers] of cases) {
        const r = await fetch(`${t.baseUrl}/metrics`, { headers });
        assert.equal(r.status, 401, what);
        const body = (await r.json()) as { success: boolean; error: { code: string; message: string } };
        assert.equal(body.success, false, what);
        assert.equal(body.error.code, 'UNAUTHORIZED', what);
        assert.ok(!JSON.stringify(body).includes(TOKEN), 'the token is never echoed');
      }
      const ok = await fetch(`${t.baseUrl}/metrics`, { headers: { authorization: `bearer  ${TOKEN} ` } });
      assert.equal(ok.status, 200, 'the scheme in any case, spaces around the token, as for API keys');
      assert.equal(ok.headers.get('content-type'), CONTENT_TYPE);
      // Not an account's request: no rate-limit headers, nothing counted against anyone.
      assert.equal(ok.headers.get('x-ratelimit-limit'), null);
      await ok.text();
    });

    test('requests are counted by route pattern, method and status code, never by URL; the endpoint does not count itself', async () => {
      const before = await scrape(t);
      for (const id of ['doc_first_unknown', 'doc_second_unknown']) assert.equal((await t.request('GET', `/v1/documents/${id}`, { key: t.key })).status, 404);
      const created = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Returns', content: '30 days.' } });
      assert.equal(created.status, 201);
      assert.equal((await t.request('GET', `/v1/documents/${created.body.data.id}`, { key: t.key })).status, 200);
      assert.equal((await t.request('HEAD', `/v1/documents/${created.body.data.id}`, { key: t.key })).status, 200);
      assert.equal((await t.request('GET', '/v1/no/such/path/doc_third_unknown', { key: t.key })).status, 404);
      assert.equal((await t.request('GET', '/v1/documents')).status, 401);
      await scrape(t);
      const after = await scrape(t);

      const byId = { method: 'GET', route: '/v1/documents/:id' };
      assert.equal(delta(before, after, 'parley_http_requests_total', { ...byId, code: '404' }), 2);
      assert.equal(delta(before, after, 'parley_http_requests_total', { ...byId, code: '200' }), 1);
      assert.equal(delta(before, after, 'parley_http_requests_total', { method: 'HEAD', route: '/v1/documents/:id', code: '200' }), 1);
      assert.equal(delta(before, after, 'parley_http_requests_total', { method: 'POST', route: '/v1/documents', code: '201' }), 1);
      assert.equal(delta(before, after, 'parley_http_requests_total', { method: 'GET', route: '/v1/documents', code: '401' }), 1);
      assert.equal(delta(before, after, 'parley_http_requests_total', { method: 'GET', route: 'unmatched', code: '404' }), 1);
      // The URL asked for never becomes a label: one series per route, whatever ids are requested.
      for (const raw of ['doc_first_unknown', 'doc_third_unknown', created.body.data.id, '/no/such']) assert.ok(!after.text.includes(raw), raw);
      for (const s of after.matching('parley_http_requests_total')) assert.ok(s.labels.route === 'unmatched' || s.labels.route!.startsWith('/'), s.labels.route);
      // Three scrapes ran in between, none of them counted.
      assert.equal(after.value('parley_http_requests_total', { route: '/metrics' }), undefined);

      // The histogram: cumulative buckets at the documented bounds, +Inf equal to the count.
      const buckets = after.matching('parley_http_request_duration_seconds_bucket', byId);
      assert.deepEqual(
        buckets.map((b) => b.labels.le),
        [...DURATION_BUCKETS.map(String), '+Inf'],
      );
      for (let i = 1; i < buckets.length; i++) assert.ok(buckets[i]!.value >= buckets[i - 1]!.value);
      const count = after.value('parley_http_request_duration_seconds_count', byId)!;
      assert.equal(buckets.at(-1)!.value, count);
      assert.equal(delta(before, after, 'parley_http_request_duration_seconds_count', byId), 3);
      assert.ok(after.value('parley_http_request_duration_seconds_sum', byId)! > 0);
    });

    test('429s of the rate limiter are counted by budget and window', async () => {
      const limited = await t.account({ minute: 2, day: 1000 });
      const before = await scrape(t);
      const statuses = [];
      for (let i = 0; i < 4; i++) statuses.push((await t.request('GET', '/v1/faqs', { key: limited.key })).status);
      assert.deepEqual(statuses, [200, 200, 429, 429]);
      const after = await scrape(t);
      assert.equal(delta(before, after, 'parley_rate_limit_refusals_total', { budget: 'account', window: 'minute' }), 2);
      assert.equal(delta(before, after, 'parley_rate_limit_refusals_total', { budget: 'account', window: 'day' }), 0);
      assert.equal(delta(before, after, 'parley_http_requests_total', { method: 'GET', route: '/v1/faqs', code: '429' }), 2);
      // Without REDIS_URL there is nothing to fall back from.
      assert.equal(after.value('parley_rate_limit_redis_fallback'), undefined);
    });

    test('a due delivery nobody takes shows in the queue, its age on the clock; once a worker has sent it, it is gone and the attempt counted', async () => {
      await hook('/ok');
      expireQueueCache();
      const before = await scrape(t);
      assert.equal(before.value('parley_webhook_queue_up'), 1);
      await emit(t, t.accountId, 'conversation.started', { conversationId: 'conv_metrics', customerId: 'c1' });
      // Still the figures of the scrape before: cached.
      assert.equal((await scrape(t)).value('parley_webhook_deliveries_due'), before.value('parley_webhook_deliveries_due'));
      t.fakeClock.advance(90_000);
      const waiting = await scrape(t);
      assert.equal(waiting.value('parley_webhook_deliveries_due'), 1);
      assert.equal(waiting.value('parley_webhook_deliveries_pending'), 1);
      assert.equal(waiting.value('parley_webhook_deliveries_in_flight'), 0);
      assert.equal(waiting.value('parley_webhook_oldest_due_delivery_age_seconds'), 90);

      ensureWorker();
      await waitFor(() => rx.received.some((r) => r.url === '/ok'), 'the delivery');
      await waitFor(async () => (await scrape(t)).value('parley_webhook_attempts_total', { kind: 'auto', outcome: 'succeeded' }) === 1, 'the attempt counted');
      // Recorded (the lease released with the record) before the queue is read again.
      await waitFor(async () => {
        expireQueueCache();
        return (await scrape(t)).value('parley_webhook_deliveries_pending') === 0;
      }, 'the delivery recorded');
      const done = await scrape(t);
      assert.equal(done.value('parley_webhook_deliveries_due'), 0);
      assert.equal(done.value('parley_webhook_oldest_due_delivery_age_seconds'), 0);
      assert.equal(delta(before, done, 'parley_webhook_attempts_total', { kind: 'auto' }), 1);
    });

    test('attempts by kind and outcome: test sends, a failed automatic one that is retried, webhooks disabled', async () => {
      ensureWorker();
      const ok = await hook('/ok', ['escalation']);
      const gone = await hook('/gone', ['escalation']);
      const failing = await hook('/fails', ['escalation']);
      expireQueueCache();
      const before = await scrape(t);
      for (const id of [ok, gone, failing]) assert.equal((await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key })).status, 200);
      expireQueueCache();
      const after = await scrape(t);
      assert.equal(delta(before, after, 'parley_webhook_attempts_total', { kind: 'test', outcome: 'succeeded' }), 1);
      assert.equal(delta(before, after, 'parley_webhook_attempts_total', { kind: 'test', outcome: 'gone' }), 1);
      assert.equal(delta(before, after, 'parley_webhook_attempts_total', { kind: 'test', outcome: 'failed' }), 1);
      assert.equal(delta(before, after, 'parley_webhooks_disabled', {}), 1, 'the 410 disabled its webhook');

      // An event for the failing webhook: its first automatic attempt fails and the next is an hour away.
      await t.request('PUT', `/v1/webhooks/${ok}`, { key: t.key, body: { enabled: false } });
      await emit(t, t.accountId, 'escalation', { conversationId: 'conv_fail', reason: 'customer_request' });
      await waitFor(async () => (await scrape(t)).value('parley_webhook_attempts_total', { kind: 'auto', outcome: 'retrying' }), 'the failed attempt');
      const retrying = await waitFor(async () => {
        expireQueueCache();
        const m = await scrape(t);
        return m.value('parley_webhook_deliveries_in_flight') === 0 ? m : undefined;
      }, 'the failed attempt recorded');
      assert.equal(retrying.value('parley_webhook_deliveries_pending'), 1, 'pending: its next attempt is scheduled');
      assert.equal(retrying.value('parley_webhook_deliveries_due'), 0, 'but not due for an hour');
      assert.equal(retrying.value('parley_webhook_oldest_due_delivery_age_seconds'), 0);
      assert.equal(delta(before, retrying, 'parley_webhooks_disabled', {}), 2, 'disabled by its owner too');
    });

    test('chat replies are counted by kind and by who wrote them, once the exchange is written', async () => {
      const c = await t.request('POST', '/v1/chat/conversations', { key: t.key });
      assert.equal(c.status, 201, c.text);
      const id = c.body.data.conversation.id as string;
      const before = await scrape(t);
      for (const content of ['hello', 'what is the airspeed of an unladen swallow?', 'I want to talk to a human']) {
        assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content } })).status, 200);
      }
      const after = await scrape(t);
      assert.equal(delta(before, after, 'parley_assistant_replies_total', { kind: 'smalltalk', by: 'builtin' }), 1);
      assert.equal(delta(before, after, 'parley_assistant_replies_total', { kind: 'no_answer', by: 'builtin' }), 1);
      assert.equal(delta(before, after, 'parley_assistant_replies_total', { kind: 'handoff', by: 'builtin' }), 1);
      assert.equal(delta(before, after, 'parley_assistant_replies_total', {}), 3);
      // A message refused (the conversation ended) is no reply.
      await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: t.key });
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: 'hello' } })).status, 400);
      assert.equal(delta(after, await scrape(t), 'parley_assistant_replies_total', {}), 0);
      // No LLM configured: no LLM figures.
      assert.equal(after.types.has('parley_llm_failures_total'), false);
    });

    test('erasures by reason, and delivery history pruned by kind', async () => {
      const before = await scrape(t);
      const c = await t.request('POST', '/v1/chat/conversations', { key: t.key });
      const id = c.body.data.conversation.id as string;
      assert.equal((await t.request('DELETE', `/v1/conversations/${id}`, { key: t.key })).status, 200);
      // An ended conversation past the retention, erased by the worker's rule; then the history past its retention.
      const ended = await t.request('POST', '/v1/chat/conversations', { key: t.key });
      await t.request('POST', `/v1/chat/conversations/${ended.body.data.conversation.id}/end`, { key: t.key });
      t.fakeClock.advance(2 * 86_400_000);
      assert.ok((await t.ctx.services.conversations.eraseEnded(t.fakeClock.now() - 86_400_000)) >= 1);
      const pruned = await t.ctx.services.webhooks.pruneHistory(t.fakeClock.now() - 3_600_000);
      assert.ok(pruned.events > 0, "the earlier tests' events are past it");
      const after = await scrape(t);
      assert.equal(delta(before, after, 'parley_conversations_erased_total', { reason: 'request' }), 1);
      assert.ok(delta(before, after, 'parley_conversations_erased_total', { reason: 'retention' })! >= 1);
      assert.equal(delta(before, after, 'parley_history_pruned_total', { kind: 'events' }), pruned.events);
      assert.equal(delta(before, after, 'parley_history_pruned_total', { kind: 'deliveries' }), pruned.deliveries);
      // Transactions run again after a deadlock (test/db/deadlock-retry.test.ts makes one): reported, none here.
      for (const reason of ['deadlock', 'serialization']) assert.equal(typeof after.value('parley_db_transaction_retries_total', { reason }), 'number', reason);
    });

    test('process figures: version and dialect, uptime, memory, CPU, event-loop delay and busy time', async () => {
      const m = await scrape(t);
      assert.equal(m.matching('parley_info')[0]!.labels.dialect, dialect);
      assert.match(m.matching('parley_info')[0]!.labels.version!, /^\d+\.\d+\.\d+/);
      assert.ok(m.value('parley_process_uptime_seconds')! > 0);
      assert.ok(m.value('parley_process_resident_memory_bytes')! > 10 * 1024 * 1024);
      assert.ok(m.value('parley_process_heap_used_bytes')! > 0);
      assert.ok(m.value('parley_process_cpu_seconds_total')! > 0);
      assert.ok(m.value('parley_event_loop_busy_seconds_total')! > 0);
      // A blocked loop shows in the next scrape's delay. Node forgets the monitor's last tick when a scrape resets
      // it, so a stall is measured from the first tick after the scrape (10 ms later) on.
      await new Promise((r) => setTimeout(r, 30));
      const until = Date.now() + 120;
      while (Date.now() < until) {
        /* block the event loop */
      }
      await new Promise((r) => setTimeout(r, 30));
      const lagged = await scrape(t);
      assert.ok(lagged.value('parley_event_loop_lag_max_seconds')! >= 0.1, String(lagged.value('parley_event_loop_lag_max_seconds')));
      for (const name of ['parley_process_uptime_seconds', 'parley_event_loop_lag_p99_seconds']) assert.equal(m.types.get(name), 'gauge');
      assert.equal(m.types.get('parley_process_cpu_seconds_total'), 'counter');
    });

    test("README's Metrics table names exactly the families a scrape declares, with their types (those it says need REDIS_URL or LLM_BASE_URL: only with them)", async () => {
      const documented = readmeMetrics();
      const scraped = (await scrape(t)).types;
      const always = [...documented].filter(([, d]) => d.onlyWith === undefined);
      assert.deepEqual(always.map(([name]) => name).sort(), [...scraped.keys()].sort());
      for (const [name, d] of always) assert.equal(scraped.get(name), d.type, name);
      assert.deepEqual([...new Set([...documented.values()].map((d) => d.onlyWith).filter(Boolean))].sort(), ['LLM_BASE_URL', 'REDIS_URL']);
    });

    test('the OpenAPI document does not list it', async () => {
      const doc = await t.request('GET', '/v1/openapi.json');
      assert.equal(doc.status, 200);
      assert.ok(!Object.keys(doc.body.paths).some((p) => p.includes('metrics')), Object.keys(doc.body.paths).join(' '));
    });

    test('the queue is read once for concurrent scrapes, and a database that does not answer leaves it out rather than hanging the scrape', async () => {
      const real = deliveriesRepository.queueFigures;
      let reads = 0;
      try {
        deliveriesRepository.queueFigures = (...args) => {
          reads++;
          return real(...args);
        };
        expireQueueCache();
        const all = await Promise.all(Array.from({ length: 5 }, () => scrape(t)));
        assert.equal(reads, 1);
        for (const m of all) assert.equal(m.value('parley_webhook_queue_up'), 1);

        // A read that never answers: the scrape answers after QUEUE_WAIT_MS without the figures, the rest intact;
        // the next scrape waits for that same read instead of starting another.
        let release!: () => void;
        deliveriesRepository.queueFigures = (...args) => {
          reads++;
          return new Promise((resolve) => (release = () => resolve(real(...args))));
        };
        expireQueueCache();
        reads = 0;
        const started = Date.now();
        const [first, second] = await Promise.all([scrape(t), scrape(t)]);
        assert.ok(Date.now() - started < QUEUE_WAIT_MS + 1_500, `answered in ${Date.now() - started} ms`);
        assert.equal(reads, 1);
        for (const m of [first, second]) {
          assert.equal(m.value('parley_webhook_queue_up'), 0);
          assert.equal(m.value('parley_webhook_deliveries_due'), undefined);
          assert.ok(m.value('parley_process_uptime_seconds')! > 0);
        }
        release();
        await waitFor(async () => (await scrape(t)).value('parley_webhook_queue_up') === 1, 'the read to finish');

        deliveriesRepository.queueFigures = async () => {
          throw new Error('connection lost');
        };
        expireQueueCache();
        assert.equal((await scrape(t)).value('parley_webhook_queue_up'), 0);
      } finally {
        deliveriesRepository.queueFigures = real;
      }
    });
  });

  describe(`GET /metrics: the queue of accounts being deleted (${dialect})`, () => {
    // No worker here: the deliveries stay as written.
    const t = useTestApp(dialect, { env: { METRICS_TOKEN: TOKEN }, fakeClock: true });

    test("an account being deleted: its waiting deliveries leave the queue gauges (no worker sends them), another account's stay", async () => {
      const staying = await t.account();
      const going = await t.account();
      const now = t.fakeClock.now();
      let n = 0;
      const delivery = (accountId: string, nextAt: number, leaseOwner: string | null = null): DeliveriesTable => ({
        id: `dlv_deleting${String(n++).padStart(4, '0')}`, account_id: accountId, webhook_id: 'wh_x', event_id: null, event: 'conversation.started',
        url: 'http://127.0.0.1:9/x', secret: 's', body: '{}', status: 'pending', attempt_count: 0, auto_attempts: 0, next_attempt_at: nextAt,
        lease_owner: leaseOwner, lease_expires_at: leaseOwner ? now + 60_000 : null, created_at: now - 600_000, updated_at: now - 600_000,
      });
      await t.ctx.db
        .insertInto('deliveries')
        .values([
          delivery(going.accountId, now - 600_000), // due for ten minutes: the oldest
          delivery(going.accountId, now - 120_000),
          delivery(going.accountId, now),
          delivery(going.accountId, now + 3_600_000),
          delivery(going.accountId, now - 300_000, 'worker-a'), // claimed before the deletion: may still be sent
          delivery(staying.accountId, now - 60_000),
          delivery(staying.accountId, now),
          delivery(staying.accountId, now + 3_600_000),
        ])
        .execute();
      const all = await scrape(t);
      assert.equal(all.value('parley_webhook_deliveries_pending'), 8);
      assert.equal(all.value('parley_webhook_deliveries_due'), 5);
      assert.equal(all.value('parley_webhook_deliveries_in_flight'), 1);
      assert.equal(all.value('parley_webhook_oldest_due_delivery_age_seconds'), 600);

      // What `parley accounts delete` does first; its deliveries go in the transactions after.
      await t.ctx.db.updateTable('accounts').set({ deletion_started_at: now }).where('id', '=', going.accountId).execute();
      t.fakeClock.advance(QUEUE_CACHE_MS + 1);
      const m = await scrape(t);
      assert.equal(m.value('parley_webhook_queue_up'), 1);
      assert.equal(m.value('parley_webhook_deliveries_pending'), 4, "the other account's three, and the one held");
      assert.equal(m.value('parley_webhook_deliveries_due'), 2);
      assert.equal(m.value('parley_webhook_deliveries_in_flight'), 1);
      assert.equal(m.value('parley_webhook_oldest_due_delivery_age_seconds'), 60 + (QUEUE_CACHE_MS + 1) / 1000);
    });
  });

  describe(`GET /metrics: rundowns built, thrown away and claimed (${dialect})`, () => {
    const HOUR = 3_600_000;
    const T0 = Date.UTC(2026, 5, 1);
    // Hourly windows; the account is made half an hour into the first.
    const t = useTestApp(dialect, { env: { METRICS_TOKEN: TOKEN, RUNDOWN_INTERVAL: '1h' }, fakeClock: T0 + HOUR / 2 });

    test('digests built by trigger, scheduled ones thrown away, and claims taken or held by another worker', async () => {
      const before = await scrape(t);
      const manual = await t.request('POST', '/v1/rundowns', { key: t.key, body: { from: new Date(T0).toISOString(), to: new Date(T0 + HOUR).toISOString() } });
      assert.equal(manual.status, 201, manual.text);

      // Three windows are missing; another worker is building the second (its claim), so this run makes the first and
      // leaves the second and the third to that worker.
      t.fakeClock.set(T0 + 3 * HOUR + 60_000);
      const second = { from: T0 + HOUR, to: T0 + 2 * HOUR };
      const at = t.fakeClock.now();
      assert.ok(await rundownsRepository.claimWindow(t.ctx.db, t.accountId, second, 'another-worker', at, at + RUNDOWN_CLAIM_LEASE_MS));
      assert.equal(await t.ctx.services.rundowns.generateDue(), 1);
      // That worker gave up its claim, and stored the second window's rundown while this one was building it too (as a
      // worker whose claim expired mid-build does): this digest is thrown away; the third is made.
      await rundownsRepository.dropClaim(t.ctx.db, t.accountId, second);
      const analytics = t.ctx.services.analytics;
      const figures = analytics.figures.bind(analytics);
      analytics.figures = async (...args: Parameters<typeof figures>) => {
        const [accountId, p, trx] = args;
        if (p.from === second.from && p.to === second.to && trx) {
          await trx
            .insertInto('rundowns')
            .values({ id: 'rd_other_worker', account_id: accountId, trigger: 'schedule', from_ts: second.from, to_ts: second.to, figures: '{}', body: '{}', created_at: at })
            .execute();
        }
        return figures(...args);
      };
      try {
        assert.equal(await t.ctx.services.rundowns.generateDue(), 1);
      } finally {
        analytics.figures = figures;
      }

      const after = await scrape(t);
      assert.equal(delta(before, after, 'parley_rundowns_built_total', { trigger: 'manual' }), 1);
      assert.equal(delta(before, after, 'parley_rundowns_built_total', { trigger: 'schedule' }), 3);
      assert.equal(delta(before, after, 'parley_rundowns_discarded_total', {}), 1);
      assert.equal(delta(before, after, 'parley_rundown_claims_total', { outcome: 'taken' }), 3);
      assert.equal(delta(before, after, 'parley_rundown_claims_total', { outcome: 'held' }), 1);
      for (const name of ['parley_rundowns_built_total', 'parley_rundowns_discarded_total', 'parley_rundown_claims_total']) assert.equal(after.types.get(name), 'counter', name);
      assert.equal(delta(before, after, 'parley_rundowns_failed_total', {}), 0);
    });

    test('scheduled windows whose build failed are counted, and counted again when the next run fails too', async () => {
      const before = await scrape(t);
      // The next hourly window is complete; its build fails (a bug, a query refused) on two runs, then succeeds.
      t.fakeClock.set(T0 + 4 * HOUR + 60_000);
      const analytics = t.ctx.services.analytics;
      const figures = analytics.figures.bind(analytics);
      let failures = 2;
      analytics.figures = async (...args: Parameters<typeof figures>) => {
        if (failures > 0) {
          failures--;
          throw new Error('figures refused');
        }
        return figures(...args);
      };
      try {
        assert.equal(await t.ctx.services.rundowns.generateDue(), 0);
        assert.equal(await t.ctx.services.rundowns.generateDue(), 0);
        assert.equal(await t.ctx.services.rundowns.generateDue(), 1);
      } finally {
        analytics.figures = figures;
      }
      const after = await scrape(t);
      assert.equal(delta(before, after, 'parley_rundowns_failed_total', {}), 2);
      assert.equal(after.types.get('parley_rundowns_failed_total'), 'counter');
      assert.equal(delta(before, after, 'parley_rundowns_built_total', { trigger: 'schedule' }), 3, 'the failed builds count as built: they read the window');
    });
  });

  describe(`GET /metrics without METRICS_TOKEN (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('is an unknown path: 404, with the rate-limit headers of a valid key as for any other', async () => {
      assert.equal(t.ctx.metrics, null);
      const anon = await t.request('GET', '/metrics', { headers: { authorization: `Bearer ${TOKEN}` } });
      assert.equal(anon.status, 404);
      assert.deepEqual(anon.body, { success: false, error: { code: 'NOT_FOUND', message: 'no route GET /metrics' } });
      const keyed = await t.request('GET', '/metrics', { key: t.key });
      assert.equal(keyed.status, 404);
      assert.ok(keyed.headers.get('x-ratelimit-limit'));
    });
  });
}

// The rate limiter's Redis fallback does not depend on the database: SQLite only.
describe('GET /metrics: Redis fallback of the rate limiter', () => {
  let down: TestApp;
  let up: TestApp;
  before(async () => {
    down = await createTestApp('sqlite', { env: { METRICS_TOKEN: TOKEN }, redisUrl: `redis://127.0.0.1:${await freePort()}` });
    up = await createTestApp('sqlite', { env: { METRICS_TOKEN: TOKEN }, redisUrl: 'redis://127.0.0.1:6379' });
  });
  after(async () => {
    await down?.close();
    await up?.close();
  });

  test('1 while this node counts on its own because Redis does not answer, 0 while Redis shares the counts', async () => {
    const a = await down.account();
    assert.equal((await down.request('GET', '/v1/faqs', { key: a.key })).status, 200, 'served all the same');
    const scraped = await scrape(down);
    assert.equal(scraped.value('parley_rate_limit_redis_fallback'), 1);
    for (const [name, d] of readmeMetrics()) if (d.onlyWith === 'REDIS_URL') assert.equal(scraped.types.get(name), d.type, `${name}, as README says`);
    await up.limiter.ready();
    const b = await up.account();
    assert.equal((await up.request('GET', '/v1/faqs', { key: b.key })).status, 200);
    assert.equal((await scrape(up)).value('parley_rate_limit_redis_fallback'), 0);
  });
});

// The LLM's failures do not depend on the database: SQLite only.
describe('GET /metrics: the LLM', () => {
  let t: TestApp;
  let llm: TestServer;
  let mode: 'ok' | 'error' = 'error';
  let key: string;
  before(async () => {
    llm = await startServer((req, res, body) => {
      if (mode === 'error') return res.writeHead(500).end('{"error":"boom"}');
      const first = /^\[(\S+)\]/m.exec(JSON.parse(body.toString()).messages[0].content)![1];
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: `Refunds take a week.\nSOURCES: ${first}` } }] }));
    });
    t = await createTestApp('sqlite', { env: { METRICS_TOKEN: TOKEN, LLM_BASE_URL: `${llm.url}/v1`, LLM_TIMEOUT: '2s' }, fakeClock: true });
    ({ key } = await t.account());
    const f = await t.request('POST', '/v1/faqs', { key, body: { question: 'How long do refunds take?', answer: 'Refunds take 5 to 10 business days.', category: 'returns' } });
    assert.equal(f.status, 201);
  });
  after(async () => {
    try {
      await t?.close();
    } finally {
      await llm.close();
    }
  });
  const ask = async () => {
    const c = await t.request('POST', '/v1/chat/conversations', { key });
    const r = await t.request('POST', `/v1/chat/conversations/${c.body.data.conversation.id}/messages`, { key, body: { content: 'how long do refunds take?' } });
    assert.equal(r.status, 200, r.text);
  };

  test('failures by reason, the pause after three in a row, and who wrote the replies', async () => {
    const before = await scrape(t);
    assert.equal(before.value('parley_llm_paused'), 0);
    for (const [name, d] of readmeMetrics()) if (d.onlyWith === 'LLM_BASE_URL') assert.equal(before.types.get(name), d.type, `${name}, as README says`);
    for (let i = 0; i < 4; i++) await ask();
    const failing = await scrape(t);
    assert.equal(delta(before, failing, 'parley_llm_failures_total', { reason: 'http_status' }), 3);
    assert.equal(delta(before, failing, 'parley_llm_failures_total', { reason: 'paused' }), 1, 'the fourth is not sent: the endpoint is paused');
    assert.equal(failing.value('parley_llm_paused'), 1);
    assert.equal(delta(before, failing, 'parley_assistant_replies_total', { kind: 'answer', by: 'builtin' }), 4);

    mode = 'ok';
    (t.clock as FakeClock).advance(60_000);
    await ask();
    const back = await scrape(t);
    assert.equal(back.value('parley_llm_paused'), 0);
    assert.equal(delta(failing, back, 'parley_assistant_replies_total', { kind: 'answer', by: 'llm' }), 1);
    assert.equal(delta(failing, back, 'parley_llm_failures_total', {}), 0);
  });
});
