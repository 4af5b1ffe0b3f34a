import assert from 'node:assert/strict';
import type { FakeClock } from '../../../src/lib/clock.js';
import type { TestApp } from '../../helpers/app.js';
import { DOCS, FAQS } from '../assistant/fixtures.js';

export const MIN = 60_000;
export const HOUR = 60 * MIN;
export const DAY = 24 * HOUR;
/** A UTC midnight: with the default RUNDOWN_INTERVAL (24h) the window [T0, T0 + DAY) is a scheduled one. */
export const T0 = Date.UTC(2026, 2, 2);
export const iso = (ms: number) => new Date(ms).toISOString();

/** The tea-shop knowledge base (published documents and approved FAQs) through the API. */
export async function loadKnowledge(t: TestApp, key: string) {
  for (const d of DOCS) assert.equal((await t.request('POST', '/v1/documents', { key, body: { title: d.title, content: d.content } })).status, 201);
  for (const f of FAQS) {
    assert.equal((await t.request('POST', '/v1/faqs', { key, body: { question: f.question, answer: f.answer, category: f.category } })).status, 201);
  }
}

/**
 * A conversation through the real chat API at the given time (one minute between messages): the sources of
 * every assistant reply, in order.
 */
export async function converse(t: TestApp, key: string, at: number, messages: string[], opts: { end?: boolean; customerId?: string } = {}) {
  const clock = t.clock as FakeClock;
  clock.set(at);
  const s = await t.request('POST', '/v1/chat/conversations', { key, body: opts.customerId === undefined ? {} : { customerId: opts.customerId } });
  assert.equal(s.status, 201, s.text);
  const id: string = s.body.data.conversation.id;
  const sources: string[][] = [];
  for (const content of messages) {
    clock.advance(MIN);
    const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key, body: { content } });
    assert.equal(r.status, 200, r.text);
    sources.push(r.body.data.messages[1].sources);
  }
  if (opts.end) {
    clock.advance(MIN);
    assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/end`, { key })).status, 200);
  }
  return { id, sources };
}
