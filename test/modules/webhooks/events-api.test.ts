import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import Ajv from 'ajv';
import addFormats from 'ajv-formats';
import { CompiledQuery } from 'kysely';
import { SUBSCRIBABLE_EVENTS } from '../../../src/modules/webhooks/events.js';
import { feedPageIds } from '../../../src/modules/webhooks/feed.repository.js';
import { EventList, EventRecord } from '../../../src/modules/webhooks/feed.schemas.js';
import { newId } from '../../../src/lib/ids.js';
import { useTestApp } from '../../helpers/app.js';
import { assertListQueriesRefused } from '../../helpers/collections.js';
import { DIALECTS, planOf } from '../../helpers/db.js';

interface Item {
  id: string;
  event: string;
  timestamp: string;
  data: Record<string, unknown> & { conversationId?: string };
}

const ajv = new Ajv.default({ strict: false, allErrors: true });
addFormats.default(ajv);
const validItem = ajv.compile(EventRecord);
const validList = ajv.compile(EventList);

const DAY = 86_400_000;

/** Newest first: timestamp desc, then id desc (CONTRACT §4). */
const isNewestFirst = (items: Item[]) => items.every((x, i) => i === 0 || items[i - 1]!.timestamp > x.timestamp || (items[i - 1]!.timestamp === x.timestamp && items[i - 1]!.id > x.id));

