import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { verify as octokitVerify, sign as octokitSign } from '@octokit/webhooks-methods';
import { Webhook } from 'standardwebhooks';
import fc from 'fast-check';
import {
  buildDeliveryHeaders,
  signBody,
  standardWebhookHeaders,
  verifyDelivery,
} from '../../../src/modules/webhooks/signing.js';
import { createUndiciSender } from '../../../src/modules/webhooks/sender.js';
import { startServer } from './helpers.js';

const sender = createUndiciSender({ allowPrivate: true });
after(() => sender.close());

const b64 = (s: string): string => Buffer.from(s, 'utf8').toString('base64');

test('signBody matches the GitHub documentation test vector', () => {
  assert.equal(
    signBody("It's a Secret to Everybody", 'Hello, World!'),
    'sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17',
  );
  assert.equal(signBody('s3cret-key', Buffer.from('{"a":1}')), signBody('s3cret-key', '{"a":1}'));
});

test('standardWebhookHeaders signs "{id}.{timestamp}.{body}" with the UTF-8 secret bytes', () => {
  const h = standardWebhookHeaders('dlv_1', 'päss-wörd', '{"x":"é"}', 1700000000);
  const expected = createHmac('sha256', Buffer.from('päss-wörd', 'utf8'))
    .update('dlv_1.1700000000.{"x":"é"}', 'utf8')
    .digest('base64');
  assert.deepEqual(h, { 'webhook-id': 'dlv_1', 'webhook-timestamp': '1700000000', 'webhook-signature': `v1,${expected}` });
  // standardwebhooks' own signer agrees
  const wh = new Webhook(b64('päss-wörd'));
  assert.equal(wh.sign('dlv_1', new Date(1700000000 * 1000), '{"x":"é"}'), h['webhook-signature']);
});

test("a delivery of an event also carries the event's id; a test send (no event) does not", () => {
  const h = buildDeliveryHeaders({ deliveryId: 'dlv_abc', event: 'escalation', eventId: 'evt_xyz', secret: 'whsecret1', body: '{}', now: 1700000000123 });
  assert.equal(h['X-Service-Event-Id'], 'evt_xyz');
  assert.equal(Object.keys(h).length, 8);
  assert.equal('X-Service-Event-Id' in buildDeliveryHeaders({ deliveryId: 'dlv_abc', event: 'test', eventId: null, secret: 'whsecret1', body: '{}' }), false);
});

test('buildDeliveryHeaders returns exactly the seven headers', () => {
  const h = buildDeliveryHeaders({ deliveryId: 'dlv_abc', event: 'test', secret: 'whsecret1', body: '{}', now: 1700000000123 });
  assert.deepEqual(Object.keys(h).sort(), [
    'Content-Type',
    'X-Service-Delivery-Id',
    'X-Service-Event',
    'X-Service-Signature',
    'webhook-id',
    'webhook-signature',
    'webhook-timestamp',
  ]);
  assert.equal(h['Content-Type'], 'application/json');
  assert.equal(h['X-Service-Event'], 'test');
  assert.equal(h['X-Service-Delivery-Id'], 'dlv_abc');
  assert.equal(h['webhook-id'], 'dlv_abc');
  assert.equal(h['webhook-timestamp'], '1700000000');
  assert.match(h['X-Service-Signature'], /^sha256=[0-9a-f]{64}$/);
  assert.match(h['webhook-signature'], /^v1,[A-Za-z0-9+/]{43}=$/);
  // a retry (new timestamp) keeps the body signature and id
  const h2 = buildDeliveryHeaders({ deliveryId: 'dlv_abc', event: 'test', secret: 'whsecret1', body: '{}', now: new Date(1700000300000) });
  assert.equal(h2['X-Service-Signature'], h['X-Service-Signature']);
  assert.equal(h2['webhook-timestamp'], '1700000300');
  assert.notEqual(h2['webhook-signature'], h['webhook-signature']);
});

