import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { Parley, verifyWebhook, WebhookVerificationError, type WebhookEvent } from '../../src/client/index.js';
import { serviceSignature, standardSignature } from '../../src/client/webhooks.js';
import { EVENT_PAYLOADS } from '../../src/modules/webhooks/payloads.schemas.js';
import { SUBSCRIBABLE_EVENTS } from '../../src/modules/webhooks/events.js';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';
import { startServer, type Received, type TestServer } from '../modules/webhooks/helpers.js';
import { startWorker, waitFor } from '../modules/webhooks/delivery-helpers.js';

const SECRET = 'receiver-secret-123';
const ajv = new Ajv.default({ strict: false, allErrors: true });
addFormats.default(ajv);

/** verifyWebhook's refusal, with its reason. */
function refusal(fn: () => unknown): WebhookVerificationError['reason'] {
  try {
    fn();
  } catch (err) {
    assert.ok(err instanceof WebhookVerificationError, String(err));
    return err.reason;
  }
  assert.fail('verified');
}

/** Something only a typed event allows: `data` narrowed by `event` (a wrong field fails to compile). */
function describeEvent(e: WebhookEvent): string {
  switch (e.event) {
    case 'conversation.ended':
      return `${e.data.conversationId} ${e.data.status} after ${e.data.duration}s`;
    case 'workflow.triggered':
      return `${e.data.workflowSlug} ${JSON.stringify(e.data.extracted)}`;
    case 'rundown.generated':
      return `${e.data.rundownId} ${e.data.trigger}`;
    case 'conversation.erased':
      return `${e.data.conversationId} of ${e.data.customerId} erased`;
    default:
      return e.event;
  }
}

