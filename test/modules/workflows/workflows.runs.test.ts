import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { CompiledQuery } from 'kysely';
import { runsPageQuery } from '../../../src/modules/workflows/workflows.repository.js';
import { useTestApp } from '../../helpers/app.js';
import { assertListQueriesRefused } from '../../helpers/collections.js';
import { DIALECTS, planOf } from '../../helpers/db.js';
import { conversationRow } from '../conversations/fixtures.js';

const DEMO = {
  slug: 'book-demo',
  name: 'Book a demo',
  triggers: ['book a demo'],
  fields: [
    { key: 'email', type: 'email' },
    { key: 'seats', type: 'number' },
    { key: 'orderRef', type: 'pattern', pattern: 'ORD-(\\d+)' },
  ],
};

interface Run {
  workflowId: string;
  conversationId: string;
  customerId: string;
  extracted: Record<string, string | number>;
  createdAt: string;
}

for (const dialect of DIALECTS) {
  describe(`GET /v1/workflows/:id/runs (${dialect})`, () => {
    // A fake clock moved on for each conversation and message: "newest first" is then decided by the times alone.
    const t = useTestApp(dialect, { fakeClock: true });

    async function workflow(key: string, body: object = DEMO) {
      const r = await t.request('POST', '/v1/workflows', { key, body });
      assert.equal(r.status, 201, r.text);
      return r.body.data.id as string;
    }

    /** A conversation of `customerId` whose messages are `contents`; answers its id. */
    async function converse(key: string, customerId: string, ...contents: string[]) {
      t.fakeClock.advance(1_000);
      const started = await t.request('POST', '/v1/chat/conversations', { key, body: { customerId } });
      assert.equal(started.status, 201, started.text);
      const id = started.body.data.conversation.id as string;
      for (const content of contents) {
        t.fakeClock.advance(100);
        const r = await t.request('POST', `/v1/chat/conversations/${id}/messages`, { key, body: { content } });
        assert.equal(r.status, 200, r.text);
      }
      return id;
    }

    const runs = (key: string, workflowId: string, query = '') => t.request('GET', `/v1/workflows/${workflowId}/runs${query ? `?${query}` : ''}`, { key });

    test('each conversation that fired the workflow, newest first, with its customer and what was extracted', async () => {
      const a = await t.account();
      const demo = await workflow(a.key);
      const other = await workflow(a.key, { slug: 'track', name: 'Track', triggers: ['track order'] });
      const first = await converse(a.key, 'cus_1', 'We need 12 seats, my email is jo@acme.test', 'can we book a demo? ref ORD-58213');
      const quiet = await converse(a.key, 'cus_2', 'how long does shipping take?');
      const second = await converse(a.key, 'cus_3', 'book a demo please', 'and again: book a demo');
      const tracked = await converse(a.key, 'cus_4', 'where can I track order ORD-1?');

      const r = await runs(a.key, demo);
      assert.equal(r.status, 200, r.text);
      assert.deepEqual(Object.keys(r.body.data).sort(), ['limit', 'offset', 'runs', 'total']);
      assert.deepEqual({ total: r.body.data.total, limit: r.body.data.limit, offset: r.body.data.offset }, { total: 2, limit: 20, offset: 0 });
      const list: Run[] = r.body.data.runs;
      // One run per conversation however often the phrase came back; the quiet one and the other workflow's are not here.
      assert.deepEqual(list.map((x) => x.conversationId), [second, first]);
      assert.ok(!list.some((x) => x.conversationId === quiet || x.conversationId === tracked));
      assert.deepEqual(list[1], {
        workflowId: demo,
        conversationId: first,
        customerId: 'cus_1',
        // Found in the whole conversation, the message before the trigger included, as the event has it.
        extracted: { email: 'jo@acme.test', seats: 12, orderRef: '58213' },
        createdAt: list[1]!.createdAt,
      });
      assert.deepEqual(list[0]!.extracted, {});
      assert.equal(list[0]!.customerId, 'cus_3');
      assert.ok(list[0]!.createdAt > list[1]!.createdAt, 'newest first');
      // The run's time is the firing message's: the second message of the first conversation, not its start.
      const firstConv = (await t.request('GET', `/v1/conversations/${first}`, { key: a.key })).body.data;
      assert.equal(list[1]!.createdAt, firstConv.messages.find((m: { content: string }) => m.content.startsWith('can we book')).timestamp);

      const track = await runs(a.key, other);
      assert.deepEqual(track.body.data.runs.map((x: Run) => [x.conversationId, x.workflowId, x.extracted]), [[tracked, other, {}]]);

      // The conversationId filter: that conversation's run, or none.
      const one = await runs(a.key, demo, `conversationId=${first}`);
      assert.deepEqual([one.body.data.total, one.body.data.runs.map((x: Run) => x.conversationId)], [1, [first]]);
      const none = await runs(a.key, demo, `conversationId=${quiet}`);
      assert.deepEqual([none.status, none.body.data.total, none.body.data.runs], [200, 0, []]);
    });

    test('pages: limit and offset as on every list, each run once across the pages, past the end an empty page', async () => {
      const a = await t.account();
      const demo = await workflow(a.key);
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await converse(a.key, `cus_${i}`, `book a demo for ${i + 1} seats`));
      const newestFirst = [...ids].reverse();

      const pages: Run[][] = [];
      for (const offset of [0, 2, 4]) {
        const r = await runs(a.key, demo, `limit=2&offset=${offset}`);
        assert.equal(r.status, 200, r.text);
        assert.deepEqual([r.body.data.total, r.body.data.limit, r.body.data.offset], [5, 2, offset]);
        pages.push(r.body.data.runs);
      }
      assert.deepEqual(pages.map((p) => p.length), [2, 2, 1]);
      assert.deepEqual(pages.flat().map((x) => x.conversationId), newestFirst);
      assert.deepEqual(pages.flat().map((x) => x.extracted.seats), [5, 4, 3, 2, 1]);
      const beyond = await runs(a.key, demo, 'offset=99999999999');
      assert.deepEqual([beyond.status, beyond.body.data.total, beyond.body.data.runs], [200, 5, []]);
    });

    test('a bad query is a 400 naming the parameter and the rule, as on the other lists', async () => {
      const a = await t.account();
      const demo = await workflow(a.key);
      await assertListQueriesRefused(t, a.key, `/v1/workflows/${demo}/runs`, [
        ['limit=0', /^query\.limit must be at least 1$/],
        ['limit=101', /^query\.limit must be at most 100$/],
        ['limit=ten', /^query\.limit must be an integer/],
        ['limit=1e1', /^query\.limit must be an integer written in plain decimal digits/],
        ['offset=-1', /^query\.offset must be at least 0$/],
        ['conversationId=', /^query\.conversationId must not be empty$/],
        ['status=all', /^query\.status is not a known field$/],
      ]);
    });

    test("another account's workflow and an unknown id are 404 in the failure envelope, telling nothing of the runs", async () => {
      const a = await t.account();
      const b = await t.account();
      const demo = await workflow(a.key);
      await converse(a.key, 'cus_secret', 'book a demo, I am secret@acme.test');
      assert.equal((await runs(a.key, demo)).body.data.total, 1);
      for (const [key, id] of [[b.key, demo], [a.key, 'wf_unknown']] as const) {
        const r = await runs(key, id);
        assert.equal(r.status, 404, r.text);
        assert.deepEqual(r.body, { success: false, error: { code: 'NOT_FOUND', message: `workflow ${id} not found` } });
      }
      // Even a run of b's own conversation cannot be asked for through a's workflow.
      assert.equal((await runs(b.key, demo, 'conversationId=conv_x')).status, 404);
    });

    test('scope: workflows:read reads the runs; a key without it is 403 FORBIDDEN', async () => {
      const a = await t.account();
      const demo = await workflow(a.key);
      await converse(a.key, 'cus_1', 'book a demo');
      const reader = await t.ctx.services.accounts.createKey({ accountId: a.accountId, type: 'server', scopes: ['workflows:read'] });
      const ok = await runs(reader.key, demo);
      assert.equal(ok.status, 200, ok.text);
      assert.equal(ok.body.data.total, 1);
      for (const scopes of [['workflows:write', 'conversations:read'], ['chat']]) {
        const k = await t.ctx.services.accounts.createKey({ accountId: a.accountId, type: 'server', scopes });
        const r = await runs(k.key, demo);
        assert.equal(r.status, 403, `${scopes.join(',')}: ${r.text}`);
        assert.equal(r.body.error.code, 'FORBIDDEN');
        assert.ok(!r.text.includes('cus_1'));
      }
    });

    test("erasing a conversation takes its run out of the list; deleting the workflow deletes its runs", async () => {
      const a = await t.account();
      const demo = await workflow(a.key);
      const kept = await converse(a.key, 'cus_keep', 'book a demo, kept@acme.test');
      const erased = await converse(a.key, 'cus_erase', 'book a demo, erased@acme.test');
      const byCustomer = await converse(a.key, 'cus_gone', 'book a demo, gone@acme.test');
      assert.equal((await runs(a.key, demo)).body.data.total, 3);

      assert.equal((await t.request('DELETE', `/v1/conversations/${erased}`, { key: a.key })).status, 200);
      assert.equal((await t.request('DELETE', '/v1/conversations?customerId=cus_gone', { key: a.key })).status, 200);
      const after = await runs(a.key, demo);
      assert.equal(after.body.data.total, 1);
      assert.deepEqual(after.body.data.runs.map((x: Run) => x.conversationId), [kept]);
      assert.ok(!after.text.includes('erased@acme.test') && !after.text.includes(byCustomer));

      assert.equal((await t.request('DELETE', `/v1/workflows/${demo}`, { key: a.key })).status, 200);
      assert.equal((await runs(a.key, demo)).status, 404);
      const left = await t.ctx.db.selectFrom('workflow_runs').select('conversation_id').where('workflow_id', '=', demo).execute();
      assert.deepEqual(left, []);
    });

    test('a page of a busy workflow is read through workflow_runs_account_workflow_created in its order: no scan, no sort', async () => {
      const { db } = t.ctx;
      const a = await t.account();
      const b = await t.account();
      // A workflow that fired in thousands of conversations beside quieter ones and another account's, each run with
      // its conversation, and statistics: a page must not read (and sort) every run of the workflow.
      const T = Date.UTC(2026, 5, 1);
      const spread: Array<[accountId: string, workflowId: string, runs: number]> = [[a.accountId, 'wf_busy', 4_000], [a.accountId, 'wf_quiet', 500], [b.accountId, 'wf_b', 1_500]];
      for (const [accountId, workflowId, n] of spread) {
        const conversations = Array.from({ length: n }, (_, i) => conversationRow(accountId, { created_at: T + i, customer_id: `cus_${i}` }));
        for (let i = 0; i < n; i += 500) {
          const slice = conversations.slice(i, i + 500);
          await db.insertInto('conversations').values(slice).execute();
          await db
            .insertInto('workflow_runs')
            .values(slice.map((c) => ({ workflow_id: workflowId, conversation_id: c.id, account_id: accountId, extracted: '{}', created_at: c.created_at })))
            .execute();
        }
      }
      await db.executeQuery(CompiledQuery.raw('analyze'));
      for (const offset of [0, 100]) {
        const q = runsPageQuery(db, a.accountId, 'wf_busy', { limit: 20, offset }).compile();
        if (dialect === 'sqlite') {
          const plan = await planOf(db, dialect, q);
          assert.match(plan, /SEARCH workflow_runs USING (COVERING )?INDEX workflow_runs_account_workflow_created \(account_id=\? AND workflow_id=\?\)/, plan);
          assert.doesNotMatch(plan, /TEMP B-TREE/, plan);
          assert.match(plan, /SEARCH conversations USING INDEX sqlite_autoindex_conversations_1 \(id=\?\)/, plan);
        } else {
          const plan = await planOf(db, dialect, q);
          assert.match(plan, /Index Scan Backward using workflow_runs_account_workflow_created on workflow_runs/, plan);
          assert.doesNotMatch(plan, /Sort|Seq Scan/, plan);
        }
        const page = await runsPageQuery(db, a.accountId, 'wf_busy', { limit: 20, offset }).execute();
        assert.deepEqual(page.map((r) => r.created_at), Array.from({ length: 20 }, (_, i) => T + 3_999 - offset - i));
      }
    });
  });
}