test('a real receiver verifies the delivery with @octokit/webhooks-methods, standardwebhooks and verifyDelivery', async () => {
  const server = await startServer();
  try {
    const secret = 'Tr0ub4dor & "quotes" ünïcødé 🔑';
    const body = JSON.stringify({
      event: 'conversation.started',
      timestamp: new Date().toISOString(),
      data: { conversationId: 'conv_1', customerId: 'cus_ß', customerLabel: 'Zoë 🙂', persona: 'default', metadata: { a: [1, 2] } },
    });
    const headers = buildDeliveryHeaders({ deliveryId: 'dlv_01HXYZ', event: 'conversation.started', secret, body });
    const result = await sender.send({ url: `${server.url}/hooks/parley?x=1`, headers, body, timeoutMs: 5000 });
    assert.equal(result.ok, true, result.error ?? undefined);
    assert.equal(server.received.length, 1);
    const got = server.received[0]!;
    assert.equal(got.method, 'POST');
    assert.equal(got.url, '/hooks/parley?x=1');
    const raw = got.body.toString('utf8');
    assert.equal(raw, body);
    assert.equal(got.headers['content-type'], 'application/json');
    assert.equal(got.headers['x-service-event'], 'conversation.started');
    assert.equal(got.headers['x-service-delivery-id'], 'dlv_01HXYZ');

    // GitHub-style signature, independent implementation
    assert.equal(await octokitVerify(secret, raw, String(got.headers['x-service-signature'])), true);
    assert.equal(await octokitVerify(secret, raw + ' ', String(got.headers['x-service-signature'])), false);
    assert.equal(await octokitVerify('wrong-secret', raw, String(got.headers['x-service-signature'])), false);

    // Standard Webhooks, independent implementation (secret = base64 of the UTF-8 bytes)
    const std = {
      'webhook-id': String(got.headers['webhook-id']),
      'webhook-timestamp': String(got.headers['webhook-timestamp']),
      'webhook-signature': String(got.headers['webhook-signature']),
    };
    assert.deepEqual(new Webhook(b64(secret)).verify(got.body, std), JSON.parse(body));
    assert.deepEqual(new Webhook(`whsec_${b64(secret)}`).verify(raw, std), JSON.parse(body));
    assert.throws(() => new Webhook(b64(secret)).verify(raw.replace('conv_1', 'conv_2'), std));
    assert.throws(() => new Webhook(b64('other secret')).verify(raw, std));

    // our receiver helper, on Node's req.headers
    assert.deepEqual(verifyDelivery({ secret, body: got.body, headers: got.headers }), { ok: true });
    assert.deepEqual(verifyDelivery({ secret, body: raw, headers: new Headers(got.headers as Record<string, string>) }), { ok: true });
  } finally {
    await server.close();
  }
});

test('verifyDelivery rejects tampering, missing headers and replays', () => {
  const secret = 'receiver-secret';
  const body = '{"event":"test","timestamp":"2024-01-01T00:00:00.000Z","data":{"message":"hi"}}';
  const now = 1_700_000_000_000;
  const h = buildDeliveryHeaders({ deliveryId: 'dlv_1', event: 'test', secret, body, now });
  const lower = Object.fromEntries(Object.entries(h).map(([k, v]) => [k.toLowerCase(), v]));

  assert.deepEqual(verifyDelivery({ secret, body, headers: h, now }), { ok: true });
  assert.deepEqual(verifyDelivery({ secret, body, headers: lower, now }), { ok: true });
  assert.deepEqual(verifyDelivery({ secret, body: body + '\n', headers: h, now }), { ok: false, reason: 'invalid_signature' });
  assert.deepEqual(verifyDelivery({ secret: 'other-secret', body, headers: h, now }), { ok: false, reason: 'invalid_signature' });
  const noSig: Record<string, string> = { ...h };
  delete noSig['X-Service-Signature'];
  assert.deepEqual(verifyDelivery({ secret, body, headers: noSig, now }), { ok: false, reason: 'missing_signature' });
  // wrong length / garbage signature must not throw (timingSafeEqual length guard)
  assert.deepEqual(verifyDelivery({ secret, body, headers: { ...h, 'X-Service-Signature': 'sha256=abc' }, now }), {
    ok: false,
    reason: 'invalid_signature',
  });
  // X-Service-Signature only (no Standard Webhooks headers) is accepted
  const seedOnly = { 'X-Service-Signature': h['X-Service-Signature'] };
  assert.deepEqual(verifyDelivery({ secret, body, headers: seedOnly }), { ok: true });

  // replay: same headers 6 minutes later (default tolerance 5 min)
  assert.deepEqual(verifyDelivery({ secret, body, headers: h, now: now + 6 * 60_000 }), {
    ok: false,
    reason: 'timestamp_out_of_tolerance',
  });
  assert.deepEqual(verifyDelivery({ secret, body, headers: h, now: now - 6 * 60_000 }), {
    ok: false,
    reason: 'timestamp_out_of_tolerance',
  });
  assert.deepEqual(verifyDelivery({ secret, body, headers: h, now: now + 6 * 60_000, toleranceSeconds: 600 }), { ok: true });
  // A tolerance or a "now" that is not a number would make every age pass: refused, not read as "no limit".
  assert.throws(() => verifyDelivery({ secret, body, headers: h, now: now + 86_400_000, toleranceSeconds: Number(undefined) }), /toleranceSeconds/);
  assert.throws(() => verifyDelivery({ secret, body, headers: h, now: new Date('not a date') }), /now must be/);
  // replay with a forged fresh timestamp: the standard signature no longer matches
  assert.deepEqual(
    verifyDelivery({ secret, body, headers: { ...h, 'webhook-timestamp': String(now / 1000 + 360) }, now: now + 360_000 }),
    { ok: false, reason: 'invalid_webhook_signature' },
  );
  assert.deepEqual(verifyDelivery({ secret, body, headers: { ...h, 'webhook-id': 'dlv_2' }, now }), {
    ok: false,
    reason: 'invalid_webhook_signature',
  });
  const noId: Record<string, string> = { ...h };
  delete noId['webhook-id'];
  assert.deepEqual(verifyDelivery({ secret, body, headers: noId, now }), { ok: false, reason: 'missing_webhook_headers' });
  assert.deepEqual(verifyDelivery({ secret, body, headers: { ...h, 'webhook-timestamp': 'soon' }, now }), {
    ok: false,
    reason: 'invalid_timestamp',
  });
  // several space-separated signatures (key rotation): any v1 match is accepted
  const multi = { ...h, 'webhook-signature': `v1,AAAA ${h['webhook-signature']}` };
  assert.deepEqual(verifyDelivery({ secret, body, headers: multi, now }), { ok: true });
});

