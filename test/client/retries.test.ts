// Retries, timeouts and connection errors against a small fake server on 127.0.0.1: these are about the client's
// HTTP behaviour (what the real service answers is covered by client.test.ts over both dialects), and a fake server
// is the only way to make the service answer 503 or stall on cue. No database is involved, so they run once.
import assert from 'node:assert/strict';
import type http from 'node:http';
import { after, describe, test } from 'node:test';
import { Parley, ParleyConnectionError, ParleyError, ParleyTimeoutError, MAX_RETRY_AFTER_SECONDS } from '../../src/client/index.js';
import { backoffMs } from '../../src/client/transport.js';
import { freePort, startServer, type TestServer } from '../modules/webhooks/helpers.js';

type Reply = { status: number; headers?: Record<string, string>; body?: unknown } | 'hang';

const ok = (data: unknown): Reply => ({ status: 200, body: { success: true, data } });
const fail = (status: number, code: string, message: string, headers: Record<string, string> = {}): Reply => ({
  status,
  headers,
  body: { success: false, error: { code, message } },
});
const PAGE = { documents: [], total: 0, limit: 20, offset: 0 };

interface Fake {
  server: TestServer;
  /** When each request arrived (ms), in order. */
  times: number[];
  client(opts?: { maxRetries?: number; timeoutMs?: number }): Parley;
}

const servers: TestServer[] = [];
after(() => Promise.all(servers.map((s) => s.close())));

/** A server answering the given replies in order (the last one again once they run out). */
async function fake(replies: Reply[]): Promise<Fake> {
  const times: number[] = [];
  let i = 0;
  const server = await startServer((_req, res: http.ServerResponse) => {
    times.push(Date.now());
    const r = replies[Math.min(i++, replies.length - 1)]!;
    if (r === 'hang') return; // never answers; closed with the server
    res.writeHead(r.status, { 'content-type': 'application/json', 'x-request-id': `req_fake_${i}`, ...r.headers });
    res.end(typeof r.body === 'string' ? r.body : JSON.stringify(r.body));
  });
  servers.push(server);
  return { server, times, client: (o = {}) => new Parley({ apiKey: 'sk_test', baseUrl: server.url, ...o }) };
}

async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (err) {
    return err;
  }
  assert.fail('the call succeeded');
}

