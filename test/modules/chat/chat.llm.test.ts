import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { FakeClock } from '../../../src/lib/clock.js';
import { PausingProvider } from '../../../src/modules/assistant/llm.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

/** Promise.withResolvers, which Node 20 lacks. */
function deferred() {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** A fake OpenAI-compatible endpoint on 127.0.0.1: the only thing outside the machine the assistant talks to. */
async function fakeLlm() {
  // `custom`: answers `content` with "{first}" replaced by the first passage id.
  // `held`: answers like `ok` once `release` is called; `arrived` resolves when the request is in.
  const state = {
    mode: 'ok' as 'ok' | 'error' | 'slow' | 'custom' | 'held',
    content: '',
    calls: [] as any[],
    held: deferred(),
    arrived: deferred(),
  };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => (body += c));
    req.on('end', () => {
      const parsed = JSON.parse(body);
      state.calls.push({ url: req.url, auth: req.headers.authorization, body: parsed });
      if (state.mode === 'error') return res.writeHead(500).end('{"error":"boom"}');
      const ids = [...parsed.messages[0].content.matchAll(/^\[(\S+)\]/gm)].map((m: RegExpMatchArray) => m[1]);
      const reply = () => {
        res.writeHead(200, { 'content-type': 'application/json' });
        const content = state.mode === 'custom' ? state.content.replaceAll('{first}', ids[0]!) : `LLM says: refunds arrive within 5 to 10 business days.\nSOURCES: ${ids[0]}`;
        res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content } }] }));
      };
      if (state.mode === 'slow') setTimeout(reply, 3_000);
      else if (state.mode === 'held') {
        state.arrived.resolve();
        void state.held.promise.then(reply);
      } else reply();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return { state, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close: () => new Promise<void>((r) => server.close(() => r())) };
}

