import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { SUBSCRIBABLE_EVENTS } from '../../src/modules/webhooks/events.js';
import { useTestApp } from '../helpers/app.js';

/** Every route the service answers under /v1, with its success status and whether it can answer 404. */
const ROUTES = [
  ['get', '/documents', '200', false],
  ['post', '/documents', '201', false],
  ['get', '/documents/{id}', '200', true],
  ['put', '/documents/{id}', '200', true],
  ['delete', '/documents/{id}', '200', true],
  ['get', '/faqs', '200', false],
  ['post', '/faqs', '201', false],
  ['get', '/faqs/{id}', '200', true],
  ['put', '/faqs/{id}', '200', true],
  ['delete', '/faqs/{id}', '200', true],
  ['get', '/settings/assistant', '200', false],
  ['put', '/settings/assistant', '200', false],
  ['post', '/assistant/preview', '200', false],
  ['post', '/chat/conversations', '201', false],
  ['get', '/chat/conversations/{id}', '200', true],
  ['post', '/chat/conversations/{id}/messages', '200', true],
  ['post', '/chat/conversations/{id}/contact', '200', true],
  ['post', '/chat/conversations/{id}/escalate', '200', true],
  ['post', '/chat/conversations/{id}/end', '200', true],
  ['get', '/conversations', '200', false],
  ['delete', '/conversations', '200', false],
  ['get', '/conversations/{id}', '200', true],
  ['delete', '/conversations/{id}', '200', true],
  ['get', '/analytics/overview', '200', false],
  ['get', '/analytics/topics', '200', false],
  ['get', '/webhooks', '200', false],
  ['post', '/webhooks', '201', false],
  ['get', '/webhooks/{id}', '200', true],
  ['put', '/webhooks/{id}', '200', true],
  ['delete', '/webhooks/{id}', '200', true],
  ['post', '/webhooks/{id}/test', '200', true],
  ['get', '/webhooks/{id}/deliveries', '200', true],
  ['get', '/webhooks/{id}/deliveries/{deliveryId}', '200', true],
  ['post', '/webhooks/{id}/deliveries/{deliveryId}/retry', '200', true],
  ['post', '/webhooks/{id}/recover', '202', true],
  ['get', '/events', '200', false],
  ['get', '/events/{id}', '200', true],
  ['get', '/workflows', '200', false],
  ['post', '/workflows', '201', false],
  ['get', '/workflows/{id}', '200', true],
  ['put', '/workflows/{id}', '200', true],
  ['delete', '/workflows/{id}', '200', true],
  ['get', '/workflows/{id}/runs', '200', true],
  ['get', '/rundowns', '200', false],
  ['post', '/rundowns', '201', false],
  ['get', '/rundowns/{id}', '200', true],
] as const;