test('several secrets: one v1 signature each in webhook-signature, in order, repeats dropped; X-Service-Signature the delivery\'s own', () => {
  const [mine, current, previous] = ['frozen-secret-1', 'current-secret-2', 'previous-secret-3'];
  const body = '{"event":"test","data":{}}';
  const ts = 1_700_000_000;
  const one = (k: string) => standardWebhookHeaders('dlv_r', k, body, ts)['webhook-signature'];
  const h = standardWebhookHeaders('dlv_r', [mine, current, mine, previous], body, ts);
  assert.equal(h['webhook-signature'], `${one(mine)} ${one(current)} ${one(previous)}`);
  assert.throws(() => standardWebhookHeaders('dlv_r', [], body, ts), TypeError);
  // standardwebhooks' verifier takes any of them, and nothing else.
  const withHeaders = (k: string) => () => {
    const realNow = Date.now;
    Date.now = () => ts * 1000;
    try {
      return new Webhook(b64(k)).verify(body, h);
    } finally {
      Date.now = realNow;
    }
  };
  for (const k of [mine, current, previous]) assert.deepEqual(withHeaders(k)(), JSON.parse(body), k);
  assert.throws(withHeaders('another-secret-4'), /No matching signature/);

  // A delivery's headers: the frozen secret alone signs the body (X-Service-Signature), and comes first in
  // webhook-signature; absent (null) and repeated secrets add nothing, so a webhook never rotated sends one signature.
  const d = buildDeliveryHeaders({ deliveryId: 'dlv_r', event: 'test', secret: mine, alsoSignWith: [current, null, mine, previous], body, now: ts * 1000 });
  assert.equal(d['X-Service-Signature'], signBody(mine, body));
  assert.equal(d['webhook-signature'], h['webhook-signature']);
  const plain = buildDeliveryHeaders({ deliveryId: 'dlv_r', event: 'test', secret: mine, body, now: ts * 1000 });
  assert.deepEqual(buildDeliveryHeaders({ deliveryId: 'dlv_r', event: 'test', secret: mine, alsoSignWith: [mine, null, undefined], body, now: ts * 1000 }), plain);
  assert.equal(plain['webhook-signature'], one(mine));
  assert.equal(plain['X-Service-Signature'], d['X-Service-Signature']);
});

test('verifyDelivery with a list of secrets: each signature must match one of them, not necessarily the same', () => {
  const [oldS, newS] = ['old-secret-1', 'new-secret-2'];
  const body = '{"event":"test","data":{}}';
  const now = 1_700_000_000_000;
  // A delivery made with the old secret and retried after the change: X-Service-Signature the old one's.
  const retried = buildDeliveryHeaders({ deliveryId: 'dlv_v', event: 'test', secret: oldS, alsoSignWith: [newS], body, now });
  assert.deepEqual(verifyDelivery({ secret: [newS, oldS], body, headers: retried, now }), { ok: true });
  assert.deepEqual(verifyDelivery({ secret: newS, body, headers: retried, now }), { ok: false, reason: 'invalid_signature' });
  assert.deepEqual(verifyDelivery({ secret: oldS, body, headers: retried, now }), { ok: true });
  // Each must match: a right body signature with a forged webhook-signature is refused.
  const forged = { ...retried, 'webhook-signature': standardWebhookHeaders('dlv_v', 'forger-secret', body, now / 1000)['webhook-signature'] };
  assert.deepEqual(verifyDelivery({ secret: [newS, oldS], body, headers: forged, now }), { ok: false, reason: 'invalid_webhook_signature' });
  // No secret is no key: refused rather than an HMAC with an empty one.
  assert.throws(() => verifyDelivery({ secret: [], body, headers: retried, now }), TypeError);
  assert.throws(() => verifyDelivery({ secret: [newS, ''], body, headers: retried, now }), TypeError);
});

test('property: signatures agree with the independent libraries for arbitrary secrets and bodies', async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.string({ unit: 'grapheme', minLength: 8, maxLength: 64 }),
      fc.string({ unit: 'grapheme', maxLength: 500 }),
      async (secret, text) => {
        const body = JSON.stringify({ text });
        assert.equal(signBody(secret, body), await octokitSign(secret, body));
        const h = buildDeliveryHeaders({ deliveryId: 'dlv_p', event: 'test', secret, body });
        assert.deepEqual(new Webhook(b64(secret)).verify(body, h), { text });
        assert.deepEqual(verifyDelivery({ secret, body, headers: h }), { ok: true });
      },
    ),
    { numRuns: 100 },
  );
});
