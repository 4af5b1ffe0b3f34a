import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

const ORIGIN = { origin: 'https://shop.example' };

for (const dialect of DIALECTS) {
  describe(`CORS on the chat channel (${dialect})`, () => {
    const t = useTestApp(dialect);
    let publicKey: string;
    before(async () => {
      ({ key: publicKey } = await t.account({ keyType: 'public', scopes: ['chat'] }));
    });

    test('a browser preflight for a chat endpoint is answered without a key', async () => {
      for (const path of ['/v1/chat/conversations', '/v1/chat/conversations/conv_x/messages']) {
        const r = await t.request('OPTIONS', path, {
          headers: { ...ORIGIN, 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization, content-type' },
        });
        assert.equal(r.status, 204, r.text);
        assert.equal(r.headers.get('access-control-allow-origin'), '*');
        assert.match(r.headers.get('access-control-allow-methods') ?? '', /POST/);
        assert.match(r.headers.get('access-control-allow-headers') ?? '', /Authorization/);
        assert.match(r.headers.get('access-control-allow-headers') ?? '', /Content-Type/);
        assert.match(r.headers.get('access-control-allow-headers') ?? '', /Idempotency-Key/); // a widget can resend safely
        assert.equal(r.headers.get('access-control-max-age'), '600');
        assert.equal(r.text, '');
      }
    });

    test('answers and refusals of chat endpoints can be read by the page', async () => {
      const ok = await t.request('POST', '/v1/chat/conversations', { key: publicKey, body: {}, headers: ORIGIN });
      assert.equal(ok.status, 201, ok.text);
      assert.equal(ok.headers.get('access-control-allow-origin'), '*');
      assert.match(ok.headers.get('access-control-expose-headers') ?? '', /X-RateLimit-Remaining/);
      assert.match(ok.headers.get('access-control-expose-headers') ?? '', /X-Request-Id/);
      assert.match(ok.headers.get('access-control-expose-headers') ?? '', /Idempotent-Replayed/);
      assert.match(ok.headers.get('access-control-expose-headers') ?? '', /Idempotency-Status/);
      const unauthorised = await t.request('POST', '/v1/chat/conversations', { key: 'pk_nope', body: {}, headers: ORIGIN });
      assert.equal(unauthorised.status, 401);
      assert.equal(unauthorised.headers.get('access-control-allow-origin'), '*');
      const missing = await t.request('POST', '/v1/chat/conversations/conv_missing/messages', { key: publicKey, body: { content: 'hi' }, headers: ORIGIN });
      assert.equal(missing.status, 404);
      assert.equal(missing.headers.get('access-control-allow-origin'), '*');
      // Refused by Fastify before any hook runs (undecodable URL): still readable by the widget.
      const badUrl = await t.request('GET', '/v1/chat/conversations/%E0%A4%A', { key: publicKey, headers: ORIGIN });
      assert.equal(badUrl.status, 400, badUrl.text);
      assert.equal(badUrl.headers.get('access-control-allow-origin'), '*');
      assert.match(badUrl.headers.get('access-control-expose-headers') ?? '', /X-Request-Id/);
      const badServerUrl = await t.request('GET', '/v1/documents/%E0%A4%A', { key: t.key, headers: ORIGIN });
      assert.equal(badServerUrl.status, 400);
      assert.equal(badServerUrl.headers.get('access-control-allow-origin'), null, 'server endpoints stay closed to browsers');
    });

    test('server endpoints get no CORS headers and no preflight', async () => {
      const r = await t.request('GET', '/v1/documents', { key: t.key, headers: ORIGIN });
      assert.equal(r.status, 200);
      assert.equal(r.headers.get('access-control-allow-origin'), null);
      const pre = await t.request('OPTIONS', '/v1/documents', { headers: { ...ORIGIN, 'access-control-request-method': 'GET' } });
      assert.equal(pre.status, 404);
      assert.equal(pre.headers.get('access-control-allow-origin'), null);
    });
  });
}
