import assert from 'node:assert/strict';
import { gzipSync } from 'node:zlib';
import { describe, test } from 'node:test';
import { contentTypeCharset, findTextProblem, MAX_BODY_DEPTH, nestsDeeperThan } from '../../src/http/json.js';
import { useTestApp, type TestResponse } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

/** The spec envelope, the 400 code, and a message matching `message`. */
function assertInvalid(r: TestResponse, message: RegExp) {
  assert.equal(r.status, 400, r.text);
  assert.deepEqual(r.body, { success: false, error: { code: 'INVALID_REQUEST', message: r.body?.error?.message } }, r.text);
  assert.match(r.body.error.message, message);
}

/** `{"metadata":{"a":{"a":…1…}}}` with the whole body nesting `levels` deep. */
const nestedMetadata = (levels: number, open = '{"a":', close = '}') => `{"metadata":${open.repeat(levels - 2)}{}${close.repeat(levels - 2)}}`;

for (const dialect of DIALECTS) {
  describe(`input rules of bodies, paths and query strings (${dialect})`, () => {
    const t = useTestApp(dialect);

    const json = { 'content-type': 'application/json' };

    test(`bodies nesting deeper than ${MAX_BODY_DEPTH} levels are a 400, not a stack overflow (500)`, async () => {
      // The audit's body: 100,000 levels of metadata, ~600 KB, under the 1 MiB limit.
      const deep = `{"metadata":${'{"a":'.repeat(100_000)}1${'}'.repeat(100_000)}}`;
      assertInvalid(await t.request('POST', '/v1/chat/conversations', { key: t.key, raw: deep, headers: json }), /^body must not nest objects and arrays deeper than 64 levels$/);
      const deepArray = `{"metadata":{"x":${'['.repeat(200_000)}${']'.repeat(200_000)}}}`;
      assertInvalid(await t.request('POST', '/v1/chat/conversations', { key: t.key, raw: deepArray, headers: json }), /deeper than 64 levels/);
      // With an Idempotency-Key the fingerprint of the body used to overflow first.
      assertInvalid(
        await t.request('POST', '/v1/chat/conversations', { key: t.key, raw: deep, headers: { ...json, 'idempotency-key': 'k-deep' } }),
        /deeper than 64 levels/,
      );
      // Exactly at the limit is a body like any other; one level more is refused.
      assert.equal(nestedMetadata(MAX_BODY_DEPTH).length > 2 * MAX_BODY_DEPTH, true);
      const atLimit = await t.request('POST', '/v1/chat/conversations', { key: t.key, raw: nestedMetadata(MAX_BODY_DEPTH), headers: { ...json, 'idempotency-key': 'k-64' } });
      assert.equal(atLimit.status, 201, atLimit.text);
      assertInvalid(await t.request('POST', '/v1/chat/conversations', { key: t.key, raw: nestedMetadata(MAX_BODY_DEPTH + 1), headers: json }), /deeper than 64 levels/);
      // The service is fine afterwards.
      assert.equal((await t.request('GET', '/v1/health')).status, 200);
    });

    test('lone UTF-16 surrogates are refused naming the field; paired ones (emoji) are stored as sent', async () => {
      const cases: [string, string, RegExp][] = [
        ['/v1/documents', '{"title":"S\\ud800E","content":"x"}', /^body\.title must be well-formed Unicode/],
        ['/v1/documents', '{"title":"t","content":"tail \\uDFFF"}', /^body\.content must be well-formed Unicode/],
        ['/v1/documents', '{"title":"t","content":"reversed pair \\ude00\\ud83d"}', /^body\.content must be well-formed Unicode/],
        ['/v1/faqs', '{"question":"q","answer":"a\\udbff","category":"c"}', /^body\.answer must be well-formed Unicode/],
        ['/v1/chat/conversations', '{"metadata":{"notes":["ok","bad \\ud800"]}}', /^body\.metadata\.notes\[1\] must be well-formed Unicode/],
        ['/v1/chat/conversations', '{"metadata":{"k\\ud800":1}}', /^body\.metadata has a key that must be well-formed Unicode/],
        ['/v1/chat/conversations', '{"metadata":{"odd key":"\\ud800"}}', /^body\.metadata\["odd key"\] must be well-formed Unicode/],
        ['/v1/webhooks', '{"url":"https://example.com/h","events":["escalation"],"secret":"whsec_\\ud800_12345678"}', /^body\.secret must be well-formed Unicode/],
      ];
      for (const [path, raw, message] of cases) {
        const r = await t.request('POST', path, { key: t.key, raw, headers: json });
        assertInvalid(r, message);
        assert.match(r.body.error.message, /no unpaired UTF-16 surrogates/);
      }
      // NUL keeps its own rule, now naming the field too.
      assertInvalid(await t.request('POST', '/v1/documents', { key: t.key, raw: '{"title":"a\\u0000b","content":"x"}', headers: json }), /^body\.title must not contain NUL/);
      // A well-formed pair, escaped or raw, is stored and read back exactly on both databases.
      const c = await t.request('POST', '/v1/documents', { key: t.key, raw: '{"title":"S\\ud83d\\ude00E 😀","content":"x"}', headers: json });
      assert.equal(c.status, 201, c.text);
      const g = await t.request('GET', `/v1/documents/${c.body.data.id}`, { key: t.key });
      assert.equal(g.body.data.title, 'S😀E 😀');
    });

    test('path values with a lone surrogate or NUL cannot get past the guard (unit) and bad UTF-8 stays a 400', async () => {
      // Percent-decoding never yields a lone surrogate (its UTF-8 bytes are invalid), so the guard is checked
      // on the parsed values it receives.
      assert.equal(findTextProblem({ id: 'doc_\ud800' }, 'path'), 'path.id must be well-formed Unicode (no unpaired UTF-16 surrogates such as \\ud800)');
      assert.match(findTextProblem({ status: 'all', category: ['a', 'b\udc00'] }, 'query') ?? '', /^query\.category\[1\] must be well-formed Unicode/);
      assert.match(findTextProblem({ 'x\u0000': '1' }, 'query') ?? '', /^query has a key that must not contain NUL/);
      assert.equal(findTextProblem({ id: 'doc_😀', q: ['a', 'b'] }, 'path'), null);
      assertInvalid(await t.request('GET', '/v1/documents/%ED%A0%80', { key: t.key }), /URL is not valid|well-formed/);
      assertInvalid(await t.request('GET', '/v1/documents/a%00b', { key: t.key }), /^path\.id must not contain NUL/);
      const q = await t.request('GET', '/v1/faqs?category=%ED%A0%80', { key: t.key });
      assert.equal(q.status, 400, q.text);
    });

    test('a query string whose percent-encoding does not decode is a 400, as a path is; a well-encoded one is read', async () => {
      for (const query of ['customerId=%FF', 'customerId=%zz', 'customerId=%ED%A0%80', 'customerId=a%', 'customerId=ok&limit=%']) {
        const r = await t.request('GET', `/v1/conversations?${query}`, { key: t.key });
        assertInvalid(r, /^the URL is not valid \(bad percent-encoding\)$/);
      }
      for (const query of ['customerId=%25FF', 'customerId=caf%C3%A9', 'customerId=a+b%20c']) {
        const r = await t.request('GET', `/v1/conversations?${query}`, { key: t.key });
        assert.equal(r.status, 200, `${query}: ${r.text}`);
      }
    });

    test('a body that is not valid UTF-8 is refused, not stored with U+FFFD in place of its bytes', async () => {
      const before = (await t.request('GET', '/v1/documents?status=all', { key: t.key })).body.data.total;
      const bytes = Buffer.concat([Buffer.from('{"title":"'), Buffer.from([0xff, 0xfe]), Buffer.from('","content":"x","status":"active"}')]);
      const r = await fetch(`${t.baseUrl}/v1/documents`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, ...json }, body: bytes });
      const body = (await r.json()) as { success: boolean; error: { code: string; message: string } };
      assert.equal(r.status, 400);
      assert.deepEqual([body.success, body.error.code, body.error.message], [false, 'INVALID_REQUEST', 'body is not valid UTF-8']);
      assert.equal((await t.request('GET', '/v1/documents?status=all', { key: t.key })).body.data.total, before, 'nothing created');
      // A literal U+FFFD sent as UTF-8 is text like any other.
      const ok = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'replacement \ufffd char', content: 'x', status: 'active' } });
      assert.equal(ok.status, 201, ok.text);
      assert.equal(ok.body.data.title, 'replacement \ufffd char');
    });

    test('a query parameter given twice is refused as such, not as a value of the wrong type', async () => {
      // The parser reads a repeated parameter as an array: "query.limit must be an integer" for limit=5&limit=6.
      for (const [path, name] of [
        ['/v1/documents?limit=5&limit=6', 'limit'],
        ['/v1/documents?status=active&status=draft', 'status'],
        ['/v1/conversations?from=2026-01-01&from=2026-02-01', 'from'],
        ['/v1/faqs?offset=0&category=a&offset=0', 'offset'],
      ] as const) {
        assertInvalid(await t.request('GET', path, { key: t.key }), new RegExp(`^query\\.${name} must be given once, not 2 times$`));
      }
      assertInvalid(await t.request('GET', '/v1/documents?foo=1&foo=2', { key: t.key }), /^query\.foo is not a known field$/);
    });

    test('integer query parameters take plain decimal digits only', async () => {
      for (const [path, value] of [
        ['/v1/documents', '1e1'],
        ['/v1/documents', '0x10'],
        ['/v1/documents', '%205'],
        ['/v1/documents', '5%20'],
        ['/v1/documents', '5.0'],
        ['/v1/documents', '%2B5'],
        ['/v1/documents', '0b11'],
        ['/v1/documents', ''],
        ['/v1/faqs', '1e1'],
        ['/v1/webhooks', '0x10'],
        ['/v1/conversations', '5.0'],
        ['/v1/analytics/topics', '1e1'],
      ]) {
        assertInvalid(await t.request('GET', `${path}?limit=${value}`, { key: t.key }), /^query\.limit must be an integer written in plain decimal digits/);
      }
      assertInvalid(await t.request('GET', '/v1/documents?offset=1e3', { key: t.key }), /^query\.offset must be an integer written in plain decimal digits/);
      // Plain digits work as before; a minus sign reaches the field's own range rule.
      const ok = await t.request('GET', '/v1/documents?limit=10&offset=007', { key: t.key });
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.body.data.limit, 10);
      assert.equal(ok.body.data.offset, 7);
      assertInvalid(await t.request('GET', '/v1/documents?offset=-1', { key: t.key }), /^query\.offset must be at least 0$/);
      // Any offset >= 0 (CONTRACT §4): far past the end is an empty page with the real total, on every list.
      for (const path of ['/v1/documents', '/v1/faqs', '/v1/conversations', '/v1/webhooks', '/v1/workflows', '/v1/rundowns']) {
        const far = await t.request('GET', `${path}?offset=99999999999`, { key: t.key });
        assert.equal(far.status, 200, `${path}: ${far.text}`);
        assert.equal(far.body.data.offset, 99999999999);
        assert.equal(typeof far.body.data.total, 'number');
        assert.deepEqual(Object.values(far.body.data).find(Array.isArray), []);
      }
      assertInvalid(await t.request('GET', '/v1/documents?limit=101', { key: t.key }), /^query\.limit must be at most 100$/);
    });

    test('a query parameter on an endpoint that takes none is refused naming it, as on lists (nothing is silently ignored)', async () => {
      const doc = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Query rules', content: 'c' } });
      assert.equal(doc.status, 201, doc.text);
      const id = doc.body.data.id as string;
      const refused: Array<[string, string, unknown?]> = [
        ['GET', `/v1/documents/${id}?fields=title`],
        ['PUT', `/v1/documents/${id}?merge=false`, { status: 'draft' }],
        ['DELETE', `/v1/documents/${id}?force=true`],
        ['POST', '/v1/documents?status=draft', { title: 't', content: 'c' }],
        ['GET', '/v1/conversations/conv_x?include=messages'],
        ['GET', '/v1/webhooks/wh_x?expand=deliveries'],
        ['POST', '/v1/chat/conversations?persona=bot', {}],
      ];
      for (const [method, path, body] of refused) {
        const name = new URL(path, 'http://x').searchParams.keys().next().value as string;
        assertInvalid(await t.request(method, path, { key: t.key, ...(body !== undefined ? { body } : {}) }), new RegExp(`^query\\.${name} is not a known field$`));
      }
      // Nothing was changed by the refused writes; the same requests without the parameter work.
      const got = await t.request('GET', `/v1/documents/${id}`, { key: t.key });
      assert.equal(got.status, 200, got.text);
      assert.equal(got.body.data.status, 'active');
      assert.equal((await t.request('DELETE', `/v1/documents/${id}`, { key: t.key })).status, 200);
      // The service's own tooling routes are not part of the API surface.
      assert.equal((await t.request('GET', '/v1/health?probe=1')).status, 200);
    });

    test('a body field on an endpoint that takes none (DELETE, a delivery retry) is refused naming it; no body or {} is fine', async () => {
      const create = () => t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Body rules', content: 'c' } });
      const doc = await create();
      assert.equal(doc.status, 201, doc.text);
      const id = doc.body.data.id as string;
      assertInvalid(await t.request('DELETE', `/v1/documents/${id}`, { key: t.key, body: { force: true } }), /^body\.force is not a known field$/);
      assert.equal((await t.request('GET', `/v1/documents/${id}`, { key: t.key })).status, 200, 'the refused delete deleted nothing');
      assertInvalid(
        await t.request('POST', '/v1/webhooks/wh_x/deliveries/dlv_x/retry', { key: t.key, body: { url: 'https://elsewhere.example' } }),
        /^body\.url is not a known field$/,
      );
      // What clients send on a bodiless call stays fine: nothing, an empty JSON body, or {}.
      assert.equal((await t.request('DELETE', `/v1/documents/${id}`, { key: t.key, body: {} })).status, 200);
      const second = (await create()).body.data.id as string;
      const bare = await t.request('DELETE', `/v1/documents/${second}`, { key: t.key });
      assert.equal(bare.status, 200, bare.text);
      const third = (await create()).body.data.id as string;
      const emptyJson = await t.request('DELETE', `/v1/documents/${third}`, { key: t.key, raw: '', headers: json });
      assert.equal(emptyJson.status, 200, emptyJson.text);
      assert.equal((await t.request('POST', '/v1/webhooks/wh_x/deliveries/dlv_x/retry', { key: t.key })).status, 404);
    });

    test('Content-Type charsets other than UTF-8 are refused; utf-8 in any case or quoted is fine', async () => {
      const raw = '{"title":"Café","content":"x"}';
      for (const type of ['application/json; charset=latin1', 'application/json; charset=ISO-8859-1', 'application/json;charset="utf-16"', 'application/json; charset=']) {
        assertInvalid(await t.request('POST', '/v1/documents', { key: t.key, raw, headers: { 'content-type': type } }), /^header\.Content-Type charset must be utf-8/);
      }
      for (const type of ['application/json; charset=utf-8', 'application/json; charset=UTF-8', 'application/json; Charset="Utf-8"', 'application/json;charset=utf8', 'application/json']) {
        const r = await t.request('POST', '/v1/documents', { key: t.key, raw, headers: { 'content-type': type } });
        assert.equal(r.status, 201, `${type}: ${r.text}`);
        assert.equal(r.body.data.title, 'Café');
      }
    });

    test('a compressed body (Content-Encoding) is refused naming the header, and nothing is created; identity is fine', async () => {
      const raw = '{"title":"Zipped","content":"x"}';
      const before = (await t.request('GET', '/v1/documents?limit=1', { key: t.key })).body.data.total as number;
      const gzipped = gzipSync(raw);
      for (const [body, encoding] of [[gzipped, 'gzip'], [raw, 'gzip'], [raw, 'br'], [raw, 'Deflate']] as const) {
        const r = await fetch(`${t.baseUrl}/v1/documents`, { method: 'POST', headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json', 'content-encoding': encoding }, body });
        const out = (await r.json()) as { success: boolean; error: { code: string; message: string } };
        assert.equal(r.status, 400, encoding);
        assert.deepEqual(out.error, { code: 'INVALID_REQUEST', message: `header.Content-Encoding "${encoding.toLowerCase()}" is not supported; send the body uncompressed` });
      }
      assert.equal((await t.request('GET', '/v1/documents?limit=1', { key: t.key })).body.data.total, before);
      const plain = await t.request('POST', '/v1/documents', { key: t.key, raw, headers: { 'content-type': 'application/json', 'content-encoding': 'identity' } });
      assert.equal(plain.status, 201, plain.text);
    });
  });
}

describe('parser helpers', () => {
  test('nestsDeeperThan counts the body itself as level 1 and stops at the first branch past the limit', () => {
    assert.equal(nestsDeeperThan(1, 0), false);
    assert.equal(nestsDeeperThan({}, 1), false);
    assert.equal(nestsDeeperThan({ a: {} }, 1), true);
    assert.equal(nestsDeeperThan([[], [[]]], 2), true);
    assert.equal(nestsDeeperThan([[], [[]]], 3), false);
    let v: unknown = 1;
    for (let i = 0; i < 1_000_000; i++) v = [v];
    assert.equal(nestsDeeperThan(v, 64), true);
  });

  test('contentTypeCharset', () => {
    assert.equal(contentTypeCharset(undefined), undefined);
    assert.equal(contentTypeCharset('application/json'), undefined);
    assert.equal(contentTypeCharset('application/json; charset=UTF-8'), 'utf-8');
    assert.equal(contentTypeCharset('application/json; foo=bar; CHARSET = "Latin1"'), 'latin1');
  });
});
