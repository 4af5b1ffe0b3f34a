import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { request } from 'node:http';
import { describe, test } from 'node:test';
import { SCOPES } from '../../src/modules/accounts/accounts.schemas.js';
import { hashKey } from '../../src/modules/accounts/accounts.service.js';
import { accountsRepository } from '../../src/modules/accounts/accounts.repository.js';
import { useTestApp, type TestResponse } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';

function assertFailure(r: TestResponse, status: number, code: string, message?: RegExp) {
  assert.equal(r.status, status, r.text);
  assert.deepEqual(Object.keys(r.body).sort(), ['error', 'success']);
  assert.equal(r.body.success, false);
  assert.deepEqual(Object.keys(r.body.error).sort(), ['code', 'message']);
  assert.equal(r.body.error.code, code);
  assert.equal(typeof r.body.error.message, 'string');
  if (message) assert.match(r.body.error.message, message);
}

for (const dialect of DIALECTS) {
  describe(`authentication and permissions (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('missing, malformed and unknown keys answer 401 UNAUTHORIZED on every route', async () => {
      const routes = [
        ['GET', '/v1/documents'],
        ['POST', '/v1/documents'],
        ['GET', '/v1/documents/doc_x'],
        ['PUT', '/v1/documents/doc_x'],
        ['DELETE', '/v1/documents/doc_x'],
        ['GET', '/v1/faqs'],
        ['POST', '/v1/faqs'],
        ['GET', '/v1/faqs/faq_x'],
        ['PUT', '/v1/faqs/faq_x'],
        ['DELETE', '/v1/faqs/faq_x'],
      ] as const;
      for (const [method, path] of routes) {
        const body = method === 'POST' || method === 'PUT' ? { title: 'x' } : undefined;
        assertFailure(await t.request(method, path, { body }), 401, 'UNAUTHORIZED', /missing Authorization/);
        for (const authorization of ['sk_abc', 'Basic dXNlcjpwYXNz', 'Bearer', 'Bearer a b', 'Token sk_abc']) {
          assertFailure(await t.request(method, path, { body, headers: { authorization } }), 401, 'UNAUTHORIZED', /Bearer <API_KEY>/);
        }
        assertFailure(await t.request(method, path, { body, key: `sk_${randomBytes(24).toString('base64url')}` }), 401, 'UNAUTHORIZED', /invalid or revoked/);
      }
    });

    test('a 401 carries no rate-limit headers and a request id', async () => {
      const r = await t.request('GET', '/v1/documents', { key: 'sk_nope' });
      assertFailure(r, 401, 'UNAUTHORIZED');
      assert.equal(r.headers.get('x-ratelimit-limit'), null);
      assert.match(r.headers.get('x-request-id') ?? '', /^req_/);
    });

    test('a valid key works; the same key revoked answers 401 at once', async () => {
      const { accountId, key } = await t.account();
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      const keys = await t.ctx.services.accounts.listKeys(accountId);
      await t.ctx.services.accounts.revokeKey(keys[0]!.id);
      assertFailure(await t.request('GET', '/v1/documents', { key }), 401, 'UNAUTHORIZED', /invalid or revoked/);
      assertFailure(await t.request('POST', '/v1/faqs', { key, body: { question: 'q', answer: 'a', category: 'c' } }), 401, 'UNAUTHORIZED');
    });

    test('"bearer" is case-insensitive and surrounding spaces are tolerated', async () => {
      const { key } = await t.account();
      assert.equal((await t.request('GET', '/v1/documents', { headers: { authorization: `bearer ${key}` } })).status, 200);
      assert.equal((await t.request('GET', '/v1/documents', { headers: { authorization: `Bearer   ${key}  ` } })).status, 200);
    });

    test('two Authorization headers are refused, whichever keys they carry', async () => {
      const a = await t.account();
      const b = await t.account();
      const send = (values: string[]) =>
        new Promise<{ status: number; body: any }>((resolve, reject) => {
          const req = request(`${t.baseUrl}/v1/documents`, (res) => {
            let text = '';
            res.on('data', (c: Buffer) => (text += c.toString()));
            res.on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
          });
          req.setHeader('authorization', values); // one header line per value
          req.on('error', reject);
          req.end();
        });
      for (const values of [[`Bearer ${a.key}`, `Bearer ${b.key}`], [`Bearer ${a.key}`, `Bearer ${a.key}`]]) {
        const r = await send(values);
        assert.equal(r.status, 400);
        assert.equal(r.body.error.code, 'INVALID_REQUEST');
        assert.match(r.body.error.message, /Authorization header is sent more than once/);
      }
      assert.equal((await send([`Bearer ${a.key}`])).status, 200);
    });

    test('a public key (pk_) only has chat: 403 FORBIDDEN on documents and FAQs', async () => {
      const { accountId } = await t.account();
      const pub = await t.ctx.services.accounts.createKey({ accountId, type: 'public' });
      assert.match(pub.key, /^pk_/);
      assert.deepEqual(pub.scopes, ['chat']);
      for (const [method, path, body] of [
        ['GET', '/v1/documents'],
        ['POST', '/v1/documents', { title: 't', content: 'c' }],
        ['GET', '/v1/faqs'],
        ['DELETE', '/v1/faqs/faq_x'],
      ] as const) {
        assertFailure(await t.request(method, path, { key: pub.key, body }), 403, 'FORBIDDEN', /lacks the (documents|faqs):(read|write) scope/);
      }
      const server = await t.ctx.services.accounts.createKey({ accountId });
      assert.match(server.key, /^sk_/);
      assert.deepEqual(server.scopes, [...SCOPES]);
    });

    test('a server key lacking a scope answers 403 naming it; the scopes it has work', async () => {
      const { key } = await t.account({ scopes: ['documents:read'] });
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      assertFailure(await t.request('POST', '/v1/documents', { key, body: { title: 't', content: 'c' } }), 403, 'FORBIDDEN', /documents:write/);
      assertFailure(await t.request('DELETE', '/v1/documents/doc_x', { key }), 403, 'FORBIDDEN', /documents:write/);
      assertFailure(await t.request('GET', '/v1/faqs', { key }), 403, 'FORBIDDEN', /faqs:read/);
    });

    test('permission is checked before the body: a forbidden write with a bad body is 403, not 400', async () => {
      const { key } = await t.account({ scopes: ['documents:read'] });
      assertFailure(await t.request('POST', '/v1/documents', { key, raw: '{oops', headers: { 'content-type': 'application/json' } }), 403, 'FORBIDDEN');
    });

    test('a server key of an account on free answers 403 FORBIDDEN', async () => {
      const acct = await t.ctx.services.accounts.createAccount({ name: 'Free Co', plan: 'free' });
      await assert.rejects(t.ctx.services.accounts.createKey({ accountId: acct.id }), /Pro plan/);
      // The CLI refuses such a key, but an account can be downgraded after its key was made: write one directly.
      const secret = `sk_${randomBytes(24).toString('base64url')}`;
      await accountsRepository.insertKey(t.ctx.db, {
        id: `key_free${randomBytes(4).toString('hex')}`,
        account_id: acct.id,
        type: 'server',
        scopes: JSON.stringify(SCOPES),
        hash: hashKey(secret),
        hint: secret.slice(0, 7),
        created_at: Date.now(),
        revoked_at: null,
      });
      assertFailure(await t.request('GET', '/v1/documents', { key: secret }), 403, 'FORBIDDEN', /Pro plan/);
      assertFailure(await t.request('POST', '/v1/faqs', { key: secret, body: { question: 'q', answer: 'a', category: 'c' } }), 403, 'FORBIDDEN');
    });

    test('downgrading an account to free turns its server key into 403, upgrading restores it', async () => {
      const { accountId, key } = await t.account({ plan: 'pro' });
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
      await t.ctx.db.updateTable('accounts').set({ plan: 'free' }).where('id', '=', accountId).execute();
      assertFailure(await t.request('GET', '/v1/documents', { key }), 403, 'FORBIDDEN', /Pro plan/);
      await t.ctx.db.updateTable('accounts').set({ plan: 'business' }).where('id', '=', accountId).execute();
      assert.equal((await t.request('GET', '/v1/documents', { key })).status, 200);
    });

    test("another account's document or FAQ id answers 404, never 403 and never the data", async () => {
      const a = await t.account();
      const b = await t.account();
      const doc = await t.request('POST', '/v1/documents', { key: a.key, body: { title: 'A-only', content: 'secret-a' } });
      const faq = await t.request('POST', '/v1/faqs', { key: a.key, body: { question: 'A-only?', answer: 'secret-a', category: 'a' } });
      for (const path of [`/v1/documents/${doc.body.data.id}`, `/v1/faqs/${faq.body.data.id}`]) {
        for (const method of ['GET', 'PUT', 'DELETE'] as const) {
          const body = method === 'PUT' ? (path.includes('faq') ? { answer: 'x' } : { title: 'x' }) : undefined;
          const r = await t.request(method, path, { key: b.key, body });
          assertFailure(r, 404, 'NOT_FOUND');
          assert.ok(!r.text.includes('secret-a'));
        }
      }
      // and the owner still sees them unchanged
      assert.equal((await t.request('GET', `/v1/documents/${doc.body.data.id}`, { key: a.key })).body.data.content, 'secret-a');
      assert.equal((await t.request('GET', `/v1/faqs/${faq.body.data.id}`, { key: a.key })).body.data.answer, 'secret-a');
    });

    test('failed authentication does not consume the account quota', async () => {
      const { accountId, key } = await t.account({ minute: 3, day: 100 });
      const revoked = await t.ctx.services.accounts.createKey({ accountId });
      await t.ctx.services.accounts.revokeKey(revoked.id);
      for (let i = 0; i < 10; i++) {
        assertFailure(await t.request('GET', '/v1/documents', { key: revoked.key }), 401, 'UNAUTHORIZED');
        assertFailure(await t.request('GET', '/v1/documents', { key: 'sk_unknown' }), 401, 'UNAUTHORIZED');
      }
      const remaining: string[] = [];
      for (let i = 0; i < 3; i++) {
        const r = await t.request('GET', '/v1/documents', { key });
        assert.equal(r.status, 200);
        remaining.push(r.headers.get('x-ratelimit-remaining')!);
      }
      assert.deepEqual(remaining, ['2', '1', '0']);
      assertFailure(await t.request('GET', '/v1/documents', { key }), 429, 'RATE_LIMITED');
    });

    test('public routes (health, OpenAPI) need no key', async () => {
      assert.equal((await t.request('GET', '/v1/health')).status, 200);
      assert.equal((await t.request('GET', '/v1/openapi.json')).status, 200);
    });
  });
}
