import assert from 'node:assert/strict';
import http from 'node:http';
import { before, describe, test } from 'node:test';
import fc from 'fast-check';
import { ERROR_STATUS } from '../../src/http/errors.js';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

const NUM_RUNS = Number(process.env.PROPERTY_RUNS ?? 120);
const agent = new http.Agent({ keepAlive: true, maxSockets: 4 });

interface RawResponse {
  status: number;
  headers: http.IncomingHttpHeaders;
  text: string;
}

/** node:http rather than fetch: fetch normalises `..` and percent-escapes, and these tests want the raw bytes sent. */
function raw(base: string, method: string, path: string, headers: Record<string, string>, body?: string | Buffer): Promise<RawResponse> {
  const url = new URL(base);
  return new Promise((resolve, reject) => {
    // Node's client sends a GET/DELETE body with neither Content-Length nor chunking unless told: say its length.
    const all = body === undefined ? headers : { ...headers, 'content-length': String(Buffer.byteLength(body)) };
    const req = http.request({ host: url.hostname, port: url.port, method, path, headers: all, agent }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
      res.on('error', reject);
    });
    req.on('error', reject);
    if (body !== undefined) req.end(body);
    else req.end();
  });
}

/** Every byte outside printable ASCII (and space) percent-encoded, the rest left exactly as generated. */
const pathSafe = (s: string) =>
  Array.from(s)
    .map((ch) => (/^[!-~]$/.test(ch) && ch !== '?' && ch !== '#' ? ch : encodeURIComponent(ch).replace(/%25/g, '%')))
    .join('');

