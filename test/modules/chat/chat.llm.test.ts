import assert from 'node:assert/strict';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { createTestApp, type TestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

/** A fake OpenAI-compatible endpoint on 127.0.0.1: the only thing outside the machine the assistant talks to. */
async function fakeLlm() {
  const state = { mode: 'ok' as 'ok' | 'error' | 'slow', calls: [] as any[] };
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
        res.end(JSON.stringify({ choices: [{ message: { role: 'assistant', content: `LLM says: refunds arrive within 5 to 10 business days.\nSOURCES: ${ids[0]}` } }] }));
      };
      if (state.mode === 'slow') setTimeout(reply, 3_000);
      else reply();
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
      t = await createTestApp(dialect, { env: { LLM_BASE_URL: llm.url, LLM_API_KEY: 'sk-test', LLM_MODEL: 'tiny', LLM_TIMEOUT: '1500ms' }, log });
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