for (const dialect of DIALECTS) {
  describe(`GET /v1/events (${dialect})`, () => {
    // A fake clock moved on between actions: "newest first" is then decided by the times, and from/to can be exact.
    const t = useTestApp(dialect, { fakeClock: Date.UTC(2026, 5, 1) });

    const events = (key: string, query = '') => t.request('GET', `/v1/events${query ? `?${query}` : ''}`, { key });
    const all = async (key: string, query = '') => {
      const r = await events(key, `limit=100${query ? `&${query}` : ''}`);
      assert.equal(r.status, 200, r.text);
      return r.body.data.events as Item[];
    };

    const withWorkflow = new Set<string>();
    /**
     * Every kind but conversation.erased, through the API as an integration would cause them, a second apart but those
     * emitted together; answers the conversation. The customer's email is in their message.
     */
    async function busyDay(a: { key: string }, customerId = 'cus_1') {
      const step = () => t.fakeClock.advance(1_000);
      if (!withWorkflow.has(a.key)) {
        const wf = await t.request('POST', '/v1/workflows', { key: a.key, body: { slug: 'book-demo', name: 'Demo', triggers: ['book a demo'], fields: [{ key: 'email', type: 'email' }] } });
        assert.equal(wf.status, 201, wf.text);
        withWorkflow.add(a.key);
      }
      step();
      const started = await t.request('POST', '/v1/chat/conversations', { key: a.key, body: { customerId, customerLabel: 'Jo', metadata: { plan: 'gold', seats: 12 } } });
      assert.equal(started.status, 201, started.text);
      const id = started.body.data.conversation.id as string;
      step();
      const sent = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: a.key, body: { content: `I want to book a demo, ${customerId}@acme.test` } });
      assert.equal(sent.status, 200, sent.text);
      step();
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/contact`, { key: a.key, body: { email: `${customerId}@acme.test`, name: 'Jo' } })).status, 200);
      step();
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/escalate`, { key: a.key, body: { reason: 'vip' } })).status, 200);
      step();
      assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/end`, { key: a.key })).status, 200);
      step();
      const rd = await t.request('POST', '/v1/rundowns', { key: a.key, body: { from: '2026-05-01', to: '2026-05-08' } });
      assert.equal(rd.status, 201, rd.text);
      step();
      return id;
    }

    const stored = (accountId: string) => t.ctx.db.selectFrom('events').select('id').where('account_id', '=', accountId).execute();

    test("the account's events after real actions, newest first, each exactly the body its deliveries send plus its id", async () => {
      const a = await t.account();
      const wh = await t.request('POST', '/v1/webhooks', { key: a.key, body: { url: 'http://127.0.0.1:9/h', events: [...SUBSCRIBABLE_EVENTS], secret: 'feed-secret-1' } });
      assert.equal(wh.status, 201, wh.text);
      const conv = await busyDay(a);

      const r = await events(a.key);
      assert.equal(r.status, 200, r.text);
      assert.ok(validList(r.body.data), ajv.errorsText(validList.errors));
      assert.deepEqual(Object.keys(r.body.data), ['events', 'total', 'limit', 'offset']);
      const rows = await stored(a.accountId);
      assert.deepEqual([r.body.data.total, r.body.data.limit, r.body.data.offset], [rows.length, 20, 0]);
      const list: Item[] = r.body.data.events;
      assert.equal(list.length, rows.length);
      assert.ok(isNewestFirst(list), list.map((x) => `${x.timestamp} ${x.id}`).join('\n'));
      // Newest first by the clock: the rundown, the end, the escalation, the contact, the exchange (with the workflow it
      // fired), the start (with the greeting). Events emitted together share a millisecond and go by id.
      const byTime = new Map<string, string[]>();
      for (const x of list) byTime.set(x.timestamp, [...(byTime.get(x.timestamp) ?? []), x.event]);
      assert.deepEqual(
        [...byTime.values()].map((kinds) => kinds.sort()),
        [['rundown.generated'], ['conversation.ended'], ['escalation'], ['escalation.submitted'], ['conversation.message', 'conversation.message', 'workflow.triggered'], ['conversation.message', 'conversation.started']],
      );
      assert.ok(list.filter((x) => x.event !== 'rundown.generated').every((x) => x.data.conversationId === conv));

      const deliveries = await t.ctx.db.selectFrom('deliveries').select(['event_id', 'body']).where('account_id', '=', a.accountId).execute();
      assert.equal(deliveries.length, list.length, 'one delivery per event: the webhook takes every kind');
      for (const item of list) {
        assert.ok(validItem(item), `${item.event}: ${ajv.errorsText(validItem.errors)}`);
        const body = deliveries.find((d) => d.event_id === item.id)!.body;
        assert.deepEqual(item, { id: item.id, ...JSON.parse(body) });
        // What docs/webhooks.md tells a receiver to match a feed item with a delivery it already had by.
        assert.equal(JSON.stringify({ event: item.event, timestamp: item.timestamp, data: item.data }), body);
        // The same bytes, not an equal re-serialisation: the delivery's body with the id in front.
        const spliced = `{"id":"${item.id}",${body.slice(1)}`;
        assert.ok(r.text.includes(spliced), `${item.event} is not the delivery's bytes:\n${spliced}\nin\n${r.text}`);
        const one = await t.request('GET', `/v1/events/${item.id}`, { key: a.key });
        assert.equal(one.status, 200, one.text);
        assert.equal(one.text, `{"success":true,"data":${spliced}}`);
      }
      // The metadata the integration gave at the start is carried as given.
      const started = list.find((x) => x.event === 'conversation.started')!;
      assert.deepEqual(started.data.metadata, { plan: 'gold', seats: 12 });
    });

    test('events are kept whether or not a webhook subscribes; a test send is a delivery, not an event', async () => {
      const a = await t.account();
      const wh = await t.request('POST', '/v1/webhooks', { key: a.key, body: { url: 'http://127.0.0.1:9/h', events: ['rundown.generated'], secret: 'feed-secret-2' } });
      t.fakeClock.advance(1_000);
      assert.equal((await t.request('POST', '/v1/chat/conversations', { key: a.key, body: {} })).status, 201);
      // The receiver is not there: the test send fails, and is still recorded as a delivery.
      const sent = await t.request('POST', `/v1/webhooks/${wh.body.data.id}/test`, { key: a.key, body: {} });
      assert.equal(sent.status, 200, sent.text);
      assert.equal(sent.body.data.eventId, null);
      const list = await all(a.key);
      assert.deepEqual(list.map((x) => x.event).sort(), ['conversation.message', 'conversation.started']);
      assert.equal((await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', a.accountId).execute()).length, 1, 'only the test send');
    });

    test('events made together, and their deliveries, are listed in the order they were made (newest first)', async () => {
      const a = await t.account();
      const hook = { url: 'http://127.0.0.1:9/h', events: ['conversation.started', 'conversation.message'], secret: 'feed-secret-3' };
      const wh = (await t.request('POST', '/v1/webhooks', { key: a.key, body: hook })).body.data.id as string;
      // The fake clock stands still: the start, the greeting and three exchanges all share one millisecond.
      t.fakeClock.advance(1_000);
      const id = (await t.request('POST', '/v1/chat/conversations', { key: a.key, body: {} })).body.data.conversation.id as string;
      for (const content of ['hello', 'how do refunds work?', 'thanks']) {
        assert.equal((await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key: a.key, body: { content } })).status, 200);
      }
      const list = await all(a.key);
      assert.equal(new Set(list.map((x) => x.timestamp)).size, 1, 'one millisecond');
      const made = (x: { event: string; data: Record<string, unknown> }) => (x.event === 'conversation.started' ? -1 : (x.data.position as number));
      const order = list.map(made);
      assert.deepEqual(order, [7, 6, 5, 4, 3, 2, 1, -1], 'the last made first, the start last');

      const deliveries = (await t.request('GET', `/v1/webhooks/${wh}/deliveries?limit=100`, { key: a.key })).body.data.deliveries as Array<{ id: string }>;
      const bodies = await Promise.all(deliveries.map(async (d) => (await t.request('GET', `/v1/webhooks/${wh}/deliveries/${d.id}`, { key: a.key })).body.data.body as string));
      assert.deepEqual(bodies.map((b) => made(JSON.parse(b))), order);
    });

    test('pages: limit and offset as every list, each event once across the pages, past the end an empty page', async () => {
      const a = await t.account();
      for (let i = 0; i < 4; i++) {
        t.fakeClock.advance(1_000);
        const c = await t.request('POST', '/v1/chat/conversations', { key: a.key, body: { customerId: `cus_${i}` } });
        t.fakeClock.advance(1_000);
        await t.request('POST', `/v1/chat/conversations/${c.body.data.conversation.id}/messages`, { key: a.key, body: { content: `question ${i}` } });
      }
      const whole = await all(a.key);
      assert.equal(whole.length, 16, 'per conversation: started, greeting, the question and its answer');
      // Events of one millisecond (a conversation's start and greeting, an exchange's two messages) by id, descending.
      assert.ok(isNewestFirst(whole));
      assert.ok(whole.some((x, i) => i > 0 && whole[i - 1]!.timestamp === x.timestamp), 'some share a millisecond');
      const pages: Item[][] = [];
      for (const offset of [0, 5, 10, 15]) {
        const r = await events(a.key, `limit=5&offset=${offset}`);
        assert.equal(r.status, 200, r.text);
        assert.deepEqual([r.body.data.total, r.body.data.limit, r.body.data.offset], [16, 5, offset]);
        pages.push(r.body.data.events);
      }
      assert.deepEqual(pages.map((p) => p.length), [5, 5, 5, 1]);
      assert.deepEqual(pages.flat().map((x) => x.id), whole.map((x) => x.id));
      const beyond = await events(a.key, 'offset=99999999999');
      assert.deepEqual([beyond.status, beyond.body.data.total, beyond.body.data.events], [200, 16, []]);
      const beyondKinds = await events(a.key, 'event=conversation.started,conversation.message&offset=9007199254740991');
      assert.deepEqual([beyondKinds.status, beyondKinds.body.data.total, beyondKinds.body.data.events], [200, 16, []]);
    });

    test('filters: event (one kind, a comma list, the alias), from inclusive and to exclusive, with pages', async () => {
      const a = await t.account();
      await busyDay(a, 'cus_a');
      await busyDay(a, 'cus_b');
      const whole = await all(a.key);
      const kinds = (list: Item[]) => [...new Set(list.map((x) => x.event))].sort();

      const ended = await all(a.key, 'event=conversation.ended');
      assert.deepEqual(ended.map((x) => x.id), whole.filter((x) => x.event === 'conversation.ended').map((x) => x.id));
      assert.equal(ended.length, 2);
      // The alias, a repeat, several kinds: an event of any of them, newest first across kinds.
      const escalations = await all(a.key, 'event=conversation.escalated,escalation');
      assert.deepEqual(escalations.map((x) => x.id), whole.filter((x) => x.event === 'escalation').map((x) => x.id));
      const some = ['rundown.generated', 'conversation.started', 'conversation.message'];
      const several = whole.filter((x) => some.includes(x.event));
      assert.deepEqual((await all(a.key, `event=${some.join(',')}`)).map((x) => x.id), several.map((x) => x.id));
      assert.deepEqual(kinds(several), [...some].sort());
      // Paged, the merge of the kinds keeps the order and the total.
      const paged: Item[] = [];
      for (let offset = 0; offset < several.length; offset += 3) {
        const r = await events(a.key, `event=${some.join(',')}&limit=3&offset=${offset}`);
        assert.equal(r.body.data.total, several.length);
        paged.push(...r.body.data.events);
      }
      assert.deepEqual(paged.map((x) => x.id), several.map((x) => x.id));
      // Every kind named is no filter at all.
      assert.deepEqual((await all(a.key, `event=${SUBSCRIBABLE_EVENTS.join(',')}`)).map((x) => x.id), whole.map((x) => x.id));
      assert.deepEqual(await all(a.key, 'event=conversation.erased'), []);

      // from is inclusive, to exclusive, at an event's exact millisecond.
      const times = [...new Set(whole.map((x) => x.timestamp))].sort();
      const [lo, hi] = [times[2]!, times[times.length - 3]!];
      const inRange = whole.filter((x) => x.timestamp >= lo && x.timestamp < hi);
      assert.ok(inRange.length > 0 && inRange.length < whole.length);
      const ranged = await all(a.key, `from=${lo}&to=${hi}`);
      assert.deepEqual(ranged.map((x) => x.id), inRange.map((x) => x.id));
      assert.ok(ranged.some((x) => x.timestamp === lo) && !ranged.some((x) => x.timestamp === hi));
      const day = await events(a.key, 'from=2026-06-01&to=2026-06-02&limit=1');
      assert.equal(day.body.data.total, whole.length);
      assert.equal((await events(a.key, 'to=2026-06-01')).body.data.total, 0);
      // Both filters at once, several kinds.
      const both = await all(a.key, `event=escalation,conversation.ended&from=${lo}&to=${hi}`);
      assert.deepEqual(both.map((x) => x.id), inRange.filter((x) => x.event === 'escalation' || x.event === 'conversation.ended').map((x) => x.id));
      assert.ok(both.length > 0);
    });

    test('a bad query is a 400 naming the parameter and the rule', async () => {
      const a = await t.account();
      const kinds = SUBSCRIBABLE_EVENTS.join(', ').replace(/\./g, '\\.');
      await assertListQueriesRefused(t, a.key, '/v1/events', [
        ['limit=0', /^query\.limit must be at least 1$/],
        ['limit=101', /^query\.limit must be at most 100$/],
        ['limit=ten', /^query\.limit must be an integer/],
        ['offset=-1', /^query\.offset must be at least 0$/],
        ['event=', /^query\.event must not be empty$/],
        ['event=conversation.closed', new RegExp(`^query\\.event "conversation\\.closed" is not a known event kind; valid kinds: ${kinds} \\(conversation\\.escalated is accepted as escalation\\)$`)],
        ['event=escalation,nope', /^query\.event "nope" is not a known event kind; valid kinds: /],
        ['event=escalation, conversation.ended', /^query\.event " conversation\.ended" is not a known event kind/],
        ['event=escalation,,conversation.ended', /^query\.event has an empty kind/],
        ['event=escalation,', /^query\.event has an empty kind/],
        // One parameter holding a comma list, not the parameter repeated.
        ['event=escalation&event=conversation.ended', /^query\.event must be given once, not 2 times$/],
        ['event=test', /^query\.event "test" is not in the event feed: a test send \(POST \/webhooks\/:id\/test\) is a delivery to one webhook, not an event; valid kinds: /],
        ['from=yesterday', /^query\.from must be an ISO 8601 date or date-time/],
        ['to=2026-13-01', /^query\.to must be an ISO 8601 date or date-time/],
        ['from=2026-06-02&to=2026-06-01', /^query\.from must be earlier than query\.to/],
        ['type=escalation', /^query\.type is not a known field$/],
      ]);
    });

    test("GET /v1/events/:id: one event; another account's or an unknown id is 404, and no list shows another account's events", async () => {
      const a = await t.account();
      const b = await t.account();
      await busyDay(a, 'cus_secret');
      const aList = await all(a.key);
      const first = aList[0]!;
      assert.deepEqual((await t.request('GET', `/v1/events/${first.id}`, { key: a.key })).body, { success: true, data: first });
      for (const [key, id] of [[b.key, first.id], [a.key, 'evt_unknown'], [a.key, newId('evt')]] as const) {
        const r = await t.request('GET', `/v1/events/${id}`, { key });
        assert.equal(r.status, 404, r.text);
        assert.deepEqual(r.body, { success: false, error: { code: 'NOT_FOUND', message: `event ${id} not found` } });
      }
      assert.equal((await events(b.key)).body.data.total, 0);
      t.fakeClock.advance(1_000);
      await t.request('POST', '/v1/chat/conversations', { key: b.key, body: { customerId: 'cus_b' } });
      const bList = await all(b.key);
      assert.equal(bList.length, 2);
      assert.ok(!bList.some((x) => aList.some((y) => y.id === x.id)));
      for (const q of ['', 'event=escalation', 'event=escalation,conversation.started', 'from=2026-01-01']) {
        const r = await events(b.key, q);
        assert.ok(!r.text.includes('cus_secret'), q);
      }
    });

    test('scope: webhooks:read reads the feed; a key without it is 403 FORBIDDEN', async () => {
      const a = await t.account();
      await busyDay(a, 'cus_scoped');
      const reader = await t.ctx.services.accounts.createKey({ accountId: a.accountId, type: 'server', scopes: ['webhooks:read'] });
      const ok = await events(reader.key);
      assert.equal(ok.status, 200, ok.text);
      const id = ok.body.data.events[0].id;
      assert.equal((await t.request('GET', `/v1/events/${id}`, { key: reader.key })).status, 200);
      for (const scopes of [['webhooks:write', 'conversations:read'], ['chat']]) {
        const k = await t.ctx.services.accounts.createKey({ accountId: a.accountId, type: 'server', scopes });
        for (const path of ['/v1/events', `/v1/events/${id}`]) {
          const r = await t.request('GET', path, { key: k.key });
          assert.equal(r.status, 403, `${scopes.join(',')} ${path}: ${r.text}`);
          assert.equal(r.body.error.code, 'FORBIDDEN');
          assert.ok(!r.text.includes('cus_scoped'));
        }
      }
      const pub = await t.ctx.services.accounts.createKey({ accountId: a.accountId, type: 'public' });
      assert.equal((await events(pub.key)).status, 403);
    });

    test("an erased conversation's events are gone from the feed; its conversation.erased stays", async () => {
      const a = await t.account();
      const kept = await busyDay(a, 'cus_keep');
      const erased = await busyDay(a, 'cus_erase');
      const byCustomer = await busyDay(a, 'cus_gone');
      const before = await all(a.key);
      const of = (list: Item[], conv: string) => list.filter((x) => x.data.conversationId === conv);
      const erasedIds = [...of(before, erased), ...of(before, byCustomer)].map((x) => x.id);
      assert.ok(erasedIds.length > 10);

      assert.equal((await t.request('DELETE', `/v1/conversations/${erased}`, { key: a.key })).status, 200);
      assert.equal((await t.request('DELETE', '/v1/conversations?customerId=cus_gone', { key: a.key })).status, 200);
      const after = await all(a.key);
      for (const conv of [erased, byCustomer]) assert.deepEqual(of(after, conv).map((x) => x.event), ['conversation.erased']);
      assert.deepEqual(of(after, kept).map((x) => x.id), of(before, kept).map((x) => x.id));
      assert.equal(after.length, before.length - erasedIds.length + 2);
      for (const id of erasedIds) assert.equal((await t.request('GET', `/v1/events/${id}`, { key: a.key })).status, 404);
      // The erased customers' words (their emails, in messages, escalations, contact details) are nowhere in the feed.
      const text = (await events(a.key, 'limit=100')).text;
      assert.ok(text.includes('cus_keep@acme.test'));
      assert.ok(!text.includes('cus_erase@acme.test') && !text.includes('cus_gone@acme.test'), text);
    });

    test('DELIVERY_RETENTION: pruned events leave the feed; the feed reaches back that far', async () => {
      const a = await t.account();
      t.fakeClock.advance(1_000);
      await t.request('POST', '/v1/chat/conversations', { key: a.key, body: { customerId: 'cus_old' } });
      t.fakeClock.advance(31 * DAY);
      await t.request('POST', '/v1/chat/conversations', { key: a.key, body: { customerId: 'cus_new' } });
      assert.equal((await all(a.key)).length, 4);
      await t.ctx.services.webhooks.pruneHistory(t.fakeClock.now() - 30 * DAY);
      const left = await all(a.key);
      assert.deepEqual(left.map((x) => x.data.customerId), ['cus_new', 'cus_new']);
    });

    test('pages are read from an index in their order on both dialects: the whole feed, one kind, several kinds', async () => {
      const { db } = t.ctx;
      const busy = await t.account();
      const other = await t.account();
      // A busy account whose events are mostly chat messages, a few rarer kinds among them, beside another account,
      // with statistics: a page must not read (or sort) every event of the account, nor look for a rare kind among
      // all the messages.
      const T = Date.UTC(2026, 2, 1);
      const N = 12_000;
      const kindOf = (i: number) => (i % 400 === 0 ? 'rundown.generated' : i % 4 === 0 ? 'escalation' : i % 10 === 0 ? 'conversation.started' : 'conversation.message');
      for (const [accountId, n] of [[busy.accountId, N], [other.accountId, 3_000]] as const) {
        for (let i = 0; i < n; i += 500) {
          const rows = Array.from({ length: 500 }, (_, j) => {
            const at = T + i + j;
            const kind = kindOf(i + j);
            return { id: newId('evt', at), account_id: accountId, kind, payload: JSON.stringify({ event: kind, timestamp: new Date(at).toISOString(), data: {} }), created_at: at };
          });
          await db.insertInto('events').values(rows).execute();
        }
      }
      await db.executeQuery(CompiledQuery.raw('analyze'));
      const plan = (q: { sql: string; parameters: readonly unknown[] }) => planOf(db, dialect, q);
      const times = (kinds: string[] | undefined, offset: number) =>
        Array.from({ length: N }, (_, i) => i)
          .filter((i) => !kinds || kinds.includes(kindOf(i)))
          .reverse()
          .slice(offset, offset + 20)
          .map((i) => T + i);

      for (const offset of [0, 100]) {
        const f = { limit: 20, offset, to: T + N };
        const whole = await plan(feedPageIds(db, busy.accountId, f).compile());
        const one = await plan(feedPageIds(db, busy.accountId, { ...f, kinds: ['escalation'] }).compile());
        const several = await plan(feedPageIds(db, busy.accountId, { ...f, kinds: ['rundown.generated', 'escalation'] }).compile());
        if (dialect === 'sqlite') {
          assert.match(whole, /^SEARCH events USING COVERING INDEX events_account_created_id \(account_id=\? AND created_at<\?\)$/, whole);
          assert.match(one, /^SEARCH events USING COVERING INDEX events_account_kind_created \(account_id=\? AND kind=\? AND created_at<\?\)$/, one);
          // Each kind's walk is bounded by offset + limit; SQLite sorts those few rows again for its merge.
          assert.equal(several.match(/SEARCH events USING COVERING INDEX events_account_kind_created \(account_id=\? AND kind=\? AND created_at<\?\)/g)?.length, 2, several);
          assert.match(several, /MERGE \(UNION ALL\)/, several);
          assert.doesNotMatch(several, /SCAN events|events_account_created\b|events_account_created_id/, several);
        } else {
          assert.match(whole, /Index Only Scan Backward using events_account_created_id on events/, whole);
          assert.match(one, /Index Only Scan Backward using events_account_kind_created on events/, one);
          // Each kind walked in order, the walks merged: no sort anywhere (a sort node is "Sort  (cost…").
          assert.match(several, /Merge Append/, several);
          assert.equal(several.match(/Index Only Scan Backward using events_account_kind_created on events/g)?.length, 2, several);
          for (const p of [whole, one, several]) assert.doesNotMatch(p, /Sort {2}\(|Seq Scan|Bitmap/, p);
        }
        for (const kinds of [undefined, ['escalation'], ['rundown.generated', 'escalation']]) {
          const page = await feedPageIds(db, busy.accountId, { ...f, kinds }).execute();
          assert.deepEqual(page.map((r) => Number(r.created_at)), times(kinds, offset), `${kinds?.join(',') ?? 'all'} at ${offset}`);
        }
      }
    });
  });
}
