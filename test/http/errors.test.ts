import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { describe, test } from 'node:test';
import { buildApp } from '../../src/app.js';
import { createTestApp, useTestApp, type TestResponse } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

const LEAK = /at \S+ \(|\.ts:\d+|node_modules|SELECT|INSERT|sqlite|relation|no such table|syntax error|stack/i;

function assertFailure(r: { status: number; text: string; body: any; headers: Headers }, status: number, code: string, message?: RegExp) {
  assert.equal(r.status, status, r.text);
  assert.match(r.headers.get('content-type') ?? '', /^application\/json/);
  assert.deepEqual(r.body, { success: false, error: { code, message: r.body?.error?.message } }, r.text);
  assert.equal(typeof r.body.error.message, 'string');
  assert.ok(r.body.error.message.length > 0);
  if (message) assert.match(r.body.error.message, message);
  assert.doesNotMatch(r.text, LEAK);
  assert.match(r.headers.get('x-request-id') ?? '', /\S/);
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
}

for (const dialect of DIALECTS) {
  describe(`error envelope (${dialect})`, () => {
    const t = useTestApp(dialect);

    const json = { 'content-type': 'application/json' };

    /** Sends raw bytes and reads the whole answer (the server closes the connection after a refusal). */
    const raw = (bytes: string) =>
      new Promise<{ status: number; contentType: string; body: any }>((resolve, reject) => {
        const url = new URL(t.baseUrl);
        const socket = connect(Number(url.port), url.hostname, () => socket.write(bytes));
        let got = '';
        socket.setEncoding('utf8').on('data', (d) => (got += d)).on('error', reject).on('close', () => {
          const [head, body = ''] = got.split('\r\n\r\n');
          resolve({ status: Number(/^HTTP\/1\.1 (\d+)/.exec(head ?? '')?.[1]), contentType: /content-type: ([^\r]+)/i.exec(head ?? '')?.[1] ?? '', body: body ? JSON.parse(body) : null });
        });
      });

    test("requests Node's HTTP parser refuses still get the envelope", async () => {
      const bad = await raw('GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Bad: a\u0001b\r\n\r\n');
      assert.equal(bad.status, 400);
      assert.match(bad.contentType, /^application\/json/);
      assert.deepEqual(bad.body, { success: false, error: { code: 'INVALID_REQUEST', message: 'the HTTP request is malformed' } });
      const huge = await raw(`GET /v1/health HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`);
      assert.equal(huge.status, 400);
      assert.deepEqual(huge.body, { success: false, error: { code: 'INVALID_REQUEST', message: 'the request headers are too large' } });
      // the server is still serving
      assert.equal((await t.request('GET', '/v1/health')).status, 200);
    });

    test('unknown route: 404 NOT_FOUND envelope, with or without a key', async () => {
      for (const path of ['/', '/v1', '/v2/documents', '/v1/nope', '/v1/documents/a/b', '/documents']) {
        assertFailure(await t.request('GET', path), 404, 'NOT_FOUND', /no route GET/);
        assertFailure(await t.request('GET', path, { key: t.key }), 404, 'NOT_FOUND');
      }
    });

    test('a trailing slash after a collection is no route, whatever the method (an empty id is not an id)', async () => {
      for (const [method, path] of [
        ['GET', '/v1/documents/'],
        ['PUT', '/v1/documents/'],
        ['DELETE', '/v1/documents/'],
        ['POST', '/v1/documents/'],
        ['GET', '/v1/faqs/'],
        ['GET', '/v1/webhooks/'],
        ['GET', '/v1/conversations/'],
        ['GET', '/v1/webhooks//deliveries'],
      ] as const) {
        const body = method === 'GET' || method === 'DELETE' ? undefined : { title: 'x' };
        assertFailure(await t.request(method, path, { key: t.key, ...(body ? { body } : {}) }), 404, 'NOT_FOUND', new RegExp(`no route ${method}`));
      }
    });

    test('method not allowed answers 404 NOT_FOUND (the code set has no 405)', async () => {
      for (const [method, path] of [
        ['PATCH', '/v1/documents'],
        ['PATCH', '/v1/documents/doc_x'],
        ['PUT', '/v1/documents'],
        ['DELETE', '/v1/faqs'],
        ['POST', '/v1/faqs/faq_x'],
      ] as const) {
        assertFailure(await t.request(method, path, { key: t.key, body: { title: 'x' } }), 404, 'NOT_FOUND', new RegExp(`no route ${method}`));
      }
    });

    test('malformed JSON: 400 INVALID_REQUEST', async () => {
      for (const raw of ['{', '{"title": "a",}', "{'title':'a'}", 'undefined', '{"a":1}{"b":2}']) {
        assertFailure(await t.request('POST', '/v1/documents', { key: t.key, raw, headers: json }), 400, 'INVALID_REQUEST', /body is not valid JSON/);
      }
      assertFailure(await t.request('PUT', '/v1/faqs/faq_x', { key: t.key, raw: '[1,', headers: json }), 400, 'INVALID_REQUEST', /not valid JSON/);
    });

    test('empty body where one is needed: 400 naming it', async () => {
      assertFailure(await t.request('POST', '/v1/documents', { key: t.key, raw: '', headers: json }), 400, 'INVALID_REQUEST', /body is empty/);
      // ...while a bodiless DELETE sent with Content-Type: application/json is fine
      const c = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 't', content: 'c' } });
      const d = await t.request('DELETE', `/v1/documents/${c.body.data.id}`, { key: t.key, raw: '', headers: json });
      assert.equal(d.status, 200);
    });

    test('JSON that is not an object: 400 body must be of type object', async () => {
      for (const raw of ['null', '42', '"text"', 'true', '[]', '[{"title":"a","content":"b"}]']) {
        assertFailure(await t.request('POST', '/v1/faqs', { key: t.key, raw, headers: json }), 400, 'INVALID_REQUEST', /body must be of type object/);
      }
    });

    test('wrong or missing content type: 400 INVALID_REQUEST naming Content-Type', async () => {
      for (const type of ['text/plain', 'text/html', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml']) {
        assertFailure(
          await t.request('POST', '/v1/documents', { key: t.key, raw: '{"title":"a","content":"b"}', headers: { 'content-type': type } }),
          400,
          'INVALID_REQUEST',
          /Content-Type must be application\/json/,
        );
      }
      // A Uint8Array body makes fetch send no Content-Type at all.
      const res = await fetch(`${t.baseUrl}/v1/documents`, {
        method: 'POST',
        headers: { authorization: `Bearer ${t.key}` },
        body: new TextEncoder().encode('{"title":"a","content":"b"}'),
      });
      const text = await res.text();
      assertFailure({ status: res.status, text, body: JSON.parse(text), headers: res.headers }, 400, 'INVALID_REQUEST', /Content-Type must be application\/json/);
    });

    test('body over 1 MiB: 400 INVALID_REQUEST naming the limit; just under is accepted', async () => {
      const big = JSON.stringify({ title: 't', content: 'x'.repeat(1024 * 1024) });
      assertFailure(await t.request('POST', '/v1/documents', { key: t.key, raw: big, headers: json }), 400, 'INVALID_REQUEST', /1 MiB/);
      // 1 MiB of body is allowed by the transport; the document content rule (500,000) is what refuses this one
      const under = JSON.stringify({ title: 't', content: 'x'.repeat(1024 * 1024 - 40) });
      assert.ok(Buffer.byteLength(under) <= 1024 * 1024);
      assertFailure(await t.request('POST', '/v1/documents', { key: t.key, raw: under, headers: json }), 400, 'INVALID_REQUEST', /body\.content must be at most 500000/);
    });

    test('prototype-pollution keys are refused', async () => {
      for (const raw of [
        '{"title":"a","content":"b","__proto__":{"admin":true}}',
        '{"title":"a","content":"b","constructor":{"prototype":{"admin":true}}}',
        '{"title":"a","content":"b","\\u005f_proto__":{}}',
      ]) {
        assertFailure(await t.request('POST', '/v1/documents', { key: t.key, raw, headers: json }), 400, 'INVALID_REQUEST', /__proto__/);
      }
      assert.equal(({} as any).admin, undefined);
    });

    test('undecodable URL and over-long path parameter still answer the envelope', async () => {
      assertFailure(await t.request('GET', '/v1/documents/%E0%A4%A', { key: t.key }), 400, 'INVALID_REQUEST', /URL is not valid/);
      assertFailure(await t.request('GET', `/v1/documents/${'a'.repeat(150)}`, { key: t.key }), 400, 'INVALID_REQUEST', /longer than 100/);
      assertFailure(await t.request('GET', `/v1/documents/${'a'.repeat(80)}`, { key: t.key }), 400, 'INVALID_REQUEST', /path\.id must be at most 64/);
    });

    test('an unexpected failure (a table dropped under the app) answers 500 SERVER_ERROR with a generic message and the request id', async () => {
      const { key: k } = await t.account();
      const c = await t.request('POST', '/v1/faqs', { key: k, body: { question: 'q', answer: 'a', category: 'c' } });
      assert.equal(c.status, 201);
      await t.ctx.db.schema.dropTable('faqs').execute();
      for (const [method, path, body] of [
        ['GET', '/v1/faqs'],
        ['GET', `/v1/faqs/${c.body.data.id}`],
        ['POST', '/v1/faqs', { question: 'q', answer: 'a', category: 'c' }],
      ] as const) {
        const r = await t.request(method, path, { key: k, body, headers: { 'x-request-id': 'client-trace-42' } });
        assertFailure(r, 500, 'SERVER_ERROR', /^internal server error \(request client-trace-42\)$/);
        assert.equal(r.headers.get('x-request-id'), 'client-trace-42');
      }
      // the rest of the service is unaffected
      assert.equal((await t.request('GET', '/v1/documents', { key: k })).status, 200);
    });

    test('every response carries x-request-id and nosniff; a sane incoming request id is echoed, a hostile one replaced', async () => {
      const responses: TestResponse[] = [
        await t.request('GET', '/v1/documents', { key: t.key }),
        await t.request('POST', '/v1/documents', { key: t.key, body: { title: 't', content: 'c' } }),
        await t.request('GET', '/v1/documents'),
        await t.request('GET', '/v1/nope'),
        await t.request('GET', '/v1/documents/%zz', { key: t.key }),
        await t.request('POST', '/v1/documents', { key: t.key, raw: '{', headers: json }),
        await t.request('GET', '/v1/health'),
        await t.request('GET', '/v1/openapi.json'),
      ];
      // And no browser guesses another type than the JSON declared (a 404 echoes the path asked for).
      for (const r of responses) assert.equal(r.headers.get('x-content-type-options'), 'nosniff', r.text);
      const ids = responses.map((r) => r.headers.get('x-request-id'));
      for (const id of ids) assert.match(id ?? '', /^req_[0-9a-f-]{36}$/);
      assert.equal(new Set(ids).size, ids.length, 'ids are unique');
      const echoed = await t.request('GET', '/v1/documents', { key: t.key, headers: { 'x-request-id': 'trace.abc-123' } });
      assert.equal(echoed.headers.get('x-request-id'), 'trace.abc-123');
      const hostile = await t.request('GET', '/v1/documents', { key: t.key, headers: { 'x-request-id': 'a b<script>' } });
      assert.match(hostile.headers.get('x-request-id')!, /^req_/);
    });
  });
}

describe('a route that throws', () => {
  test('500 SERVER_ERROR; the thrown message, its SQL and its stack never reach the client', async () => {
    const t = await createTestApp('sqlite');
    try {
      const app = await buildApp(t.ctx, { limiter: t.limiter });
      app.get('/v1/boom', async () => {
        const err = new Error('SELECT secret FROM api_keys WHERE hash = $1 failed');
        (err as any).sql = 'SELECT secret FROM api_keys';
        throw err;
      });
      app.get('/v1/boom-string', async () => {
        throw 'a bare string';
      });
      app.get('/v1/boom-status', async () => {
        throw Object.assign(new Error('upstream said 502'), { statusCode: 502 });
      });
      for (const url of ['/v1/boom', '/v1/boom-string', '/v1/boom-status']) {
        const r = await app.inject({ method: 'GET', url });
        assert.equal(r.statusCode, 500, url);
        const body = r.json();
        assert.deepEqual(body, { success: false, error: { code: 'SERVER_ERROR', message: `internal server error (request ${r.headers['x-request-id']})` } });
        assert.doesNotMatch(r.body, LEAK);
        assert.doesNotMatch(r.body, /secret|bare string|upstream/);
      }
      await app.close();
    } finally {
      await t.close();
    }
  });
});