for (const dialect of DIALECTS) {
  describe(`verifyWebhook on real deliveries (${dialect})`, () => {
    const t = useTestApp(dialect);
    let receiver: TestServer;
    let byKind: Map<string, Received>;

    before(async () => {
      receiver = await startServer();
      t.beforeClose(() => receiver.close());
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());
      const parley = new Parley({ apiKey: t.key, baseUrl: t.baseUrl });
      const wh = await parley.webhooks.create({ url: `${receiver.url}/hooks`, events: [...SUBSCRIBABLE_EVENTS], secret: SECRET });

      // Every kind of event, through the client.
      await parley.workflows.create({ slug: 'book-demo', name: 'Book a demo', triggers: ['book a demo'], fields: [{ key: 'email', type: 'email' }] });
      const { conversation } = await parley.chat.start({ customerId: 'cus_hooks', metadata: { plan: 'gold' } });
      await parley.chat.sendMessage(conversation.id, { content: 'I would like to book a demo, my email is ann@example.com' });
      await parley.chat.contact(conversation.id, { email: 'ann@example.com', name: 'Ann', phone: '+44 20 7946 0000' });
      await parley.chat.escalate(conversation.id, { reason: 'customer_request' });
      await parley.chat.end(conversation.id);
      const day = 24 * 3600_000;
      await parley.rundowns.create({ from: new Date(Date.now() - day).toISOString(), to: new Date(Date.now() + day).toISOString() });
      await parley.webhooks.test(wh.id);

      const kinds = [...SUBSCRIBABLE_EVENTS, 'test'];
      const delivered = (wanted: string[]) => () => {
        const m = new Map(receiver.received.map((r) => [String(r.headers['x-service-event']), r]));
        return wanted.every((k) => m.has(k)) ? m : null;
      };
      // Erasing a conversation deletes its deliveries not yet sent: only once the others have arrived.
      await waitFor(delivered(kinds.filter((k) => k !== 'conversation.erased')), 'a delivery of each kind but conversation.erased');
      await parley.conversations.delete(conversation.id);
      byKind = await waitFor(delivered(kinds), `a delivery of each of ${kinds.join(', ')}`);
    });

    test('every delivery verifies, from a Buffer, a string or a Uint8Array, with Node or fetch headers', () => {
      assert.ok(receiver.received.length >= 8);
      for (const r of receiver.received) {
        const expected = JSON.parse(r.body.toString('utf8'));
        assert.deepEqual(verifyWebhook({ secret: SECRET, rawBody: r.body, headers: r.headers }), expected);
        assert.deepEqual(verifyWebhook({ secret: SECRET, rawBody: r.body.toString('utf8'), headers: r.headers }), expected);
        const copy = new Uint8Array(r.body.byteLength + 4).subarray(2, 2 + r.body.byteLength);
        copy.set(r.body);
        const fetchHeaders = new Headers(Object.entries(r.headers).map(([k, v]): [string, string] => [k, String(v)]));
        assert.deepEqual(verifyWebhook({ secret: SECRET, rawBody: copy, headers: fetchHeaders }), expected);
      }
    });

    test('each kind arrives with the body its schema describes, typed by its kind', () => {
      for (const [kind, r] of byKind) {
        const event = verifyWebhook({ secret: SECRET, rawBody: r.body, headers: r.headers });
        assert.equal(event.event, kind);
        const validate = ajv.compile(EVENT_PAYLOADS[kind as keyof typeof EVENT_PAYLOADS]);
        assert.ok(validate(event), `${kind}: ${ajv.errorsText(validate.errors)} in ${r.body.toString()}`);
      }
      const ended = verifyWebhook({ secret: SECRET, rawBody: byKind.get('conversation.ended')!.body, headers: byKind.get('conversation.ended')!.headers });
      assert.match(describeEvent(ended), /^conv_\w+ escalated after \d+s$/);
      const wf = verifyWebhook({ secret: SECRET, rawBody: byKind.get('workflow.triggered')!.body, headers: byKind.get('workflow.triggered')!.headers });
      assert.equal(describeEvent(wf), 'book-demo {"email":"ann@example.com"}');
      const erased = verifyWebhook({ secret: SECRET, rawBody: byKind.get('conversation.erased')!.body, headers: byKind.get('conversation.erased')!.headers });
      assert.match(describeEvent(erased), /^conv_\w+ of cus_hooks erased$/);
    });

    test('a tampered body, a wrong secret, an old or future timestamp fail', () => {
      const r = byKind.get('conversation.started')!;
      const body = r.body.toString('utf8');
      const ts = Number(r.headers['webhook-timestamp']) * 1000;
      const check = (o: { rawBody?: string; secret?: string; headers?: Record<string, unknown>; now?: number; toleranceSeconds?: number }) => () =>
        verifyWebhook({ secret: o.secret ?? SECRET, rawBody: o.rawBody ?? body, headers: (o.headers ?? r.headers) as never, now: o.now ?? ts, ...(o.toleranceSeconds ? { toleranceSeconds: o.toleranceSeconds } : {}) });

      assert.equal(check({})().event, 'conversation.started');
      assert.equal(refusal(check({ rawBody: body.replace('cus_hooks', 'cus_other') })), 'invalid_signature');
      assert.equal(refusal(check({ rawBody: `${body} ` })), 'invalid_signature');
      assert.equal(refusal(check({ secret: `${SECRET}x` })), 'invalid_signature');
      assert.equal(refusal(check({ now: ts + 301_000 })), 'timestamp_out_of_tolerance');
      assert.equal(refusal(check({ now: ts - 301_000 })), 'timestamp_out_of_tolerance');
      assert.equal(check({ now: ts + 299_000 })().event, 'conversation.started');
      assert.equal(refusal(check({ now: ts + 11_000, toleranceSeconds: 10 })), 'timestamp_out_of_tolerance');

      // A replay with a fresh timestamp cannot carry a valid signature without the secret.
      assert.equal(refusal(check({ headers: { ...r.headers, 'webhook-timestamp': String(ts / 1000 + 600) }, now: ts + 600_000 })), 'invalid_signature');
      // The service's own signature must agree too when it is there.
      assert.equal(refusal(check({ headers: { ...r.headers, 'x-service-signature': `sha256=${'0'.repeat(64)}` } })), 'invalid_signature');
      for (const h of ['webhook-id', 'webhook-timestamp', 'webhook-signature']) {
        const headers: Record<string, unknown> = { ...r.headers };
        delete headers[h];
        assert.equal(refusal(check({ headers })), 'missing_headers');
      }
      assert.equal(refusal(check({ headers: { ...r.headers, 'webhook-timestamp': '1e9' } })), 'invalid_timestamp');
      assert.throws(() => verifyWebhook({ secret: SECRET, rawBody: JSON.parse(body), headers: r.headers }), TypeError);
    });

    test('a correctly signed body that is not an event is refused', () => {
      const id = 'dlv_x';
      const ts = Math.floor(Date.now() / 1000);
      for (const body of ['not json', '[1,2]', '{"data":{}}']) {
        const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': standardSignature(id, ts, SECRET, body) };
        assert.equal(refusal(() => verifyWebhook({ secret: SECRET, rawBody: body, headers })), 'invalid_payload');
      }
    });
  });
}

