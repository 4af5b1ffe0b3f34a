import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { before, describe, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
import { verifyWebhook, WebhookVerificationError } from '../../../src/client/index.js';
import { loadConfig } from '../../../src/config.js';
import { verifyDelivery } from '../../../src/modules/webhooks/signing.js';
import { useTestApp, type SuiteApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { emit, startWorker, waitFor } from './delivery-helpers.js';
import { startServer, type Received, type TestServer } from './helpers.js';

const OLD = 'whsec_rotation_old_1';
const NEW = 'whsec_rotation_new_2';
const HOUR = 3_600_000;

const serviceSig = (secret: string, body: Buffer) => `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;

/**
 * standardwebhooks' own verify, as a receiver runs it. It reads the real clock for its replay check, and these
 * attempts were stamped with the app's fake clock: it is read as of the attempt's own timestamp.
 */
function standardVerify(r: Received, secret: string): unknown {
  const wh = new Webhook(Buffer.from(secret, 'utf8').toString('base64'));
  const realNow = Date.now;
  Date.now = () => Number(r.headers['webhook-timestamp']) * 1000;
  try {
    return wh.verify(r.body.toString('utf8'), {
      'webhook-id': String(r.headers['webhook-id']),
      'webhook-timestamp': String(r.headers['webhook-timestamp']),
      'webhook-signature': String(r.headers['webhook-signature']),
    });
  } finally {
    Date.now = realNow;
  }
}

const signatures = (r: Received) => String(r.headers['webhook-signature']).split(' ');

async function createHook(t: SuiteApp, url: string, secret = OLD) {
  const r = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url, events: ['conversation.started'], secret } });
  assert.equal(r.status, 201, r.text);
  return r.body.data.id as string;
}

async function rotate(t: SuiteApp, id: string, secret = NEW) {
  const r = await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { secret } });
  assert.equal(r.status, 200, r.text);
  return r;
}

const storedSecrets = (t: SuiteApp, id: string) =>
  t.ctx.db.selectFrom('webhooks').select(['secret', 'previous_secret', 'secret_changed_at']).where('id', '=', id).executeTakeFirstOrThrow();

test('WEBHOOK_SECRET_OVERLAP: a duration, 24 h by default, 0 for none', () => {
  assert.equal(loadConfig({}).webhookSecretOverlapMs, 24 * HOUR);
  assert.equal(loadConfig({ WEBHOOK_SECRET_OVERLAP: '90m' }).webhookSecretOverlapMs, 90 * 60_000);
  assert.equal(loadConfig({ WEBHOOK_SECRET_OVERLAP: '0' }).webhookSecretOverlapMs, 0);
  assert.throws(() => loadConfig({ WEBHOOK_SECRET_OVERLAP: 'a day' }), /WEBHOOK_SECRET_OVERLAP="a day": must be a duration/);
});

for (const dialect of DIALECTS) {
  describe(`webhook secret rotation (${dialect})`, () => {
    // Retries an hour apart, moved through by the fake clock; the overlap at its default.
    const t = useTestApp(dialect, { fakeClock: true, env: { WEBHOOK_RETRY_DELAYS: '0,1h,1h,1h,1h', WEBHOOK_TIMEOUT: '2s' } });
    let rx: TestServer;
    /** Statuses the receiver answers on a path, in turn; 200 once they run out. */
    const answers = new Map<string, number[]>();
    const at = (path: string) => rx.received.filter((r) => r.url === path);

    before(async () => {
      rx = await startServer((req, res) => {
        res.writeHead(answers.get(req.url ?? '')?.shift() ?? 200);
        res.end();
      });
      t.beforeClose(() => rx.close());
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());
    });

    async function deliveriesOf(id: string) {
      const r = await t.request('GET', `/v1/webhooks/${id}/deliveries`, { key: t.key });
      assert.equal(r.status, 200, r.text);
      return r.body.data.deliveries as Array<{ id: string; status: string; attempts: unknown[] }>;
    }

    test('a delivery made before a rotation and retried after it verifies with the new secret; its X-Service-Signature stays the old one', async () => {
      answers.set('/before', [500]);
      const id = await createHook(t, `${rx.url}/before`);
      await emit(t, t.accountId, 'conversation.started', { conversationId: 'conv_rot_1' });
      await waitFor(async () => (await deliveriesOf(id))[0]?.attempts.length === 1, 'the first attempt recorded');
      await rotate(t, id);
      t.fakeClock.advance(HOUR);
      await waitFor(async () => (await deliveriesOf(id))[0]?.status === 'succeeded', 'the retry after the rotation succeeds');

      const [first, retry] = at('/before');
      assert.ok(first && retry);
      assert.equal(at('/before').length, 2);
      // The seed's signature is frozen with the delivery: byte-identical body and header, the old secret's.
      assert.ok(first.body.equals(retry.body));
      assert.equal(retry.headers['x-service-signature'], first.headers['x-service-signature']);
      assert.equal(retry.headers['x-service-signature'], serviceSig(OLD, retry.body));
      assert.equal(retry.headers['x-service-delivery-id'], first.headers['x-service-delivery-id']);
      // Before the rotation, one signature; after, the frozen secret's and the current one's (the previous secret is
      // the frozen one: not twice).
      assert.equal(signatures(first).length, 1);
      assert.equal(signatures(retry).length, 2);
      assert.deepEqual(standardVerify(retry, NEW), JSON.parse(retry.body.toString('utf8')));
      assert.deepEqual(standardVerify(retry, OLD), JSON.parse(retry.body.toString('utf8')));
      assert.throws(() => standardVerify(first, NEW), /No matching signature/);
      assert.throws(() => standardVerify(retry, 'whsec_some_other_secret'), /No matching signature/);

      // Parley's own receiver helpers check X-Service-Signature too: they need both secrets for such a retry.
      const now = Number(retry.headers['webhook-timestamp']) * 1000;
      assert.equal(verifyWebhook({ secret: [NEW, OLD], rawBody: retry.body, headers: retry.headers, now }).event, 'conversation.started');
      assert.throws(
        () => verifyWebhook({ secret: NEW, rawBody: retry.body, headers: retry.headers, now }),
        (err: unknown) => err instanceof WebhookVerificationError && err.reason === 'invalid_signature',
      );
      assert.deepEqual(verifyDelivery({ secret: [NEW, OLD], body: retry.body, headers: retry.headers, now }), { ok: true });

      // A manual retry is signed the same way: the frozen secret and the current one.
      const deliveryId = String(first.headers['x-service-delivery-id']);
      const manual = await t.request('POST', `/v1/webhooks/${id}/deliveries/${deliveryId}/retry`, { key: t.key });
      assert.equal(manual.status, 200, manual.text);
      const third = at('/before')[2]!;
      assert.equal(third.headers['x-service-signature'], first.headers['x-service-signature']);
      assert.deepEqual(standardVerify(third, NEW), JSON.parse(third.body.toString('utf8')));
    });

    test('within the overlap a new delivery (and a test send) also verifies with the old secret; after it, only the new secret signs', async () => {
      const id = await createHook(t, `${rx.url}/during`);
      const put = await rotate(t, id);
      const stored = await storedSecrets(t, id);
      assert.equal(stored.secret, NEW);
      assert.equal(stored.previous_secret, OLD);
      // The overlap runs from the change the PUT answered with.
      assert.equal(new Date(Number(stored.secret_changed_at)).toISOString(), put.body.data.updatedAt);
      t.fakeClock.set(Number(stored.secret_changed_at));

      t.fakeClock.advance(HOUR); // well within the 24 h
      await emit(t, t.accountId, 'conversation.started', { conversationId: 'conv_rot_2' });
      const during = await waitFor(() => at('/during')[0], 'the delivery made within the overlap');
      assert.equal(during.headers['x-service-signature'], serviceSig(NEW, during.body), 'a new delivery is made with the new secret');
      assert.equal(signatures(during).length, 2);
      assert.deepEqual(standardVerify(during, OLD), JSON.parse(during.body.toString('utf8')), 'a receiver that has not switched yet');
      assert.deepEqual(standardVerify(during, NEW), JSON.parse(during.body.toString('utf8')));

      const sent = await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key });
      assert.equal(sent.status, 200, sent.text);
      const testSend = at('/during').find((r) => r.headers['x-service-event'] === 'test')!;
      assert.deepEqual(standardVerify(testSend, OLD), JSON.parse(testSend.body.toString('utf8')));

      // Past the overlap: the old secret no longer signs, and the worker's sweep forgets it.
      t.fakeClock.advance(23 * HOUR);
      await emit(t, t.accountId, 'conversation.started', { conversationId: 'conv_rot_3' });
      const after = await waitFor(() => at('/during').find((r) => JSON.parse(r.body.toString('utf8')).data.conversationId === 'conv_rot_3'), 'the delivery made after the overlap');
      assert.deepEqual(signatures(after), signatures(after).slice(0, 1));
      assert.deepEqual(standardVerify(after, NEW), JSON.parse(after.body.toString('utf8')));
      assert.throws(() => standardVerify(after, OLD), /No matching signature/);
      await waitFor(async () => (await storedSecrets(t, id)).previous_secret === null, 'the previous secret cleared by the sweep');
    });

    test('neither secret is ever in an answer of the API', async () => {
      const created = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/quiet`, events: ['conversation.started'], secret: OLD } });
      const id = created.body.data.id as string;
      const put = await rotate(t, id);
      assert.equal((await storedSecrets(t, id)).previous_secret, OLD, 'kept, for the overlap');
      await emit(t, t.accountId, 'conversation.started', { conversationId: 'conv_rot_4' });
      const [d] = await waitFor(async () => {
        const list = await deliveriesOf(id);
        return list[0]?.status === 'succeeded' ? list : null;
      }, 'the delivery');
      const responses = [
        created,
        put,
        await t.request('GET', `/v1/webhooks/${id}`, { key: t.key }),
        await t.request('GET', '/v1/webhooks?limit=100', { key: t.key }),
        await t.request('PUT', `/v1/webhooks/${id}`, { key: t.key, body: { enabled: true } }),
        await t.request('GET', `/v1/webhooks/${id}/deliveries`, { key: t.key }),
        await t.request('GET', `/v1/webhooks/${id}/deliveries/${d!.id}`, { key: t.key }),
        await t.request('POST', `/v1/webhooks/${id}/deliveries/${d!.id}/retry`, { key: t.key }),
        await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key }),
      ];
      for (const r of responses) {
        assert.ok(r.status < 300, r.text);
        assert.ok(!r.text.includes(OLD) && !r.text.includes(NEW), r.text);
        assert.ok(!/secret/i.test(r.text), r.text);
      }
      assert.deepEqual(Object.keys(put.body.data).sort(), ['createdAt', 'disabledReason', 'enabled', 'events', 'id', 'updatedAt', 'url']);
    });
  });

  describe(`webhook secret rotation without a worker (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: true, env: { WEBHOOK_SECRET_OVERLAP: '2h', WEBHOOK_TIMEOUT: '2s' } });
    let rx: TestServer;
    before(async () => {
      rx = await startServer();
      t.beforeClose(() => rx.close());
    });

    test('the claim itself ends the overlap, before any sweep; the sweep then clears the stored secret', async () => {
      const id = await createHook(t, `${rx.url}/lazy`);
      await rotate(t, id);
      const changedAt = Number((await storedSecrets(t, id)).secret_changed_at);
      t.fakeClock.set(changedAt + 2 * HOUR - 1);
      assert.equal((await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key })).status, 200);
      assert.equal(signatures(rx.received.at(-1)!).length, 2, 'a millisecond before the end');
      await t.ctx.deliveries.sweep();
      assert.equal((await storedSecrets(t, id)).previous_secret, OLD, 'the sweep leaves it within the overlap');

      t.fakeClock.advance(1);
      assert.equal((await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key })).status, 200);
      const last = rx.received.at(-1)!;
      assert.equal((await storedSecrets(t, id)).previous_secret, OLD, 'no sweep has run yet');
      assert.equal(signatures(last).length, 1);
      assert.deepEqual(standardVerify(last, NEW), JSON.parse(last.body.toString('utf8')));
      await t.ctx.deliveries.sweep();
      assert.equal((await storedSecrets(t, id)).previous_secret, null);
    });

    test('setting the same secret again is no rotation; a second rotation keeps only the secret it replaced', async () => {
      const id = await createHook(t, `${rx.url}/twice`);
      await rotate(t, id, OLD);
      assert.deepEqual(await storedSecrets(t, id), { secret: OLD, previous_secret: null, secret_changed_at: null });
      await rotate(t, id, NEW);
      await rotate(t, id, 'whsec_rotation_third_3');
      const s = await storedSecrets(t, id);
      assert.equal(s.secret, 'whsec_rotation_third_3');
      assert.equal(s.previous_secret, NEW);
      assert.equal((await t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key })).status, 200);
      const got = rx.received.at(-1)!;
      assert.doesNotThrow(() => standardVerify(got, NEW));
      assert.throws(() => standardVerify(got, OLD), /No matching signature/);
    });
  });
}
