import assert from 'node:assert/strict';
import type { TestApp } from './app.js';

/** The documents and FAQs APIs refuse a bad list query alike: 400 INVALID_REQUEST, the message naming the rule. */
export async function assertListQueriesRefused(t: TestApp, key: string, path: string, cases: ReadonlyArray<readonly [query: string, message: RegExp]>) {
  for (const [q, re] of cases) {
    const r = await t.request('GET', `${path}?${q}`, { key });
    assert.equal(r.status, 400, q);
    assert.equal(r.body.error.code, 'INVALID_REQUEST');
    assert.match(r.body.error.message, re);
  }
}

/**
 * One account's record, made with `body`, is out of another's reach: GET, PUT (with `change`) and DELETE are
 * 404 without a trace of `secret`, the other's `list` is empty, and the owner still reads `secret` in its field.
 */
export async function assertTenantIsolation(
  t: TestApp,
  o: { path: string; body: object; change: object; secret: { field: string; value: string }; list: string },
) {
  const a = await t.account();
  const b = await t.account();
  const c = await t.request('POST', o.path, { key: a.key, body: o.body });
  const id = c.body.data.id;
  for (const [method, body] of [['GET'], ['PUT', o.change], ['DELETE']] as const) {
    const r = await t.request(method, `${o.path}/${id}`, { key: b.key, body });
    assert.equal(r.status, 404, method);
    assert.equal(r.body.error.code, 'NOT_FOUND');
    assert.ok(!r.text.includes(o.secret.value));
  }
  const list = await t.request('GET', o.list, { key: b.key });
  assert.equal(list.body.data.total, 0);
  const still = await t.request('GET', `${o.path}/${id}`, { key: a.key });
  assert.equal(still.body.data[o.secret.field], o.secret.value);
}