function resolvePointer(doc: any, ref: string) {
  assert.match(ref, /^#\//, `local reference: ${ref}`);
  return ref
    .slice(2)
    .split('/')
    .map((s) => s.replace(/~1/g, '/').replace(/~0/g, '~'))
    .reduce((node, key) => (node === undefined ? undefined : node[key]), doc);
}

function collectRefs(node: unknown, out: string[] = []): string[] {
  if (Array.isArray(node)) node.forEach((n) => collectRefs(n, out));
  else if (node && typeof node === 'object') {
    for (const [k, v] of Object.entries(node)) {
      if (k === '$ref' && typeof v === 'string') out.push(v);
      else collectRefs(v, out);
    }
  }
  return out;
}

describe('OpenAPI document', () => {
  const t = useTestApp('sqlite');
  let doc: any;
  before(async () => {
    const r = await t.request('GET', '/v1/openapi.json');
    assert.equal(r.status, 200);
    assert.match(r.headers.get('content-type') ?? '', /application\/json/);
    doc = r.body;
  });

  test('is OpenAPI 3.1 with info, the /v1 server and bearer security', () => {
    assert.equal(doc.openapi, '3.1.0');
    assert.equal(typeof doc.info.title, 'string');
    assert.equal(typeof doc.info.version, 'string');
    assert.deepEqual(doc.servers, [{ url: '/v1' }]);
    assert.deepEqual(doc.components.securitySchemes.bearer, { type: 'http', scheme: 'bearer', description: 'Authorization: Bearer <API_KEY>' });
    assert.deepEqual(doc.security, [{ bearer: [] }]);
  });

  test('every operation names the scope its key needs', () => {
    const scopes = new Map<string, string>();
    for (const [path, item] of Object.entries(doc.paths) as [string, any][]) {
      for (const [method, op] of Object.entries(item) as [string, any][]) {
        assert.equal(op.security?.length, 1, `${method} ${path}`);
        const [scope] = op.security[0].bearer;
        assert.match(op.description, new RegExp(`the \`${scope}\` scope`));
        // Once: a GET's schema is shared with the HEAD route Fastify adds, and the scope was appended twice.
        assert.equal(op.description.split('Needs an API key').length, 2, `${method} ${path}: ${op.description}`);
        scopes.set(`${method} ${path}`, scope);
      }
    }
    assert.equal(scopes.get('get /documents'), 'documents:read');
    assert.equal(scopes.get('post /webhooks'), 'webhooks:write');
    assert.equal(scopes.get('post /chat/conversations/{id}/messages'), 'chat');
    // The one route that needs two: both named.
    const preview = doc.paths['/assistant/preview'].post;
    assert.deepEqual(preview.security, [{ bearer: ['documents:read', 'faqs:read'] }]);
    assert.match(preview.description, /Needs an API key with the `documents:read` scope and the `faqs:read` scope\.$/);
  });

  test('lists exactly the API routes (health and the document itself are hidden)', () => {
    const listed = Object.entries(doc.paths).flatMap(([path, item]: [string, any]) => Object.keys(item).map((m) => `${m} ${path}`));
    assert.deepEqual(listed.sort(), ROUTES.map(([m, p]) => `${m} ${p}`).sort());
  });

  test('every route documents its success and every failure it can answer', () => {
    for (const [method, path, success, has404] of ROUTES) {
      const op = doc.paths[path][method];
      assert.ok(op.summary, `${method} ${path} summary`);
      assert.ok(op.tags?.length, `${method} ${path} tags`);
      const codes = Object.keys(op.responses).sort();
      const expected = [success, '400', '401', '403', '429', '500', ...(has404 ? ['404'] : [])].sort();
      assert.deepEqual(codes, expected, `${method} ${path}`);
      const ok = op.responses[success].content['application/json'].schema;
      assert.deepEqual(ok.required, ['success', 'data']);
      assert.deepEqual(ok.properties.success.enum, [true]);
      for (const code of expected.filter((c) => c !== success)) {
        const r = op.responses[code];
        assert.match(r.description, /^[A-Z_]+: /, `${method} ${path} ${code} description`);
        assert.deepEqual(r.content['application/json'].schema, { $ref: '#/components/schemas/ErrorEnvelope' });
      }
      if (path.endsWith('{id}')) {
        assert.deepEqual(
          op.parameters.find((p: any) => p.in === 'path'),
          { schema: { type: 'string', minLength: 1, maxLength: 64 }, in: 'path', name: 'id', required: true },
        );
      }
      // Action endpoints (end, test, retry) take no body at all.
      if ((method === 'post' || method === 'put') && !/\/(end|test|retry)$/.test(path)) {
        const body = op.requestBody.content['application/json'].schema;
        assert.equal(body.additionalProperties, false, `${method} ${path} refuses unknown fields`);
        if (method === 'put') assert.equal(body.minProperties, 1);
      }
    }
  });

  test('every operation has its own operationId, a camelCase verb and noun', () => {
    const ids = ROUTES.map(([method, path]) => doc.paths[path][method].operationId);
    for (const [i, id] of ids.entries()) assert.match(String(id), /^[a-z]+[A-Z][A-Za-z]+$/, `${ROUTES[i]![0]} ${ROUTES[i]![1]}`);
    assert.equal(new Set(ids).size, ids.length, 'no two operations share one');
    assert.equal(doc.paths['/documents'].get.operationId, 'listDocuments');
    assert.equal(doc.paths['/chat/conversations/{id}/messages'].post.operationId, 'sendChatMessage');
  });

  test('response headers: X-Request-Id everywhere, the rate-limit headers on every counted answer, Retry-After on 429 and 500', async () => {
    const names = (h: object | undefined) => Object.keys(h ?? {}).sort();
    for (const [method, path, success] of ROUTES) {
      const responses = doc.paths[path][method].responses;
      const limits = ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'X-Request-Id'];
      const replay = method === 'post' ? ['Idempotent-Replayed'] : []; // test/http/idempotency.test.ts
      assert.deepEqual(names(responses[success].headers), [...replay, ...limits].sort(), `${method} ${path} ${success}`);
      assert.deepEqual(names(responses['401'].headers), ['X-Request-Id'], `${method} ${path} 401 (not counted)`);
      const keyState = method === 'post' ? ['Idempotency-Status'] : [];
      assert.deepEqual(names(responses['429'].headers), ['Retry-After', ...keyState, ...limits].sort(), `${method} ${path} 429`);
      if (responses['400']) assert.deepEqual(names(responses['400'].headers), [...keyState, ...replay, ...limits].sort(), `${method} ${path} 400`);
      // A 500 may carry Retry-After (the database out of a resource: test/http/resource-errors.test.ts).
      if (responses['500']) assert.deepEqual(names(responses['500'].headers), ['Retry-After', ...limits].sort(), `${method} ${path} 500`);
    }
    // What the document promises is what a response carries.
    const { key } = await t.account();
    const r = await t.request('GET', '/v1/documents', { key });
    for (const h of ['x-request-id', 'x-ratelimit-limit', 'x-ratelimit-remaining', 'x-ratelimit-reset']) assert.ok(r.headers.get(h), h);
    for (const [name, header] of Object.entries(doc.components.headers as Record<string, any>)) {
      assert.ok(header.description && header.schema, `${name} is described`);
    }
  });

  test('the ErrorEnvelope component exists and every $ref in the document resolves', () => {
    const env = doc.components.schemas.ErrorEnvelope;
    assert.ok(env, 'components.schemas.ErrorEnvelope');
    assert.deepEqual(env.required, ['success', 'error']);
    assert.deepEqual(env.properties.error.properties.code.enum, ['INVALID_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'NOT_FOUND', 'RATE_LIMITED', 'SERVER_ERROR']);
    const refs = collectRefs(doc);
    assert.ok(refs.length >= 50, `refs found: ${refs.length}`);
    for (const ref of new Set(refs)) assert.ok(resolvePointer(doc, ref), `${ref} resolves`);
    assert.ok(!JSON.stringify(doc).includes('ErrorEnvelope#'), 'no raw $id references left');
    assert.ok(!Object.keys(doc.components.schemas).some((k) => /^def-\d+$/.test(k)), 'components are named');
  });

  test('list parameters: enums, bounds and defaults; none is required', () => {
    const params = (path: string) => Object.fromEntries(doc.paths[path].get.parameters.map((p: any) => [p.name, p]));
    const docs = params('/documents');
    assert.deepEqual(Object.keys(docs).sort(), ['limit', 'offset', 'status']);
    assert.deepEqual(docs.status.schema.enum, ['active', 'draft', 'all']);
    assert.deepEqual(docs.limit.schema, { type: 'integer', minimum: 1, maximum: 100, default: 20 });
    assert.equal(docs.offset.schema.minimum, 0);
    const faqs = params('/faqs');
    assert.deepEqual(Object.keys(faqs).sort(), ['category', 'limit', 'offset', 'status']);
    assert.deepEqual(faqs.status.schema.enum, ['approved', 'pending', 'draft', 'all']);
    assert.equal(faqs.category.schema.pattern, '^[a-z0-9]+(-[a-z0-9]+)*$');
    for (const p of [...Object.values(docs), ...Object.values(faqs)] as any[]) assert.equal(p.required, false, p.name);
  });

  test('record shapes match the contract', () => {
    const data = (method: string, path: string, code: string) => doc.paths[path][method].responses[code].content['application/json'].schema.properties.data;
    assert.deepEqual(data('get', '/documents/{id}', '200').required, ['id', 'title', 'content', 'status', 'createdAt', 'updatedAt']);
    assert.deepEqual(data('post', '/documents', '201').required, ['id', 'title', 'status', 'createdAt']);
    assert.deepEqual(data('get', '/documents', '200').properties.documents.items.required, ['id', 'title', 'status', 'createdAt', 'updatedAt']);
    const faq = ['id', 'question', 'answer', 'category', 'status', 'createdAt', 'updatedAt'];
    assert.deepEqual(data('post', '/faqs', '201').required, faq);
    assert.deepEqual(data('put', '/faqs/{id}', '200').required, faq);
    assert.deepEqual(data('get', '/faqs', '200').properties.faqs.items.required, faq);
    assert.deepEqual(data('delete', '/faqs/{id}', '200').required, ['deleted']);
    // A recover answers 202 (its deliveries exist, their sending has yet to happen) and needs `since`.
    const recover = doc.paths['/webhooks/{id}/recover'].post;
    assert.deepEqual(data('post', '/webhooks/{id}/recover', '202').required, ['recovered', 'since', 'until', 'next']);
    assert.deepEqual(recover.requestBody.content['application/json'].schema.required, ['since']);
    assert.equal(recover.requestBody.required, true);
  });

  test('webhooks: one POST per event kind, its body schema and the signature headers', () => {
    assert.deepEqual(Object.keys(doc.webhooks).sort(), [...SUBSCRIBABLE_EVENTS, 'test'].sort());
    for (const [kind, item] of Object.entries<any>(doc.webhooks)) {
      const schema = item.post.requestBody.content['application/json'].schema;
      assert.equal(schema.properties.event.const, kind, kind);
      assert.deepEqual([...schema.required].sort(), ['data', 'event', 'timestamp'], kind);
      assert.equal(schema.additionalProperties, false, kind);
      const headers = item.post.parameters.filter((p: any) => p.in === 'header').map((p: any) => p.name);
      assert.deepEqual(headers, ['X-Service-Signature', 'X-Service-Event', 'X-Service-Delivery-Id', 'webhook-id', 'webhook-timestamp', 'webhook-signature'], kind);
      assert.ok(item.post.responses['200'], kind);
    }
    // The fields the seed left out are published too.
    const message = doc.webhooks['conversation.message'].post.requestBody.content['application/json'].schema.properties.data;
    assert.ok(message.required.includes('position') && message.required.includes('timestamp'));
  });

  test('the event feed: its filters, and each item a delivery body of a subscribable kind with the event id', () => {
    const params = Object.fromEntries(doc.paths['/events'].get.parameters.map((p: any) => [p.name, p]));
    assert.deepEqual(Object.keys(params).sort(), ['event', 'from', 'limit', 'offset', 'to']);
    for (const p of Object.values(params) as any[]) assert.equal(p.required, false, p.name);
    const item = doc.paths['/events/{id}'].get.responses['200'].content['application/json'].schema.properties.data;
    const listed = doc.paths['/events'].get.responses['200'].content['application/json'].schema.properties.data.properties.events.items;
    assert.deepEqual(listed, item);
    // The document's responses write a single-value `const` as `enum` (@fastify/swagger), its webhooks as given.
    const kindOf = (s: any): string => s.properties.event.const ?? s.properties.event.enum[0];
    assert.deepEqual(item.anyOf.map(kindOf).sort(), [...SUBSCRIBABLE_EVENTS].sort());
    for (const s of item.anyOf) {
      assert.deepEqual(s.required, ['id', 'event', 'timestamp', 'data']);
      assert.equal(s.additionalProperties, false);
      const delivered = doc.webhooks[kindOf(s)].post.requestBody.content['application/json'].schema;
      // Written by different transforms (a record's `patternProperties` here, `additionalProperties` there): the fields.
      assert.deepEqual(Object.keys(s.properties.data.properties), Object.keys(delivered.properties.data.properties), kindOf(s));
      assert.deepEqual(s.properties.data.required, delivered.properties.data.required, kindOf(s));
    }
  });

  test('the document is served without a key and is stable across calls', async () => {
    const again = await t.request('GET', '/v1/openapi.json');
    assert.deepEqual(again.body, doc);
  });
});