describe('client retries', () => {
  test('429 with Retry-After: 1, then 200: waits a second and resends the POST with the same Idempotency-Key', async () => {
    const f = await fake([fail(429, 'RATE_LIMITED', 'slow down', { 'retry-after': '1' }), { status: 201, body: { success: true, data: { id: 'doc_1' } } }]);
    const doc = await f.client().documents.create({ title: 't', content: 'c' });
    assert.deepEqual(doc, { id: 'doc_1' });
    const [first, second] = f.server.received;
    assert.equal(f.server.received.length, 2);
    const key = first!.headers['idempotency-key'];
    assert.match(String(key), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    assert.equal(second!.headers['idempotency-key'], key);
    assert.equal(second!.body.toString(), first!.body.toString());
    assert.equal(first!.headers.authorization, 'Bearer sk_test');
    assert.equal(first!.url, '/v1/documents');
    const waited = f.times[1]! - f.times[0]!;
    assert.ok(waited >= 1000 && waited < 2500, `waited ${waited} ms`);
  });

  test('a 500 with Retry-After (a full or locked database) waits that long, not the half-second backoff, then resends', async () => {
    const f = await fake([fail(500, 'SERVER_ERROR', 'the service cannot handle this request right now; retry in 2 s (request req_x)', { 'retry-after': '2' }), ok(PAGE)]);
    assert.deepEqual(await f.client().documents.list(), PAGE);
    const waited = f.times[1]! - f.times[0]!;
    assert.ok(waited >= 2000 && waited < 3500, `waited ${waited} ms`);
  });

  test('each POST call gets its own key; a key passed in is the one sent on every attempt', async () => {
    const f = await fake([fail(500, 'SERVER_ERROR', 'boom'), ok({ id: 'doc_2' }), ok({ id: 'doc_3' })]);
    const parley = f.client();
    await parley.documents.create({ title: 't', content: 'c' }, { idempotencyKey: 'my-key-1' });
    await parley.documents.create({ title: 't', content: 'c' });
    assert.deepEqual(f.server.received.map((r) => r.headers['idempotency-key']).slice(0, 2), ['my-key-1', 'my-key-1']);
    assert.notEqual(f.server.received[2]!.headers['idempotency-key'], 'my-key-1');
    assert.equal(f.server.received[2]!.headers['idempotency-key']?.length, 36);
  });

  test('a Retry-After past the cap is not waited out: the 429 is thrown at once with retryAfter', async () => {
    const f = await fake([fail(429, 'RATE_LIMITED', 'daily limit', { 'retry-after': String(MAX_RETRY_AFTER_SECONDS + 1) }), ok(PAGE)]);
    const started = Date.now();
    const e = await rejection(f.client().documents.list());
    assert.ok(e instanceof ParleyError);
    assert.equal(e.code, 'RATE_LIMITED');
    assert.equal(e.retryAfter, MAX_RETRY_AFTER_SECONDS + 1);
    assert.equal(f.server.received.length, 1);
    assert.ok(Date.now() - started < 1000);
  });

  test('503 then 200 for a GET: retried after a backoff, answers the page', async () => {
    const f = await fake([{ status: 503, body: '<html>upstream unavailable</html>' }, ok({ ...PAGE, total: 7 })]);
    const page = await f.client().documents.list({ status: 'draft', limit: 5 });
    assert.equal(page.total, 7);
    assert.equal(f.server.received.length, 2);
    assert.equal(f.server.received[1]!.url, '/v1/documents?status=draft&limit=5');
    assert.equal(f.server.received[0]!.headers['idempotency-key'], undefined, 'a GET carries no key');
    const waited = f.times[1]! - f.times[0]!;
    assert.ok(waited >= 250 && waited < 1500, `waited ${waited} ms`);
  });

  test('PUT and DELETE are retried on 5xx as well', async () => {
    const f = await fake([fail(502, 'SERVER_ERROR', 'x'), ok({ deleted: true }), fail(500, 'SERVER_ERROR', 'x'), ok({ id: 'doc_1' })]);
    const parley = f.client();
    assert.deepEqual(await parley.documents.delete('doc_1'), { deleted: true });
    assert.deepEqual(await parley.documents.update('doc_1', { title: 'x' }), { id: 'doc_1' });
    assert.deepEqual(f.server.received.map((r) => r.method), ['DELETE', 'DELETE', 'PUT', 'PUT']);
  });

  test('gives up after maxRetries, throwing the last answer', async () => {
    const f = await fake([fail(500, 'SERVER_ERROR', 'internal server error (request req_x)')]);
    const e = await rejection(f.client({ maxRetries: 1 }).documents.get('doc_1'));
    assert.ok(e instanceof ParleyError);
    assert.equal(e.code, 'SERVER_ERROR');
    assert.equal(e.status, 500);
    assert.equal(e.requestId, 'req_fake_2');
    assert.equal(f.server.received.length, 2);
  });

  test('a POST answered 400 is not retried', async () => {
    const f = await fake([fail(400, 'INVALID_REQUEST', 'body.title must not be empty'), ok({ id: 'doc_1' })]);
    const e = await rejection(f.client().documents.create({ title: '', content: 'c' }));
    assert.ok(e instanceof ParleyError);
    assert.equal(e.code, 'INVALID_REQUEST');
    assert.equal(e.message, 'body.title must not be empty');
    assert.equal(f.server.received.length, 1);
  });

  test('no 4xx but 429 is retried: 401, 403, 404', async () => {
    for (const [status, code] of [[401, 'UNAUTHORIZED'], [403, 'FORBIDDEN'], [404, 'NOT_FOUND']] as const) {
      const f = await fake([fail(status, code, 'no'), ok(PAGE)]);
      const e = await rejection(f.client().documents.list());
      assert.ok(e instanceof ParleyError && e.code === code);
      assert.equal(f.server.received.length, 1, `${status} was retried`);
    }
  });

  test('an answer that is not the envelope still throws a ParleyError with a code of the set', async () => {
    const f = await fake([{ status: 502, body: '<html>Bad gateway</html>' }, { status: 200, body: '{"not":"an envelope"}' }]);
    const e = await rejection(f.client({ maxRetries: 0 }).documents.list());
    assert.ok(e instanceof ParleyError);
    assert.equal(e.code, 'SERVER_ERROR');
    assert.equal(e.status, 502);
    assert.match(e.message, /not a Parley answer: <html>Bad gateway/);
    const e2 = await rejection(f.client().documents.list());
    assert.ok(e2 instanceof ParleyError);
    assert.match(e2.message, /without Parley's success envelope/);
  });

  test('a timeout throws ParleyTimeoutError; with retries left it is tried again', async () => {
    const f = await fake(['hang']);
    const started = Date.now();
    const e = await rejection(f.client({ timeoutMs: 200, maxRetries: 0 }).documents.list());
    assert.ok(e instanceof ParleyTimeoutError, String(e));
    assert.ok(e instanceof ParleyConnectionError);
    assert.equal(e.name, 'ParleyTimeoutError');
    assert.match(e.message, /no answer within 200 ms/);
    const took = Date.now() - started;
    assert.ok(took >= 190 && took < 1500, `took ${took} ms`);
    assert.equal(f.server.received.length, 1);

    const again = await rejection(f.client({ timeoutMs: 5_000 }).documents.create({ title: 't', content: 'c' }, { timeoutMs: 100, maxRetries: 1 }));
    assert.ok(again instanceof ParleyTimeoutError);
    assert.equal(f.server.received.length, 3);
    assert.equal(f.server.received[1]!.headers['idempotency-key'], f.server.received[2]!.headers['idempotency-key']);
  });

  test('a refused connection throws ParleyConnectionError (not a timeout) after its retries', async () => {
    const port = await freePort();
    const parley = new Parley({ apiKey: 'sk_test', baseUrl: `http://127.0.0.1:${port}`, maxRetries: 1 });
    const e = await rejection(parley.documents.list());
    assert.ok(e instanceof ParleyConnectionError, String(e));
    assert.ok(!(e instanceof ParleyTimeoutError));
    assert.match(e.message, /ECONNREFUSED/);
  });

  test("the caller's signal aborts the call and its wait, without a retry", async () => {
    const f = await fake([fail(503, 'SERVER_ERROR', 'x', { 'retry-after': '30' })]);
    const controller = new AbortController();
    const started = Date.now();
    setTimeout(() => controller.abort(new Error('stop')), 150);
    const e = await rejection(f.client().documents.list({}, { signal: controller.signal }));
    assert.equal((e as Error).message, 'stop');
    assert.ok(Date.now() - started < 1000);
    assert.equal(f.server.received.length, 1);
  });

  test('rate-limit headers and the request id are read from each answer', async () => {
    const f = await fake([{ status: 200, body: { success: true, data: PAGE }, headers: { 'x-ratelimit-limit': '300', 'x-ratelimit-remaining': '299', 'x-ratelimit-reset': '1790000040' } }]);
    const parley = f.client();
    await parley.documents.list();
    assert.deepEqual(parley.lastRateLimit, { limit: 300, remaining: 299, reset: 1790000040 });
  });

  test('the backoff doubles from 0.5 s with jitter, up to 8 s', () => {
    for (let i = 0; i < 200; i++) {
      const [a, b, c, far] = [backoffMs(0), backoffMs(1), backoffMs(2), backoffMs(10)];
      assert.ok(a >= 250 && a <= 500, String(a));
      assert.ok(b >= 500 && b <= 1000, String(b));
      assert.ok(c >= 1000 && c <= 2000, String(c));
      assert.ok(far >= 4000 && far <= 8000, String(far));
    }
  });
});