for (const dialect of DIALECTS) {
  describe(`assistant with an OpenAI-compatible endpoint (${dialect})`, () => {
    let t: TestApp;
    let llm: Awaited<ReturnType<typeof fakeLlm>>;
    let key: string;
    let faqId: string;
    const warnings: Array<{ obj: object; msg?: string }> = [];
    const log = { info() {}, error() {}, warn: (obj: object, msg?: string) => warnings.push({ obj, msg }) };
    before(async () => {
      llm = await fakeLlm();
      t = await createTestApp(dialect, { env: { LLM_BASE_URL: llm.url, LLM_API_KEY: 'sk-test', LLM_MODEL: 'tiny', LLM_TIMEOUT: '1500ms' }, log, fakeClock: true });
      ({ key } = await t.account());
      const f = await t.request('POST', '/v1/faqs', { key, body: { question: 'How long do refunds take?', answer: 'Refunds take 5 to 10 business days.', category: 'returns' } });
      faqId = f.body.data.id;
    });
    after(async () => {
      // The fake endpoint closes even when the app's setup failed, or its listener keeps the file alive.
      try {
        await t?.close();
      } finally {
        await llm.close();
      }
    });

    const ask = async (content: string) => {
      const c = await t.request('POST', '/v1/chat/conversations', { key });
      const r = await t.request('POST', `/v1/chat/conversations/${c.body.data.conversation.id}/messages`, { key, body: { content } });
      return r.body.data.messages[1] as { content: string; sources: string[] };
    };

    test('a confident question is phrased by the model, which is given the passages and must cite them', async () => {
      llm.state.mode = 'ok';
      const before = llm.state.calls.length;
      const reply = await ask('how long do refunds take?');
      assert.equal(llm.state.calls.length, before + 1);
      const call = llm.state.calls.at(-1);
      assert.equal(call.url, '/v1/chat/completions');
      assert.equal(call.auth, 'Bearer sk-test');
      assert.equal(call.body.model, 'tiny');
      assert.match(call.body.messages[0].content, new RegExp(`\\[${faqId}\\]`));
      assert.equal(reply.content, 'LLM says: refunds arrive within 5 to 10 business days.');
      assert.deepEqual(reply.sources, [faqId]);
    });

    test('a preview asks the model as a conversation would, and says the model worded it', async () => {
      llm.state.mode = 'ok';
      const before = llm.state.calls.length;
      const r = await t.request('POST', '/v1/assistant/preview', { key, body: { content: 'how long do refunds take?' } });
      assert.equal(r.status, 200, r.text);
      assert.equal(llm.state.calls.length, before + 1);
      assert.equal(r.body.data.provider, 'llm');
      assert.equal(r.body.data.outcome, 'answer');
      assert.equal(r.body.data.reply, 'LLM says: refunds arrive within 5 to 10 business days.');
      assert.deepEqual(r.body.data.sources, [faqId]);
      assert.equal(r.body.data.matches[0].id, faqId);
    });

    test('a failing or slow model falls back to the built-in answerer, and the operator log says so', async () => {
      for (const mode of ['error', 'slow'] as const) {
        llm.state.mode = mode;
        warnings.length = 0;
        const reply = await ask('how long do refunds take?');
        assert.doesNotMatch(reply.content, /LLM says/, mode);
        assert.match(reply.content, /5 to 10 business days/, mode);
        assert.deepEqual(reply.sources, [faqId], mode);
        assert.equal(warnings.length, 1, mode);
        assert.match(warnings[0]!.msg ?? '', /assistant provider failed/, mode);
      }
    });

    test('a provider that keeps failing is paused after three failures in a row, and logged once a minute per reason', async () => {
      const clock = t.clock as FakeClock;
      const msgs = () => warnings.map((w) => w.msg ?? '');
      llm.state.mode = 'error';
      warnings.length = 0;
      clock.advance(61_000); // past the previous test's warnings
      const calls = llm.state.calls.length;
      for (let i = 0; i < 4; i++) assert.deepEqual((await ask('how long do refunds take?')).sources, [faqId]);
      // The previous test's two failures and this one: the rest do not wait for the provider.
      assert.equal(llm.state.calls.length, calls + 1);
      assert.equal(msgs().length, 2, msgs().join('\n'));
      assert.match(msgs()[0]!, /HTTP 500/);
      assert.match(msgs()[1]!, /paused after repeated failures/);
      // Back after the pause: a success closes the breaker.
      clock.advance(PausingProvider.PAUSE_MS);
      llm.state.mode = 'ok';
      assert.match((await ask('how long do refunds take?')).content, /LLM says/);
      llm.state.mode = 'error';
      warnings.length = 0;
      clock.advance(61_000);
      await ask('how long do refunds take?');
      await ask('how long do refunds take?');
      assert.equal(warnings.length, 1, 'the second failure within the minute is counted, not logged');
      clock.advance(61_000);
      await ask('how long do refunds take?');
      assert.equal(warnings.length, 2);
      assert.equal((warnings[1]!.obj as { notLogged: number }).notLogged, 1);
      assert.match((warnings[1]!.obj as { accountId: string }).accountId, /^acct_/);
      clock.advance(PausingProvider.PAUSE_MS); // that was the third failure in a row: let the next tests reach it
    });

    test('a reply with NUL or other control characters is stored without them (PostgreSQL refuses NUL in text)', async () => {
      llm.state.mode = 'custom';
      llm.state.content = 'Refunds take 5 days.\u0000 Thanks\u0007\tfor asking.\nSOURCES: {first}';
      const reply = await ask('how long do refunds take?');
      assert.equal(reply.content, 'Refunds take 5 days. Thanks\tfor asking.');
      assert.deepEqual(reply.sources, [faqId]);
    });

    test('a model that says it does not know gets the no-answer reply even when it lists a passage, and two escalate', async () => {
      llm.state.mode = 'custom';
      llm.state.content = "I'm sorry, I don't know the answer to that from our articles.\nSOURCES: {first}";
      const c = await t.request('POST', '/v1/chat/conversations', { key });
      const id = c.body.data.conversation.id;
      for (const q of ['how long do refunds take?', 'how long do refunds take for gold members?']) {
        const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key, body: { content: q } });
        assert.equal(r.status, 200, r.text);
        assert.deepEqual(r.body.data.messages[1].sources ?? [], [], r.text);
      }
      const conv = await t.request('GET', `/v1/conversations/${id}`, { key });
      assert.equal(conv.body.data.status, 'escalated', conv.text);
    });

    test('a message whose reply is still being written when the idle deadline passes is answered, and keeps the conversation open', async () => {
      const clock = t.clock as FakeClock;
      const idleMs = t.ctx.config.conversationIdleTimeoutMs;
      const sweeper = workerTasks(t.ctx).find((x) => x.name === 'conversation-idle-sweeper')!;
      const c = await t.request('POST', '/v1/chat/conversations', { key });
      const id = c.body.data.conversation.id;
      // The customer writes a second before the deadline; the model takes two seconds to reply.
      clock.advance(idleMs - 1_000);
      llm.state.mode = 'held';
      llm.state.held = deferred();
      llm.state.arrived = deferred();
      const sending = t.request('POST', `/v1/chat/conversations/${id}/messages`, { key, body: { content: 'how long do refunds take?' } });
      await llm.state.arrived.promise;
      clock.advance(2_000);
      await sweeper.run(new AbortController().signal);
      llm.state.held.resolve();
      const r = await sending;
      assert.equal(r.status, 200, r.text);
      assert.match(r.body.data.messages[1].content, /LLM says/);
      const g = await t.request('GET', `/v1/chat/conversations/${id}`, { key });
      assert.equal(g.body.data.conversation.status, 'active');
      // Idle from the answered message on, it is ended as usual.
      clock.advance(idleMs + 60_000);
      await sweeper.run(new AbortController().signal);
      const ended = await t.request('GET', `/v1/chat/conversations/${id}`, { key });
      assert.equal(ended.body.data.conversation.status, 'ended');
    });

    test('questions the knowledge base cannot answer and handoffs never reach the model', async () => {
      llm.state.mode = 'ok';
      const before = llm.state.calls.length;
      const unknown = await ask('do you sell gift cards for llamas?');
      assert.deepEqual(unknown.sources, []);
      await ask('let me talk to a human');
      assert.equal(llm.state.calls.length, before);
    });
  });
}