const CODES = Object.keys(ERROR_STATUS);
const LEAK = /\bat \S+ \(|\.ts:\d+|node_modules|SELECT |INSERT |UPDATE |sqlite|relation "|syntax error|invalid byte sequence/i;

function assertEnvelope(r: RawResponse, what: string) {
  const ctx = `${what} → ${r.status} ${r.text.slice(0, 300)}`;
  assert.ok((r.status >= 200 && r.status < 300) || (r.status >= 400 && r.status < 500), `status: ${ctx}`);
  assert.ok(r.headers['x-request-id'], `x-request-id: ${ctx}`);
  if (r.status === 204) return;
  assert.match(String(r.headers['content-type']), /^application\/json/, ctx);
  const body = JSON.parse(r.text);
  assert.doesNotMatch(r.text, LEAK, ctx);
  if (r.status < 300) {
    assert.equal(body.success, true, ctx);
    assert.equal(typeof body.data, 'object', ctx);
    assert.deepEqual(Object.keys(body).sort(), ['data', 'success'], ctx);
  } else {
    assert.deepEqual(Object.keys(body).sort(), ['error', 'success'], ctx);
    assert.equal(body.success, false, ctx);
    assert.deepEqual(Object.keys(body.error).sort(), ['code', 'message'], ctx);
    assert.ok(CODES.includes(body.error.code), ctx);
    assert.equal(ERROR_STATUS[body.error.code as keyof typeof ERROR_STATUS], r.status, ctx);
    assert.equal(typeof body.error.message, 'string', ctx);
  }
}

// ---- arbitraries ----

const hostileString = fc.oneof(
  fc.string(),
  fc.string({ unit: 'grapheme', maxLength: 50 }),
  fc.string({ unit: 'binary', maxLength: 50 }),
  fc.constantFrom('', ' ', '\u0000', 'a\u0000b', '\ud800', '\udfff', '😀'.repeat(10), 'ﷺ', '\u202e', "'; DROP TABLE documents; --", '" OR 1=1 --', '%00', '../../etc/passwd', '${jndi:ldap://x}', '<script>alert(1)</script>'),
  fc.integer({ min: 900, max: 600_000 }).map((n) => 'x'.repeat(n)),
);

const slugish = fc.oneof(fc.constantFrom('shipping', 'returns-2', 'a', 'Bad Cat', '-x', 'x-', 'a--b'), hostileString);

const anyValue = fc.oneof(
  { depthSize: 'small' },
  hostileString,
  fc.integer(),
  fc.double(),
  fc.boolean(),
  fc.constant(null),
  fc.array(fc.string(), { maxLength: 5 }),
  fc.dictionary(fc.string(), fc.string(), { maxKeys: 3 }),
  fc.constantFrom('active', 'draft', 'approved', 'pending', 'all'),
);

const FIELDS = ['title', 'content', 'status', 'question', 'answer', 'category', 'id', 'createdAt', '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty'];

/** A plausible body: known fields (sometimes right, often wrong) plus hostile extras, serialised by hand so `__proto__` is a real key. */
const fieldBody = fc
  .array(fc.tuple(fc.oneof(fc.constantFrom(...FIELDS), fc.string({ maxLength: 20 })), fc.oneof(anyValue, slugish)), { maxLength: 6 })
  .map((pairs) => `{${pairs.map(([k, v]) => `${JSON.stringify(k)}:${JSON.stringify(v) ?? 'null'}`).join(',')}}`);

const deepNest = fc
  .tuple(fc.integer({ min: 1, max: 20_000 }), fc.constantFrom(['[', ']'], ['{"a":', '}'], ['{"__proto__":', '}']))
  .map(([n, [open, close]]) => `${open!.repeat(n)}1${close!.repeat(n)}`);

const rawBody = fc.oneof(
  fieldBody,
  fc.json({ depthSize: 'medium' }),
  fc.jsonValue().map((v) => JSON.stringify(v)),
  deepNest,
  fc.string({ maxLength: 200 }),
  fc.constantFrom('', 'null', '[]', '{}', '{"title":', '\u0000', '{"title":"a","content":"b","constructor":{"prototype":{"x":1}}}', '{"\\u005f_proto__":{}}'),
);

const contentType = fc.oneof(
  { weight: 6, arbitrary: fc.constant('application/json') },
  fc.constantFrom('application/json; charset=utf-8', 'text/plain', 'application/x-www-form-urlencoded', 'APPLICATION/JSON', 'application/jsonx', 'multipart/form-data', ';', 'application/json; charset=latin1'),
  fc.string({ maxLength: 30 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
);

const idSegment = fc.oneof(
  fc.constantFrom('doc_01jzz', 'faq_01jzz', '..', '../..', '..%2F..%2Fetc%2Fpasswd', '%2e%2e', '%00', '%', '%zz', '%E0%A4%A', "1'%20OR%20'1'='1", '1;DROP%20TABLE%20faqs', '%u0000', '*', '.'),
  fc.string({ minLength: 1, maxLength: 200 }).map(pathSafe),
  fc.string({ unit: 'binary', minLength: 1, maxLength: 40 }).map((s) => encodeURIComponent(s)),
  fc.integer({ min: 60, max: 400 }).map((n) => 'a'.repeat(n)),
);

const QUERY_KEYS = ['status', 'category', 'limit', 'offset', '__proto__', 'constructor', 'limit[]', 'sort', ''];
const queryString = fc
  .array(
    fc.tuple(
      fc.oneof(fc.constantFrom(...QUERY_KEYS), fc.string({ maxLength: 10 }).map(pathSafe)),
      fc.oneof(
        fc.constantFrom('1', '0', '-1', '20', '100', '101', '1e3', '0x10', 'NaN', 'Infinity', '2.5', '', 'all', 'draft', 'approved', 'shipping', '%', '%zz', '%00', "'%20OR%201=1"),
        fc.string({ maxLength: 120 }).map(pathSafe),
      ),
    ),
    { maxLength: 5 },
  )
  .map((pairs) => (pairs.length ? `?${pairs.map(([k, v]) => `${k}=${v}`).join('&')}` : ''));

const ROUTES = [
  ['GET', '/v1/documents', 'list'],
  ['POST', '/v1/documents', 'collection'],
  ['GET', '/v1/documents/', 'item'],
  ['PUT', '/v1/documents/', 'item'],
  ['DELETE', '/v1/documents/', 'item'],
  ['GET', '/v1/faqs', 'list'],
  ['POST', '/v1/faqs', 'collection'],
  ['GET', '/v1/faqs/', 'item'],
  ['PUT', '/v1/faqs/', 'item'],
  ['DELETE', '/v1/faqs/', 'item'],
] as const;

for (const dialect of DIALECTS) {
  describe(`hostile input never breaks the envelope (${dialect})`, () => {
    const t = useTestApp(dialect);
    const ids: string[] = [];
    before(async () => {
      // real ids too, so PUT and DELETE reach the database with hostile bodies
      for (let i = 0; i < 3; i++) {
        ids.push((await t.request('POST', '/v1/documents', { key: t.key, body: { title: `t${i}`, content: 'c' } })).body.data.id);
        ids.push((await t.request('POST', '/v1/faqs', { key: t.key, body: { question: `q${i}`, answer: 'a', category: 'c' } })).body.data.id);
      }
    });

    test('hostile bodies at every route that takes one', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom(...ROUTES),
          rawBody,
          contentType,
          fc.nat(),
          async ([method, path, kind], body, type, pick) => {
            const full = kind === 'item' ? `${path}${ids[pick % ids.length]}` : path;
            const r = await raw(t.baseUrl, method, full, { authorization: `Bearer ${t.key}`, 'content-type': type }, method === 'GET' ? undefined : body);
            assertEnvelope(r, `${method} ${full} [${type}] ${body.slice(0, 120)}`);
          },
        ),
        { numRuns: NUM_RUNS, includeErrorInReport: true },
      );
    });

    test('hostile ids and query strings at every route', async () => {
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...ROUTES), idSegment, queryString, fc.option(rawBody), async ([method, path, kind], id, qs, body) => {
          const full = `${kind === 'item' ? `${path}${id}` : path}${qs}`;
          const send = method === 'GET' || body === null ? undefined : body;
          const r = await raw(t.baseUrl, method, full, { authorization: `Bearer ${t.key}`, ...(send !== undefined ? { 'content-type': 'application/json' } : {}) }, send);
          assertEnvelope(r, `${method} ${full}`);
        }),
        { numRuns: NUM_RUNS, includeErrorInReport: true },
      );
    });

    test('hostile Authorization headers never reach 5xx', async () => {
      const header = fc.oneof(
        fc.string({ maxLength: 300 }).filter((s) => /^[\x20-\x7e]*$/.test(s)),
        fc.string({ maxLength: 300 }).filter((s) => /^[\x21-\x7e]*$/.test(s)).map((s) => `Bearer ${s}`),
        fc.constantFrom('Bearer ', 'Bearer sk_', 'Bearer pk_', `Bearer ${'x'.repeat(10_000)}`, 'Bearer %00', "Bearer ' OR 1=1 --"),
      );
      await fc.assert(
        fc.asyncProperty(fc.constantFrom(...ROUTES), header, async ([method, path, kind], authorization) => {
          const full = kind === 'item' ? `${path}${ids[0]}` : path;
          const r = await raw(t.baseUrl, method, full, { authorization });
          assertEnvelope(r, `${method} ${full} auth=${authorization.slice(0, 60)}`);
          assert.ok(r.status === 401 || r.status === 200 || r.status === 404, `${r.status}`);
        }),
        { numRuns: NUM_RUNS, includeErrorInReport: true },
      );
    });

    test('random methods and paths', async () => {
      await fc.assert(
        fc.asyncProperty(
          fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD'),
          fc.array(fc.oneof(fc.constantFrom('v1', 'documents', 'faqs', '..', '.', '', '%2F', 'openapi.json', 'health'), fc.string({ maxLength: 20 }).map(pathSafe)), { maxLength: 5 }),
          async (method, segments) => {
            const path = `/${segments.join('/')}`;
            const r = await raw(t.baseUrl, method, path, { authorization: `Bearer ${t.key}` });
            if (method === 'HEAD') {
              assert.ok(r.status < 500, `HEAD ${path} → ${r.status}`);
              return;
            }
            // The one answer outside the envelope by design: the OpenAPI document itself (the generator finds
            // GET /v1/openapi.json now and then).
            if (method === 'GET' && r.status === 200 && /^application\/json/.test(String(r.headers['content-type'])) && JSON.parse(r.text).openapi === '3.1.0') return;
            assertEnvelope(r, `${method} ${path}`);
          },
        ),
        { numRuns: NUM_RUNS, includeErrorInReport: true },
      );
    });

    test('the seeded records survived every attack unchanged in shape', async () => {
      const list = await t.request('GET', '/v1/documents?limit=100', { key: t.key });
      assert.equal(list.status, 200);
      assert.equal(typeof list.body.data.total, 'number');
      const faqs = await t.request('GET', '/v1/faqs?limit=100', { key: t.key });
      assert.equal(faqs.status, 200);
    });
  });
}