describe('verifyWebhook options', () => {
  test('a tolerance or a "now" that is not a number is refused, not read as "no timestamp check"', () => {
    const id = 'dlv_old';
    const ts = Math.floor(Date.now() / 1000) - 86_400; // captured a day ago, replayed now
    const body = '{"event":"test","data":{}}';
    const headers = { 'webhook-id': id, 'webhook-timestamp': String(ts), 'webhook-signature': standardSignature(id, ts, SECRET, body) };
    assert.equal(refusal(() => verifyWebhook({ secret: SECRET, rawBody: body, headers })), 'timestamp_out_of_tolerance');
    // Read from a missing environment variable, say: Number(undefined) is NaN.
    for (const toleranceSeconds of [Number(undefined), -1]) {
      assert.throws(() => verifyWebhook({ secret: SECRET, rawBody: body, headers, toleranceSeconds }), TypeError, String(toleranceSeconds));
    }
    assert.throws(() => verifyWebhook({ secret: SECRET, rawBody: body, headers, now: new Date('not a date') }), TypeError);
    assert.throws(() => verifyWebhook({ secret: SECRET, rawBody: body, headers, now: Number.NaN }), TypeError);
  });

  test('while a secret is rotated, a list of secrets: each signature must match one of them', () => {
    const [oldS, newS] = ['rotation-old-1', 'rotation-new-2'];
    const id = 'dlv_rot';
    const now = Date.now();
    const ts = Math.floor(now / 1000);
    const body = '{"event":"test","data":{}}';
    // A delivery made with the old secret and retried after the change: its X-Service-Signature stays the old one's,
    // its webhook-signature carries both.
    const headers = {
      'webhook-id': id,
      'webhook-timestamp': String(ts),
      'webhook-signature': `${standardSignature(id, ts, oldS, body)} ${standardSignature(id, ts, newS, body)}`,
      'x-service-signature': serviceSignature(oldS, body),
    };
    assert.equal(verifyWebhook({ secret: [newS, oldS], rawBody: body, headers, now }).event, 'test');
    assert.equal(verifyWebhook({ secret: oldS, rawBody: body, headers, now }).event, 'test');
    assert.equal(refusal(() => verifyWebhook({ secret: newS, rawBody: body, headers, now })), 'invalid_signature');
    const forged = { ...headers, 'webhook-signature': standardSignature(id, ts, 'forger-secret', body) };
    assert.equal(refusal(() => verifyWebhook({ secret: [newS, oldS], rawBody: body, headers: forged, now })), 'invalid_signature');
    for (const secret of [[], [newS, ''], ''] as const) assert.throws(() => verifyWebhook({ secret, rawBody: body, headers, now }), TypeError);
  });
});
