import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import http from 'node:http';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { IDEMPOTENCY_TTL_MS, idempotencyLeaseMs, requestFingerprint } from '../../src/http/idempotency.js';
import { createTestApp, useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';
import { startServer } from '../modules/webhooks/helpers.js';

const IK = (key: string) => ({ 'idempotency-key': key });

/** A webhook receiver that answers after `delayMs`. */
const slowReceiver = (delayMs: number) => startServer((_req, res) => setTimeout(() => res.writeHead(200).end('ok'), delayMs));

for (const dialect of DIALECTS) {
  describe(`Idempotency-Key (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: true });

    const countDocs = async () => (await t.request('GET', '/v1/documents', { key: t.key })).body.data.total as number;

    test('a retry with the same key gets the first answer again and creates nothing', async () => {
      const before = await countDocs();
      const body = { title: 'Returns', content: '30 days to send it back.' };
      const first = await t.request('POST', '/v1/documents', { key: t.key, body, headers: IK('create-returns-1') });
      assert.equal(first.status, 201, first.text);
      assert.equal(first.headers.get('idempotent-replayed'), null);
      const again = await t.request('POST', '/v1/documents', { key: t.key, body, headers: IK('create-returns-1') });
      assert.equal(again.status, 201);
      assert.equal(again.text, first.text, 'the same bytes');
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.match(again.headers.get('content-type') ?? '', /application\/json/);
      assert.notEqual(again.headers.get('x-request-id'), first.headers.get('x-request-id'));
      assert.equal(await countDocs(), before + 1);
      // Without a key, or with another key, the same body creates again.
      assert.equal((await t.request('POST', '/v1/documents', { key: t.key, body, headers: IK('create-returns-2') })).status, 201);
      assert.equal((await t.request('POST', '/v1/documents', { key: t.key, body })).status, 201);
      assert.equal(await countDocs(), before + 3);
    });

    test('the same key with another body or another endpoint is a 400 that names the header, and changes nothing', async () => {
      const first = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'Do you ship abroad?', answer: 'Yes.', category: 'shipping' }, headers: IK('k-mismatch') });
      assert.equal(first.status, 201, first.text);
      const faqs = (await t.request('GET', '/v1/faqs', { key: t.key })).body.data.total;
      const other = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'Do you ship to Mars?', answer: 'No.', category: 'shipping' }, headers: IK('k-mismatch') });
      assert.equal(other.status, 400);
      assert.equal(other.body.error.code, 'INVALID_REQUEST');
      assert.match(other.body.error.message, /Idempotency-Key "k-mismatch" was already used for a request with a different body/);
      assert.equal(other.headers.get('idempotency-status'), 'key-reused');
      const elsewhere = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'x', content: 'y' }, headers: IK('k-mismatch') });
      assert.equal(elsewhere.status, 400);
      assert.match(elsewhere.body.error.message, /already used for POST \/v1\/faqs/);
      assert.equal((await t.request('GET', '/v1/faqs', { key: t.key })).body.data.total, faqs);
    });

    test('refusals before the endpoint ran leave the key free; the endpoint\'s own refusals are kept', async () => {
      const bad = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'no content' }, headers: IK('k-validation') });
      assert.equal(bad.status, 400);
      const good = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'T', content: 'C' }, headers: IK('k-validation') });
      assert.equal(good.status, 201, 'a request that failed validation did not take the key');
      const missing = await t.request('POST', '/v1/webhooks/wh_missing/test', { key: t.key, body: {}, headers: IK('k-404') });
      assert.equal(missing.status, 404);
      const again = await t.request('POST', '/v1/webhooks/wh_missing/test', { key: t.key, body: {}, headers: IK('k-404') });
      assert.equal(again.status, 404);
      assert.equal(again.headers.get('idempotent-replayed'), 'true');
      assert.equal(again.text, missing.text);
    });

    test('keys belong to one account', async () => {
      const other = await t.account();
      const body = { title: 'Shared key', content: 'c' };
      const mine = await t.request('POST', '/v1/documents', { key: t.key, body, headers: IK('k-tenant') });
      const theirs = await t.request('POST', '/v1/documents', { key: other.key, body, headers: IK('k-tenant') });
      assert.equal(theirs.status, 201);
      assert.equal(theirs.headers.get('idempotent-replayed'), null);
      assert.notEqual(theirs.body.data.id, mine.body.data.id);
      const theirsOther = await t.request('POST', '/v1/faqs', { key: other.key, body: { question: 'q?', answer: 'a', category: 'general' }, headers: IK('k-tenant-2') });
      assert.equal(theirsOther.status, 201);
      // my use of their key name is not a mismatch with theirs
      assert.equal((await t.request('POST', '/v1/documents', { key: t.key, body, headers: IK('k-tenant-2') })).status, 201);
    });

    test('concurrent requests with one key run once: the receiver of a test send gets one request', async () => {
      const rx = await slowReceiver(300);
      try {
        const hook = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/hook`, events: ['escalation'], secret: 'whsec_idem_test' } });
        assert.equal(hook.status, 201, hook.text);
        const id = hook.body.data.id;
        const send = () => t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key, body: {}, headers: IK('k-concurrent') });
        const [a, b, c] = await Promise.all([send(), send(), send()]);
        assert.deepEqual([a.status, b.status, c.status], [a.status, a.status, a.status]);
        assert.ok(a.status < 300, a.text);
        assert.equal(new Set([a.text, b.text, c.text]).size, 1, 'one answer for all three');
        assert.equal([a, b, c].filter((r) => r.headers.get('idempotent-replayed') === 'true').length, 2);
        assert.equal(rx.received.length, 1);
      } finally {
        await rx.close();
      }
    });

    test("a test send's key is marked with its attempt's record, not by the delivery row written before the send", async () => {
      // Marked at the row, a node that died before (or while) sending left the key "carried out": the retry was
      // refused and the test was never sent (README, Decisions: the retry sends again).
      const rx = await slowReceiver(400);
      try {
        const hook = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/hook`, events: ['escalation'], secret: 'whsec_idem_mark' } });
        const key = 'k-test-send-mark';
        const sending = t.request('POST', `/v1/webhooks/${hook.body.data.id}/test`, { key: t.key, body: {}, headers: IK(key) });
        const row = () => t.ctx.db.selectFrom('idempotency_keys').select('committed_at').where('account_id', '=', t.accountId).where('key', '=', key).executeTakeFirst();
        const deadline = Date.now() + 5_000;
        while (rx.received.length === 0) {
          assert.ok(Date.now() < deadline, 'the receiver got the test send');
          await new Promise((r) => setTimeout(r, 5));
        }
        assert.equal((await row())?.committed_at, null, 'not marked while the send is in flight');
        const r = await sending;
        assert.equal(r.status, 200, r.text);
        assert.notEqual((await row())?.committed_at ?? null, null, 'marked once the attempt is recorded');
      } finally {
        await rx.close();
      }
    });

    test('a retry while the first request still runs past a second gets a 429 with Retry-After', async () => {
      const rx = await slowReceiver(1_800);
      try {
        const hook = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/hook`, events: ['escalation'], secret: 'whsec_idem_test' } });
        const id = hook.body.data.id;
        const send = () => t.request('POST', `/v1/webhooks/${id}/test`, { key: t.key, body: {}, headers: IK('k-slow') });
        const first = send();
        await new Promise((r) => setTimeout(r, 100));
        const second = await send();
        assert.equal(second.status, 429);
        assert.equal(second.body.error.code, 'RATE_LIMITED');
        assert.match(second.body.error.message, /still being processed/);
        assert.equal(second.headers.get('idempotency-status'), 'in-progress');
        assert.equal(second.headers.get('retry-after'), '1');
        assert.ok((await first).status < 300);
        const third = await send();
        assert.equal(third.headers.get('idempotent-replayed'), 'true');
        assert.equal(rx.received.length, 1);
      } finally {
        await rx.close();
      }
    });

    test('the order of a body\'s keys does not make another request: a reordered retry is a replay', async () => {
      const first = await t.request('POST', '/v1/chat/conversations', {
        key: t.key,
        raw: '{"customerId":"cus_order","metadata":{"plan":"pro","seats":3,"tags":[{"b":1,"a":2}]}}',
        headers: { 'content-type': 'application/json', ...IK('k-order') },
      });
      assert.equal(first.status, 201, first.text);
      const reordered = await t.request('POST', '/v1/chat/conversations', {
        key: t.key,
        raw: '{"metadata":{"tags":[{"a":2,"b":1}],"seats":3,"plan":"pro"},"customerId":"cus_order"}',
        headers: { 'content-type': 'application/json', ...IK('k-order') },
      });
      assert.equal(reordered.status, 201, reordered.text);
      assert.equal(reordered.headers.get('idempotent-replayed'), 'true');
      assert.equal(reordered.text, first.text);
      // Array order does carry meaning: that is another request.
      const otherArray = await t.request('POST', '/v1/chat/conversations', {
        key: t.key,
        raw: '{"customerId":"cus_order","metadata":{"plan":"pro","seats":3,"tags":[{"a":2,"b":1},{}]}}',
        headers: { 'content-type': 'application/json', ...IK('k-order') },
      });
      assert.equal(otherArray.status, 400);
      assert.match(otherArray.body.error.message, /header\.Idempotency-Key "k-order" was already used for a request with a different body/);
    });

    test('a key kept by the previous version (fingerprint of the body as sent, keys unsorted) still replays', async () => {
      const url = '/v1/documents';
      const raw = '{"title":"Legacy","content":"kept before the upgrade"}';
      const body = JSON.parse(raw) as Record<string, string>;
      const legacy = createHash('sha256').update(`POST ${url}\n`).update(JSON.stringify(body)).digest('hex');
      assert.notEqual(legacy, requestFingerprint('POST', url, body), 'title before content: not the canonical order');
      const now = t.fakeClock.now();
      await t.ctx.idempotency.claim({ accountId: t.accountId, key: 'k-legacy', fingerprint: legacy, method: 'POST', path: url, now });
      const kept = '{"success":true,"data":{"id":"doc_kept"}}';
      await t.ctx.idempotency.record({ accountId: t.accountId, key: 'k-legacy', lockedAt: now }, 201, kept);
      const retry = await t.request('POST', url, { key: t.key, raw, headers: { 'content-type': 'application/json', ...IK('k-legacy') } });
      assert.equal(retry.status, 201, retry.text);
      assert.equal(retry.headers.get('idempotent-replayed'), 'true');
      assert.equal(retry.text, kept);
    });

    test('the header sent twice is refused, not read as the joined "k1, k2"', async () => {
      const before = await countDocs();
      const body = '{"title":"Twice","content":"c"}';
      const r = await new Promise<{ status: number; body: any }>((resolve, reject) => {
        const u = new URL(t.baseUrl);
        const req = http.request(
          {
            host: u.hostname,
            port: u.port,
            method: 'POST',
            path: '/v1/documents',
            // An array makes node:http send one header line per value.
            headers: { authorization: `Bearer ${t.key}`, 'content-type': 'application/json', 'idempotency-key': ['k-twice-1', 'k-twice-2'], 'content-length': Buffer.byteLength(body) },
          },
          (res) => {
            let text = '';
            res.setEncoding('utf8').on('data', (c: string) => (text += c)).on('end', () => resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) }));
          },
        );
        req.on('error', reject).end(body);
      });
      assert.equal(r.status, 400);
      assert.deepEqual(r.body, {
        success: false,
        error: { code: 'INVALID_REQUEST', message: 'header.Idempotency-Key must be one value of 1 to 255 printable ASCII characters' },
      });
      assert.equal(await countDocs(), before);
      // One header line whose value has a comma is one key, as before.
      assert.equal((await t.request('POST', '/v1/documents', { key: t.key, raw: body, headers: { 'content-type': 'application/json', ...IK('k-once, really') } })).status, 201);
    });

    test('a key left without an answer (the process died) is taken over once the lease is over', async () => {
      const body = { title: 'After a crash', content: 'c' };
      const url = '/v1/documents';
      // What a process that died mid-request leaves: the key taken, no answer.
      await t.ctx.idempotency.claim({ accountId: t.accountId, key: 'k-crash', fingerprint: requestFingerprint('POST', url, body), method: 'POST', path: url, now: t.fakeClock.now() });
      const during = await t.request('POST', url, { key: t.key, body, headers: IK('k-crash') });
      assert.equal(during.status, 429, 'within the lease the first request may still be running');
      t.fakeClock.advance(idempotencyLeaseMs(t.config) + 1);
      const afterLease = await t.request('POST', url, { key: t.key, body, headers: IK('k-crash') });
      assert.equal(afterLease.status, 201, afterLease.text);
      assert.equal(afterLease.headers.get('idempotent-replayed'), null);
      const replay = await t.request('POST', url, { key: t.key, body, headers: IK('k-crash') });
      assert.equal(replay.text, afterLease.text);
    });

    test('keys expire after 24 hours: the worker sweeps them and the key can be used again', async () => {
      const first = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Day one', content: 'c' }, headers: IK('k-expiry') });
      assert.equal(first.status, 201);
      t.fakeClock.advance(IDEMPOTENCY_TTL_MS - 1_000);
      const stillKept = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Day two', content: 'c' }, headers: IK('k-expiry') });
      assert.equal(stillKept.status, 400);
      t.fakeClock.advance(2_000);
      const reused = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 'Day two', content: 'c' }, headers: IK('k-expiry') });
      assert.equal(reused.status, 201, 'an expired key is free even before the sweep');
      t.fakeClock.advance(IDEMPOTENCY_TTL_MS + 1);
      const swept = await t.ctx.idempotency.sweep(t.fakeClock.now());
      assert.ok(swept >= 1);
      const left = await t.ctx.db.selectFrom('idempotency_keys').select('key').where('account_id', '=', t.accountId).execute();
      assert.deepEqual(left, []);
    });

    test('a key must be 1 to 255 printable ASCII characters; GET, PUT and DELETE ignore it', async () => {
      for (const bad of ['x'.repeat(256), 'clé']) {
        const r = await t.request('POST', '/v1/documents', { key: t.key, body: { title: 't', content: 'c' }, headers: IK(bad) });
        assert.equal(r.status, 400, bad);
        assert.match(r.body.error.message, /header\.Idempotency-Key must be/);
      }
      assert.equal((await t.request('POST', '/v1/documents', { key: t.key, body: { title: 't', content: 'c' }, headers: IK('x'.repeat(255)) })).status, 201);
      const g1 = await t.request('GET', '/v1/documents', { key: t.key, headers: IK('k-get') });
      const g2 = await t.request('GET', '/v1/documents', { key: t.key, headers: IK('k-get') });
      assert.equal(g2.headers.get('idempotent-replayed'), null);
      assert.equal(g1.status, 200);
    });

    test('the chat channel: a resent message is answered once and appears once', async () => {
      const pub = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: {}, headers: IK('k-chat-start') });
      assert.equal(pub.status, 201, pub.text);
      const again = await t.request('POST', '/v1/chat/conversations', { key: t.key, body: {}, headers: IK('k-chat-start') });
      assert.equal(again.body.data.conversation.id, pub.body.data.conversation.id);
      const id = pub.body.data.conversation.id;
      const send = () => t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: t.key, body: { content: 'where is my order?' }, headers: IK('k-chat-msg') });
      const m1 = await send();
      const m2 = await send();
      assert.equal(m1.status, 200, m1.text);
      assert.equal(m2.text, m1.text);
      const conv = await t.request('GET', `/v1/conversations/${id}`, { key: t.key });
      const customer = conv.body.data.messages.filter((m: { role: string }) => m.role === 'customer');
      assert.equal(customer.length, 1);
    });

    test('an answer lost after the write committed: the key was marked in that write\'s transaction, and a retry is not run again', async () => {
      // The write of the answer fails, as if the process died right after the commit (group commit on SQLite
      // for documents, a plain transaction for FAQs).
      for (const [url, body, total] of [
        ['/v1/documents', { title: 'Lost answer', content: 'c' }, countDocs],
        ['/v1/faqs', { question: 'Lost answer?', answer: 'a', category: 'misc' }, async () => (await t.request('GET', '/v1/faqs', { key: t.key })).body.data.total as number],
      ] as const) {
        const key = `k-lost-${url.slice(4)}`;
        const before = await total();
        const record = t.ctx.idempotency.record;
        t.ctx.idempotency.record = () => Promise.reject(new Error('the process died'));
        let first;
        try {
          first = await t.request('POST', url, { key: t.key, body, headers: IK(key) });
        } finally {
          t.ctx.idempotency.record = record;
        }
        assert.equal(first.status, 201, first.text);
        const row = await t.ctx.db.selectFrom('idempotency_keys').selectAll().where('account_id', '=', t.accountId).where('key', '=', key).executeTakeFirstOrThrow();
        assert.equal(row.status_code, null);
        assert.notEqual(row.committed_at, null, 'marked in the transaction of the write');
        const during = await t.request('POST', url, { key: t.key, body, headers: IK(key) });
        assert.equal(during.status, 429, 'within the lease the first request may still be answering');
        t.fakeClock.advance(idempotencyLeaseMs(t.config) + 1);
        const after = await t.request('POST', url, { key: t.key, body, headers: IK(key) });
        assert.equal(after.status, 400, after.text);
        assert.match(after.body.error.message, /^header\.Idempotency-Key "k-lost-[a-z]+": the request sent with this key was carried out, but its answer was lost/);
        assert.equal(after.headers.get('idempotency-status'), 'answer-lost');
        assert.equal(await total(), before + 1, 'created once');
      }
    });

    test('a manual delivery retry whose answer was lost is not sent again: its key is marked with the attempt\'s record', async () => {
      const rx = await slowReceiver(0);
      try {
        const hook = await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: `${rx.url}/hook`, events: ['escalation'], secret: 'whsec_idem_retry' } });
        const sent = await t.request('POST', `/v1/webhooks/${hook.body.data.id}/test`, { key: t.key, body: {} });
        assert.equal(sent.status, 200, sent.text);
        const url = `/v1/webhooks/${hook.body.data.id}/deliveries/${sent.body.data.id}/retry`;
        const record = t.ctx.idempotency.record;
        t.ctx.idempotency.record = () => Promise.reject(new Error('the process died'));
        let first;
        try {
          first = await t.request('POST', url, { key: t.key, headers: IK('k-lost-retry') });
        } finally {
          t.ctx.idempotency.record = record;
        }
        assert.equal(first.status, 200, first.text);
        assert.equal(rx.received.length, 2, 'the test send and the retry');
        t.fakeClock.advance(idempotencyLeaseMs(t.config) + 1);
        const again = await t.request('POST', url, { key: t.key, headers: IK('k-lost-retry') });
        assert.equal(again.status, 400, again.text);
        assert.match(again.body.error.message, /was carried out, but its answer was lost/);
        assert.equal(rx.received.length, 2, 'not sent a third time');
      } finally {
        await rx.close();
      }
    });

    test('a 5xx after the write committed keeps the key: a retry is told it was carried out at once', async () => {
      const before = (await t.request('GET', '/v1/faqs', { key: t.key })).body.data.total as number;
      const create = t.ctx.services.faqs.create;
      t.ctx.services.faqs.create = async (...args) => {
        await create(...args);
        throw new Error('failed after the commit');
      };
      let failed;
      try {
        failed = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'Half done?', answer: 'a', category: 'misc' }, headers: IK('k-5xx-late') });
      } finally {
        t.ctx.services.faqs.create = create;
      }
      assert.equal(failed.status, 500);
      const retry = await t.request('POST', '/v1/faqs', { key: t.key, body: { question: 'Half done?', answer: 'a', category: 'misc' }, headers: IK('k-5xx-late') });
      assert.equal(retry.status, 400, retry.text);
      assert.match(retry.body.error.message, /was carried out, but its answer was lost/);
      assert.equal((await t.request('GET', '/v1/faqs', { key: t.key })).body.data.total, before + 1, 'created once');
    });

    test('a 5xx before anything was written releases the key, so a retry runs again', async () => {
      const u = await createTestApp(dialect);
      try {
        const a = await u.account();
        const body = { question: 'Do you ship abroad?', answer: 'Yes.', category: 'shipping' };
        await sql`alter table faqs rename to faqs_away`.execute(u.ctx.db);
        const failed = await u.request('POST', '/v1/faqs', { key: a.key, body, headers: IK('k-5xx') });
        assert.equal(failed.status, 500);
        assert.equal(failed.body.error.code, 'SERVER_ERROR');
        const rows = await u.ctx.db.selectFrom('idempotency_keys').select('key').where('account_id', '=', a.accountId).execute();
        assert.deepEqual(rows, []);
        await sql`alter table faqs_away rename to faqs`.execute(u.ctx.db);
        const retried = await u.request('POST', '/v1/faqs', { key: a.key, body, headers: IK('k-5xx') });
        assert.equal(retried.status, 201, retried.text);
        assert.equal(retried.headers.get('idempotent-replayed'), null);
      } finally {
        await u.close();
      }
    });

    test('OpenAPI: every POST takes the header and documents the replay header', async () => {
      const doc = (await t.request('GET', '/v1/openapi.json')).body;
      for (const [path, item] of Object.entries<any>(doc.paths)) {
        if (!item.post) continue;
        assert.ok(item.post.parameters.some((p: any) => p.in === 'header' && p.name === 'Idempotency-Key'), path);
        const ok = Object.entries<any>(item.post.responses).find(([s]) => s.startsWith('2'))![1];
        assert.ok(ok.headers['Idempotent-Replayed'], path);
      }
      assert.equal(doc.paths['/documents'].get.parameters.some((p: any) => p.name === 'Idempotency-Key'), false);
    });
  });
}
