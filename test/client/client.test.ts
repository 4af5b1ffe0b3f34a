import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { Parley, ParleyError, type Document, type ParleyErrorCode } from '../../src/client/index.js';
import { useTestApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';
import { startServer } from '../modules/webhooks/helpers.js';
import { startWorker, waitFor } from '../modules/webhooks/delivery-helpers.js';

/** The ParleyError a call rejects with (a rejection of any other kind fails the test). */
async function failure(p: Promise<unknown>): Promise<ParleyError> {
  try {
    await p;
  } catch (err) {
    assert.ok(err instanceof ParleyError, `expected a ParleyError, got ${String(err)}`);
    assert.ok(err instanceof Error);
    return err;
  }
  assert.fail('the call succeeded');
}

async function assertCode(p: Promise<unknown>, code: ParleyErrorCode, status: number, message?: RegExp) {
  const e = await failure(p);
  assert.equal(e.code, code, e.message);
  assert.equal(e.status, status);
  if (message) assert.match(e.message, message);
  return e;
}

describe('new Parley()', () => {
  test('refuses a missing or blank apiKey or baseUrl, naming it', () => {
    assert.throws(() => new Parley({ apiKey: '', baseUrl: 'http://127.0.0.1:3000' }), /apiKey is required/);
    assert.throws(() => new Parley({ baseUrl: 'http://127.0.0.1:3000' } as never), /apiKey is required/);
    assert.throws(() => new Parley({ apiKey: 'sk_x' } as never), /baseUrl is required/);
    assert.throws(() => new Parley({ apiKey: 'sk_x', baseUrl: '127.0.0.1:3000' }), /baseUrl/);
    assert.throws(() => new Parley({ apiKey: 'sk_x', baseUrl: 'ftp://example.com' }), /http\(s\)/);
    assert.throws(() => new Parley(undefined as never), /apiKey is required/);
    assert.throws(() => new Parley({ apiKey: 'sk_x', baseUrl: 'http://h', maxRetries: -1 }), /maxRetries/);
    assert.throws(() => new Parley({ apiKey: 'sk_x', baseUrl: 'http://h', timeoutMs: 0 }), /timeoutMs/);
  });

  test('baseUrl: /v1 is added when missing, kept when given', () => {
    const base = (b: string) => new Parley({ apiKey: 'sk_x', baseUrl: b }).baseUrl;
    assert.equal(base('http://127.0.0.1:3000'), 'http://127.0.0.1:3000/v1');
    assert.equal(base('http://127.0.0.1:3000/'), 'http://127.0.0.1:3000/v1');
    assert.equal(base('http://127.0.0.1:3000/v1'), 'http://127.0.0.1:3000/v1');
    assert.equal(base('http://127.0.0.1:3000/v1/'), 'http://127.0.0.1:3000/v1');
    assert.equal(base('https://example.com/support'), 'https://example.com/support/v1');
  });
});

for (const dialect of DIALECTS) {
  describe(`client against the API (${dialect})`, () => {
    const t = useTestApp(dialect);
    let parley: Parley;
    before(() => {
      parley = new Parley({ apiKey: t.key, baseUrl: t.baseUrl });
    });

    test('documents: create, list, iterate, get, update, delete', async () => {
      const created = await parley.documents.create({ title: 'Returns', content: 'Thirty days to return anything.' });
      assert.match(created.id, /^doc_/);
      assert.deepEqual(Object.keys(created).sort(), ['createdAt', 'id', 'status', 'title']);
      assert.equal(created.status, 'active');

      const got: Document = await parley.documents.get(created.id);
      assert.equal(got.content, 'Thirty days to return anything.');

      for (let i = 0; i < 4; i++) await parley.documents.create({ title: `Draft ${i}`, content: 'x', status: 'draft' });
      const page = await parley.documents.list({ status: 'draft', limit: 3 });
      assert.equal(page.total, 4);
      assert.equal(page.limit, 3);
      assert.equal(page.documents.length, 3);
      assert.ok(page.documents.every((d) => d.status === 'draft'));

      // Pages of 2 over 5 documents: three requests, every document once, newest first.
      const all = await parley.documents.list({ limit: 100 });
      const walked: string[] = [];
      for await (const d of parley.documents.iterate({ status: 'all', limit: 2 })) walked.push(d.id);
      assert.deepEqual(walked, all.documents.map((d) => d.id));
      assert.equal(walked.length, 5);
      const fromOffset: string[] = [];
      for await (const d of parley.documents.iterate({ offset: 3, limit: 1 })) fromOffset.push(d.id);
      assert.deepEqual(fromOffset, walked.slice(3));

      const updated = await parley.documents.update(created.id, { title: 'Returns policy' });
      assert.equal(updated.title, 'Returns policy');
      assert.equal(updated.content, got.content);
      assert.ok(updated.updatedAt > got.updatedAt);

      assert.deepEqual(await parley.documents.delete(created.id), { deleted: true });
      await assertCode(parley.documents.get(created.id), 'NOT_FOUND', 404);
    });

    test('faqs: create, list by category, iterate, get, update, delete', async () => {
      const faq = await parley.faqs.create({ question: 'Do you ship abroad?', answer: 'To the EU and the UK.', category: 'shipping' });
      await parley.faqs.create({ question: 'Gift wrap?', answer: 'Yes, for 2 EUR.', category: 'extras', status: 'pending' });
      assert.equal(faq.status, 'approved');
      const shipping = await parley.faqs.list({ category: 'shipping' });
      assert.deepEqual(shipping.faqs.map((f) => f.id), [faq.id]);
      const ids: string[] = [];
      for await (const f of parley.faqs.iterate({ limit: 1 })) ids.push(f.id);
      assert.equal(ids.length, 2);
      assert.equal(ids[1], faq.id);
      assert.deepEqual(await parley.faqs.get(faq.id), faq);
      const approved = await parley.faqs.update(faq.id, { answer: 'To the EU, the UK and Norway.' });
      assert.equal(approved.answer, 'To the EU, the UK and Norway.');
      assert.equal(approved.question, faq.question);
      assert.deepEqual(await parley.faqs.delete(faq.id), { deleted: true });
      await assertCode(parley.faqs.delete(faq.id), 'NOT_FOUND', 404);
    });

    test('chat: start, send a message, end; then read it through conversations and analytics', async () => {
      const since = new Date(Date.now() - 1000).toISOString();
      const started = await parley.chat.start({ customerId: 'cus_walk', customerLabel: 'Ann' });
      const id = started.conversation.id;
      assert.match(id, /^conv_/);
      assert.equal(started.messages.length, 1);
      assert.equal(started.messages[0]!.role, 'assistant');

      const sent = await parley.chat.sendMessage(id, { content: 'How do I get my money back?' });
      assert.deepEqual(sent.messages.map((m) => m.role), ['customer', 'assistant']);
      assert.equal(sent.messages[0]!.content, 'How do I get my money back?');
      assert.equal((await parley.chat.get(id)).conversation.messageCount, 3);

      const ended = await parley.chat.end(id);
      assert.notEqual(ended.conversation.endedAt, null);
      await assertCode(parley.chat.sendMessage(id, { content: 'hello?' }), 'INVALID_REQUEST', 400, /ended/);

      const conv = await parley.conversations.get(id);
      assert.equal(conv.customerId, 'cus_walk');
      assert.deepEqual(conv.messages.map((m) => m.role), ['assistant', 'customer', 'assistant']);
      assert.notEqual(conv.endedAt, null);
      const list = await parley.conversations.list({ customerId: 'cus_walk', status: 'all' });
      assert.deepEqual(list.conversations.map((c) => c.id), [id]);
      const walked: string[] = [];
      for await (const c of parley.conversations.iterate({ from: since })) walked.push(c.id);
      assert.deepEqual(walked, [id]);

      const overview = await parley.analytics.overview({ from: since });
      assert.equal(overview.conversations, 1);
      assert.equal(overview.messages, 3);
      const topics = await parley.analytics.topics({ from: since, limit: 5 });
      assert.ok(Array.isArray(topics.topics));
      await assertCode(parley.analytics.overview({ from: 'yesterday' }), 'INVALID_REQUEST', 400, /query\.from/);

      // Erased: gone from the owner's API and the chat alike.
      assert.deepEqual(await parley.conversations.delete(id), { deleted: true });
      await assertCode(parley.conversations.get(id), 'NOT_FOUND', 404);
      await assertCode(parley.chat.get(id), 'NOT_FOUND', 404);
      await assertCode(parley.conversations.delete(id), 'NOT_FOUND', 404);

      // Every conversation of one customer at once.
      const ids = [(await parley.chat.start({ customerId: 'cus_gone' })).conversation.id, (await parley.chat.start({ customerId: 'cus_gone' })).conversation.id];
      assert.deepEqual(await parley.conversations.deleteByCustomer('cus_gone'), { deleted: true, count: 2 });
      for (const gone of ids) await assertCode(parley.conversations.get(gone), 'NOT_FOUND', 404);
      assert.deepEqual(await parley.conversations.deleteByCustomer('cus_gone'), { deleted: true, count: 0 });
    });

    test('chat: contact and escalate', async () => {
      const { conversation } = await parley.chat.start();
      const contacted = await parley.chat.contact(conversation.id, { email: 'ann@example.com', name: 'Ann' });
      assert.equal(contacted.conversation.customerEmail, 'ann@example.com');
      const escalated = await parley.chat.escalate(conversation.id, { reason: 'vip' });
      assert.equal(escalated.conversation.status, 'escalated');
      assert.equal(escalated.conversation.escalationReason, 'vip');
    });

    test('assistant settings, workflows and rundowns', async () => {
      const settings = await parley.assistantSettings.update({ name: 'Robin' });
      assert.equal(settings.name, 'Robin');
      assert.deepEqual(await parley.assistantSettings.get(), settings);
      const faq = await parley.faqs.create({ question: 'Do you sell gift cards?', answer: 'Yes, from $10 to $500, sent by email.', category: 'gift-cards' });
      const tried = await parley.assistant.preview({ content: 'do you sell gift cards?' });
      assert.equal(tried.outcome, 'answer');
      assert.deepEqual(tried.sources, [faq.id]);
      assert.equal(tried.matches[0]!.title, 'Do you sell gift cards?');

      const wf = await parley.workflows.create({ slug: 'book-demo', name: 'Book a demo', triggers: ['book a demo'], fields: [{ key: 'email', type: 'email' }] });
      assert.equal(wf.enabled, true);
      assert.deepEqual((await parley.workflows.list({ enabled: true })).workflows.map((w) => w.id), [wf.id]);
      assert.equal((await parley.workflows.list({ enabled: false })).total, 0);
      const fired: string[] = [];
      for (const who of ['ann', 'bob', 'cy']) {
        const c = await parley.chat.start({ customerId: who });
        await parley.chat.sendMessage(c.conversation.id, { content: `I'd like to book a demo, ${who}@example.com` });
        fired.unshift(c.conversation.id);
      }
      const runs = await parley.workflows.runs(wf.id, { limit: 2 });
      assert.equal(runs.total, 3);
      assert.deepEqual(runs.runs.map((r) => [r.customerId, r.extracted.email]), [['cy', 'cy@example.com'], ['bob', 'bob@example.com']]);
      const walkedRuns: string[] = [];
      for await (const r of parley.workflows.iterateRuns(wf.id, { limit: 1 })) walkedRuns.push(r.conversationId);
      assert.deepEqual(walkedRuns, fired, 'every run once, newest first, a page of one at a time');
      const off = await parley.workflows.update(wf.id, { enabled: false, reply: null });
      assert.equal(off.enabled, false);
      assert.deepEqual(await parley.workflows.get(wf.id), off);
      assert.deepEqual(await parley.workflows.delete(wf.id), { deleted: true });

      const rd = await parley.rundowns.create({ from: '2026-01-01', to: '2026-01-08' });
      assert.equal(rd.trigger, 'manual');
      assert.equal(rd.from, '2026-01-01T00:00:00.000Z');
      assert.deepEqual(await parley.rundowns.get(rd.id), rd);
      assert.deepEqual((await parley.rundowns.list({ trigger: 'manual' })).rundowns.map((r) => r.id), [rd.id]);
      const walked: string[] = [];
      for await (const r of parley.rundowns.iterate()) walked.push(r.id);
      assert.deepEqual(walked, [rd.id]);
    });

    test('webhooks: create, get, list, test-send, deliveries list/get/retry, update, delete', async () => {
      const receiver = await startServer();
      t.beforeClose(() => receiver.close());
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());

      const wh = await parley.webhooks.create({ url: `${receiver.url}/hooks`, events: ['conversation.escalated'], secret: 'a-long-secret' });
      assert.deepEqual(wh.events, ['escalation']);
      assert.equal(wh.enabled, true);
      assert.equal('secret' in wh, false);
      assert.deepEqual(await parley.webhooks.get(wh.id), wh);
      assert.deepEqual((await parley.webhooks.list()).webhooks.map((w) => w.id), [wh.id]);

      const sent = await parley.webhooks.test(wh.id, { message: 'hello from the client' });
      assert.equal(sent.event, 'test');
      assert.equal(sent.status, 'succeeded');
      assert.equal(JSON.parse(sent.body).data.message, 'hello from the client');
      assert.equal(receiver.received.length, 1);
      assert.equal(receiver.received[0]!.headers['x-service-delivery-id'], sent.id);

      const { conversation } = await parley.chat.start();
      await parley.chat.escalate(conversation.id);
      await waitFor(() => receiver.received.length >= 2, 'the escalation delivery');
      const deliveries = await parley.webhooks.deliveries.list(wh.id);
      assert.equal(deliveries.total, 2);
      assert.deepEqual(deliveries.deliveries.map((d) => d.event).sort(), ['escalation', 'test']);
      const walked: string[] = [];
      for await (const d of parley.webhooks.deliveries.iterate(wh.id, { status: 'succeeded', limit: 1 })) walked.push(d.id);
      assert.equal(walked.length, 2);
      const one = await parley.webhooks.deliveries.get(wh.id, sent.id);
      assert.equal(one.body, sent.body);
      const retried = await parley.webhooks.deliveries.retry(wh.id, sent.id);
      assert.equal(retried.attempts.length, 2);
      assert.equal(retried.attempts[1]!.kind, 'manual');
      assert.equal(receiver.received.length, 3);

      const disabled = await parley.webhooks.update(wh.id, { enabled: false });
      assert.equal(disabled.enabled, false);
      assert.deepEqual(await parley.webhooks.delete(wh.id), { deleted: true });
      await assertCode(parley.webhooks.deliveries.list(wh.id), 'NOT_FOUND', 404);
    });

    test('events: list with filters, iterate, get; each item typed by its kind', async () => {
      // An account of its own: the suite's account has the other tests' events.
      const own = await t.account();
      const p = new Parley({ apiKey: own.key, baseUrl: t.baseUrl });
      const started: string[] = [];
      for (const who of ['ann', 'bob']) {
        const c = await p.chat.start({ customerId: who });
        await p.chat.sendMessage(c.conversation.id, { content: `hello from ${who}` });
        started.unshift(c.conversation.id);
      }
      await p.chat.escalate(started[0]!, { reason: 'vip' });

      const page = await p.events.list({ limit: 3 });
      assert.deepEqual([page.total, page.limit, page.offset, page.events.length], [9, 3, 0, 3]);
      assert.equal(page.events[0]!.event, 'escalation');
      const walked: string[] = [];
      for await (const e of p.events.iterate({ limit: 2 })) walked.push(e.id);
      assert.equal(walked.length, 9);
      assert.equal(new Set(walked).size, 9);
      assert.deepEqual(walked.slice(0, 3), page.events.map((e) => e.id));

      // A list of kinds is sent comma-separated; the narrowed item has its kind's fields.
      const kinds = await p.events.list({ event: ['conversation.started', 'escalation'] });
      assert.deepEqual(kinds.events.map((e) => e.event), ['escalation', 'conversation.started', 'conversation.started']);
      assert.deepEqual((await p.events.list({ event: 'conversation.started,escalation' })).events, kinds.events);
      const starts: string[] = [];
      for await (const e of p.events.iterate({ event: 'conversation.started', limit: 1 })) {
        if (e.event === 'conversation.started') starts.push(e.data.conversationId);
      }
      assert.deepEqual(starts, started);
      const first = page.events[0]!;
      assert.deepEqual(await p.events.get(first.id), first);
      if (first.event === 'escalation') assert.equal(first.data.reason, 'vip');
      else assert.fail(`expected the escalation first, got ${first.event}`);

      const future = await p.events.list({ from: new Date(Date.now() + 86_400_000).toISOString() });
      assert.deepEqual([future.total, future.events], [0, []]);
      await assertCode(p.events.list({ event: ['test' as 'escalation'] }), 'INVALID_REQUEST', 400, /query\.event "test" is not in the event feed/);
      await assertCode(parley.events.get(first.id), 'NOT_FOUND', 404, new RegExp(`event ${first.id} not found`));
    });

    test('webhooks: recover what a disabled webhook missed, once re-enabled', async () => {
      const receiver = await startServer();
      t.beforeClose(() => receiver.close());
      const worker = startWorker(t);
      t.beforeClose(() => worker.stop());
      // An account of its own: a recover also takes its account's events from before the webhook existed.
      const parley = new Parley({ apiKey: (await t.account()).key, baseUrl: t.baseUrl });
      const since = new Date(Date.now() - 1_000).toISOString();
      const wh = await parley.webhooks.create({ url: `${receiver.url}/recover`, events: ['escalation'], secret: 'a-long-secret' });
      await parley.webhooks.update(wh.id, { enabled: false });
      const { conversation } = await parley.chat.start();
      await parley.chat.escalate(conversation.id);
      await assertCode(parley.webhooks.recover(wh.id, { since }), 'INVALID_REQUEST', 400, /disabled; re-enable it/);

      await parley.webhooks.update(wh.id, { enabled: true });
      const recovery = await parley.webhooks.recover(wh.id, { since });
      assert.equal(recovery.recovered, 1);
      assert.equal(recovery.since, since);
      assert.equal(recovery.next, null);
      await waitFor(() => receiver.received.length === 1, 'the recovered escalation');
      assert.equal(JSON.parse(receiver.received[0]!.body.toString()).data.conversationId, conversation.id);
      assert.equal((await parley.webhooks.recover(wh.id, { since, until: recovery.until })).recovered, 0);
      await assertCode(parley.webhooks.recover(wh.id, { since: '2999-01-01' }), 'INVALID_REQUEST', 400, /body\.since must not be in the future/);
    });

    test('an Idempotency-Key of your own: the repeat gets the first answer, nothing runs twice', async () => {
      const key = `walk-${Date.now()}`;
      const a = await parley.documents.create({ title: 'Once', content: 'only once' }, { idempotencyKey: key });
      const b = await parley.documents.create({ title: 'Once', content: 'only once' }, { idempotencyKey: key });
      assert.deepEqual(b, a);
      const c = await parley.documents.create({ title: 'Once', content: 'only once' });
      assert.notEqual(c.id, a.id, 'without a key of its own each call is a new request');
      await assertCode(parley.documents.create({ title: 'Other', content: 'x' }, { idempotencyKey: key }), 'INVALID_REQUEST', 400, /Idempotency-Key/i);
      const reused = await parley.documents.create({ title: 'Other', content: 'x' }, { idempotencyKey: key }).catch((e: unknown) => e);
      assert.ok(reused instanceof ParleyError);
      assert.equal(reused.idempotencyStatus, 'key-reused');
      const plain = await parley.documents.get('doc_missing').catch((e: unknown) => e);
      assert.ok(plain instanceof ParleyError);
      assert.equal(plain.idempotencyStatus, null);
    });

    test('lastRateLimit holds the X-RateLimit-* of the latest answer', async () => {
      const fresh = new Parley({ apiKey: t.key, baseUrl: `${t.baseUrl}/v1` });
      assert.equal(fresh.lastRateLimit, null);
      await fresh.documents.list({ limit: 1 });
      const first = fresh.lastRateLimit!;
      assert.equal(first.limit, 100_000);
      assert.ok(first.remaining < first.limit);
      assert.ok(Math.abs(first.reset - Date.now() / 1000) <= 61, `reset ${first.reset} is Unix seconds within the minute`);
      await fresh.documents.list({ limit: 1 });
      assert.ok(fresh.lastRateLimit!.remaining < first.remaining || fresh.lastRateLimit!.reset > first.reset);
    });

    test('404 maps to NOT_FOUND with the request id', async () => {
      const e = await assertCode(parley.documents.get('doc_00000000000000000000000000'), 'NOT_FOUND', 404, /doc_0+ not found/);
      assert.match(e.requestId ?? '', /^req_/);
      assert.equal(e.headers['x-request-id'], e.requestId);
      assert.equal(e.retryAfter, null);
      assert.equal(e.name, 'ParleyError');
    });

    test('400 names the field and the rule', async () => {
      await assertCode(parley.documents.create({ title: 'x'.repeat(1001), content: 'c' }), 'INVALID_REQUEST', 400, /body\.title must be at most 1000 characters/);
      await assertCode(parley.faqs.create({ question: 'q', answer: 'a', category: 'Not A Slug' }), 'INVALID_REQUEST', 400, /body\.category must be a slug/);
      await assertCode(parley.documents.list({ limit: 500 }), 'INVALID_REQUEST', 400, /query\.limit must be at most 100/);
    });

    test('401 with a bad key; 403 for a public key off the chat channel', async () => {
      const bad = new Parley({ apiKey: 'sk_not_a_real_key', baseUrl: t.baseUrl });
      const e = await assertCode(bad.documents.list(), 'UNAUTHORIZED', 401);
      assert.match(e.requestId ?? '', /^req_/);
      const pub = await t.account({ keyType: 'public', scopes: ['chat'] });
      const widget = new Parley({ apiKey: pub.key, baseUrl: t.baseUrl });
      await assertCode(widget.documents.list(), 'FORBIDDEN', 403);
      const { conversation } = await widget.chat.start();
      assert.match(conversation.id, /^conv_/);
    });

    test("another account's resource is NOT_FOUND, never its data", async () => {
      const other = await t.account();
      const theirs = new Parley({ apiKey: other.key, baseUrl: t.baseUrl });
      const doc = await theirs.documents.create({ title: 'Private', content: 'theirs' });
      const faq = await theirs.faqs.create({ question: 'Q', answer: 'A', category: 'c' });
      const { conversation } = await theirs.chat.start();
      await assertCode(parley.documents.get(doc.id), 'NOT_FOUND', 404);
      await assertCode(parley.documents.update(doc.id, { title: 'mine now' }), 'NOT_FOUND', 404);
      await assertCode(parley.faqs.delete(faq.id), 'NOT_FOUND', 404);
      await assertCode(parley.conversations.get(conversation.id), 'NOT_FOUND', 404);
      await assertCode(parley.chat.sendMessage(conversation.id, { content: 'hi' }), 'NOT_FOUND', 404);
      assert.equal((await theirs.documents.get(doc.id)).title, 'Private');
    });
  });
}
