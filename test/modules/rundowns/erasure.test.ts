import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { sql } from 'kysely';
import { loadConfig } from '../../../src/config.js';
import { newId } from '../../../src/lib/ids.js';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS, waitingOn } from '../../helpers/db.js';
import { converse, DAY, HOUR, iso, loadKnowledge, T0 } from './helpers.js';

const RANGE = { from: iso(T0), to: iso(T0 + DAY) };
/** A customer's question with personal data in it, as the GDPR erasure must reach it. */
const JANE = 'Jane Roe here, order 4411: was my card ending 1234 charged twice?';
const ERASED = '(erased)';

for (const dialect of DIALECTS) {
  describe(`erasing a conversation rewords the rundowns that quote it (${dialect})`, () => {
    const t = useTestApp(dialect, { fakeClock: T0 - DAY });

    /** A new account with the tea-shop knowledge: the questions below are ones it cannot answer. */
    async function shop() {
      const a = await t.account();
      await loadKnowledge(t, a.key);
      return a;
    }

    /** An ended conversation of unanswered questions at `at`. */
    async function ask(key: string, at: number, messages: string[], customerId?: string) {
      const c = await converse(t, key, at, messages, { end: true, ...(customerId === undefined ? {} : { customerId }) });
      for (const s of c.sources) assert.deepEqual(s, [], `precondition: nothing cited for ${JSON.stringify(messages)}`);
      return c.id;
    }

    async function rundown(key: string, headers: Record<string, string> = {}) {
      t.fakeClock.set(T0 + 2 * DAY);
      const r = await t.request('POST', '/v1/rundowns', { key, body: RANGE, headers });
      assert.equal(r.status, 201, r.text);
      return r.body.data;
    }

    const get = async (key: string, id: string) => {
      const r = await t.request('GET', `/v1/rundowns/${id}`, { key });
      assert.equal(r.status, 200, r.text);
      return r.body.data;
    };

    async function erase(key: string, id: string) {
      const r = await t.request('DELETE', `/v1/conversations/${id}`, { key });
      assert.equal(r.status, 200, r.text);
    }

    const quoteRows = (conversationId: string) => t.ctx.db.selectFrom('rundown_quotes').select('rundown_id').where('conversation_id', '=', conversationId).execute();

    test('the wording of an erased conversation leaves the rundown (count, time and figures stay); its untouched suggested FAQ is deleted', async () => {
      const a = await shop();
      // Asked twice, so it is also filed as a suggested FAQ with the same wording.
      const jane = await ask(a.key, T0 + HOUR, [JANE, JANE]);
      await ask(a.key, T0 + 2 * HOUR, ['Do you sell coffee beans?']);
      const made = await rundown(a.key, { 'idempotency-key': 'rundown-jane' });
      assert.deepEqual(
        made.unanswered.map((u: { question: string; count: number }) => [u.question, u.count]),
        [[JANE, 2], ['Do you sell coffee beans?', 1]],
      );
      assert.equal(made.suggestedFaqs.length, 1);
      const [suggested] = made.suggestedFaqs;
      assert.equal(suggested.question, JANE);

      await erase(a.key, jane);

      const now = await get(a.key, made.id);
      for (const pii of ['Jane', 'Roe', '4411', '1234']) assert.ok(!JSON.stringify(now).includes(pii), `${pii} is gone from ${JSON.stringify(now)}`);
      assert.deepEqual(now.unanswered, [{ ...made.unanswered[0], question: ERASED }, made.unanswered[1]]);
      assert.deepEqual(now.figures, made.figures);
      assert.deepEqual(now.suggestedFaqs, [{ id: suggested.id, question: ERASED }]);
      // Filed from the customer's words and never touched by the owner: withdrawn.
      assert.equal((await t.request('GET', `/v1/faqs/${suggested.id}`, { key: a.key })).status, 404);
      const listed = (await t.request('GET', '/v1/rundowns', { key: a.key })).body.data.rundowns;
      assert.deepEqual(listed, [now]);
      // The answer kept for the POST's Idempotency-Key is replayed as reworded.
      const replay = await t.request('POST', '/v1/rundowns', { key: a.key, body: RANGE, headers: { 'idempotency-key': 'rundown-jane' } });
      assert.equal(replay.status, 201, replay.text);
      assert.equal(replay.headers.get('idempotent-replayed'), 'true');
      assert.deepEqual(replay.body.data, now);
      assert.deepEqual(await quoteRows(jane), []);
    });

    test("another customer's wording of the same question is shown instead, and the untouched suggested FAQ takes it; an FAQ the owner edited stays", async () => {
      const a = await shop();
      const jane = await ask(a.key, T0 + HOUR, ['DO YOU SELL COFFEE BEANS???', 'DO YOU DELIVER TO MARS???']);
      const jane2 = await ask(a.key, T0 + 2 * HOUR, ['DO YOU SELL COFFEE BEANS???', 'DO YOU DELIVER TO MARS???']);
      await ask(a.key, T0 + 3 * HOUR, ['do you sell coffee beans', 'Do you deliver to Mars'], 'someone-else');
      // Asked the same, in a conversation that stays, after the others: the latest wording of two asked once each.
      await ask(a.key, T0 + 4 * HOUR, ['do you sell   coffee beans?'], 'a-third');
      const made = await rundown(a.key);
      const shown = made.unanswered.map((u: { question: string; count: number }) => [u.question, u.count]);
      assert.deepEqual(shown, [
        ['DO YOU SELL COFFEE BEANS???', 4],
        ['DO YOU DELIVER TO MARS???', 3],
      ]);
      const coffee = made.suggestedFaqs.find((f: { question: string }) => f.question.includes('COFFEE')).id as string;
      const mars = made.suggestedFaqs.find((f: { question: string }) => f.question.includes('MARS')).id as string;
      // The owner answered the Mars one: it is the owner's record now.
      const put = await t.request('PUT', `/v1/faqs/${mars}`, { key: a.key, body: { answer: 'Not yet.', status: 'approved' } });
      assert.equal(put.status, 200, put.text);

      await erase(a.key, jane);
      // One of the two conversations with that wording is left: the wording stays.
      assert.deepEqual(await get(a.key, made.id), made);
      await erase(a.key, jane2);

      const now = await get(a.key, made.id);
      assert.deepEqual(
        now.unanswered.map((u: { question: string; count: number }) => [u.question, u.count]),
        [
          ['do you sell coffee beans?', 4],
          ['Do you deliver to Mars', 3],
        ],
      );
      assert.deepEqual(now.unanswered.map((u: { lastAskedAt: string }) => u.lastAskedAt), made.unanswered.map((u: { lastAskedAt: string }) => u.lastAskedAt));
      assert.deepEqual(
        now.suggestedFaqs.map((f: { id: string; question: string }) => [f.id, f.question]).sort(),
        [
          [coffee, 'do you sell coffee beans?'],
          [mars, 'Do you deliver to Mars'],
        ].sort(),
      );
      const c = (await t.request('GET', `/v1/faqs/${coffee}`, { key: a.key })).body.data;
      assert.deepEqual([c.question, c.status, c.category, c.answer], ['do you sell coffee beans?', 'pending', 'suggested', 'TBD']);
      const m = (await t.request('GET', `/v1/faqs/${mars}`, { key: a.key })).body.data;
      assert.deepEqual([m.question, m.status, m.answer], ['DO YOU DELIVER TO MARS???', 'approved', 'Not yet.']);
      assert.ok(!JSON.stringify(now).includes('COFFEE') && !JSON.stringify(now).includes('MARS'));
    });

    test("another account's rundowns, quoting the same words, are never touched", async () => {
      const a = await shop();
      const b = await shop();
      const mine = await ask(a.key, T0 + HOUR, [JANE]);
      await ask(b.key, T0 + HOUR, [JANE, JANE]);
      const ours = await rundown(a.key);
      const theirs = await rundown(b.key);
      const theirFaqs = (await t.request('GET', '/v1/faqs?status=pending', { key: b.key })).body.data;
      assert.equal(theirFaqs.total, 1);
      await erase(a.key, mine);
      assert.equal((await get(a.key, ours.id)).unanswered[0].question, ERASED);
      assert.deepEqual(await get(b.key, theirs.id), theirs);
      assert.deepEqual((await t.request('GET', '/v1/faqs?status=pending', { key: b.key })).body.data, theirFaqs);
    });

    test('DELETE /v1/conversations?customerId= rewords every rundown that quotes any of the customer’s conversations', async () => {
      const a = await shop();
      await ask(a.key, T0 + HOUR, [JANE], 'jane');
      await ask(a.key, T0 + 3 * HOUR, [JANE], 'jane');
      await ask(a.key, T0 + 4 * HOUR, ['Is there a student discount?'], 'jane');
      await ask(a.key, T0 + 5 * HOUR, ['Do you sell coffee beans?'], 'joe');
      const made = await rundown(a.key);
      assert.equal(made.unanswered.length, 3);
      const r = await t.request('DELETE', '/v1/conversations?customerId=jane', { key: a.key });
      assert.deepEqual(r.body.data, { deleted: true, count: 3 });
      const now = await get(a.key, made.id);
      assert.deepEqual(
        now.unanswered.map((u: { question: string; count: number }) => [u.question, u.count]),
        [
          [ERASED, 2],
          ['Do you sell coffee beans?', 1],
          [ERASED, 1],
        ],
      );
      assert.deepEqual(now.suggestedFaqs, [{ id: made.suggestedFaqs[0].id, question: ERASED }]);
      assert.ok(!JSON.stringify(now).includes('4411'));
    });

    test('the retention sweep (CONVERSATION_RETENTION) rewords them too', async () => {
      const a = await shop();
      const jane = await ask(a.key, T0 + HOUR, [JANE]);
      await ask(a.key, T0 + 2 * HOUR, ['Do you sell coffee beans?']);
      const made = await rundown(a.key);
      t.fakeClock.set(T0 + 400 * DAY);
      const task = workerTasks({ ...t.ctx, config: { ...t.ctx.config, ...loadConfig({ CONVERSATION_RETENTION: '365d' }) } }).find((k) => k.name === 'conversation-retention')!;
      await task.run(new AbortController().signal);
      assert.equal((await t.request('GET', `/v1/conversations/${jane}`, { key: a.key })).status, 404);
      const now = await get(a.key, made.id);
      assert.deepEqual(now.unanswered.map((u: { question: string }) => u.question), [ERASED, ERASED]);
      assert.deepEqual(now.figures, made.figures);
    });

    test('erasures of several conversations quoted by one rundown, at once: every rewording is kept', async () => {
      const a = await shop();
      const words = ['Zanzibar delivery?', 'Kumquat jam?', 'Quokka plush toys?', 'Walrus mugs?'];
      const ids = [];
      for (const [i, w] of words.entries()) ids.push(await ask(a.key, T0 + (i + 1) * HOUR, [w], `cust-${i}`));
      const made = await rundown(a.key);
      assert.equal(made.unanswered.length, 4);
      await Promise.all(ids.map((id) => erase(a.key, id)));
      const now = await get(a.key, made.id);
      assert.deepEqual(now.unanswered.map((u: { question: string }) => u.question), [ERASED, ERASED, ERASED, ERASED]);
    });

    test('a rundown made before quotes were recorded is matched by the exact wording in its period', async () => {
      const a = await shop();
      const jane = await ask(a.key, T0 + HOUR, [JANE, JANE]);
      await ask(a.key, T0 + 2 * HOUR, ['Do you sell coffee beans?']);
      const made = await rundown(a.key);
      // The same digest stored as an older version stored it: the row alone, nothing recorded of where it came from.
      const stored = await t.ctx.db.selectFrom('rundowns').selectAll().where('id', '=', made.id).executeTakeFirstOrThrow();
      const old = { ...stored, id: newId('rd', T0 + 2 * DAY) };
      await t.ctx.db.insertInto('rundowns').values(old).execute();
      await erase(a.key, jane);
      const now = await get(a.key, old.id);
      assert.deepEqual(now, { ...(await get(a.key, made.id)), id: old.id });
      assert.deepEqual(now.unanswered, [{ ...made.unanswered[0], question: ERASED }, made.unanswered[1]]);
      assert.deepEqual(now.suggestedFaqs, [{ id: made.suggestedFaqs[0].id, question: ERASED }]);
      assert.equal((await t.request('GET', `/v1/faqs/${made.suggestedFaqs[0].id}`, { key: a.key })).status, 404);
    });

    test('a top topic that only the erased conversation had is shown as erased; one another conversation shares stays', async () => {
      const a = await shop();
      const jane = await ask(a.key, T0 + HOUR, ['Zanzibar Zanzibar delivery?']);
      const joe = await ask(a.key, T0 + 2 * HOUR, ['Kumquat kumquat tea?']);
      await ask(a.key, T0 + 3 * HOUR, ['kumquat kumquat jam?']);
      const made = await rundown(a.key);
      const names = made.topTopics.map((x: { name: string }) => x.name);
      assert.ok(names.includes('zanzibar') && names.includes('kumquat'), `precondition: ${JSON.stringify(made.topTopics)}`);
      await erase(a.key, jane);
      await erase(a.key, joe);
      const now = await get(a.key, made.id);
      assert.deepEqual(
        now.topTopics,
        made.topTopics.map((x: { name: string }) => (x.name === 'zanzibar' ? { ...x, name: ERASED } : x)),
      );
      assert.deepEqual(now.figures, made.figures);
    });

    test('a conversation erased while a rundown is being made is not quoted by it', { skip: dialect !== 'postgres' }, async () => {
      const a = await shop();
      const jane = await ask(a.key, T0 + HOUR, [JANE]);
      await ask(a.key, T0 + 2 * HOUR, ['Do you sell coffee beans?']);
      t.fakeClock.set(T0 + 2 * DAY);
      let made: Promise<{ status: number; text: string; body: any }> | undefined;
      await t.ctx.db.transaction().execute(async (trx) => {
        // An erasure under way: the conversation's row lock, then its deletes once the rundown waits for it. This
        // erasure ran before the rundown existed, so it had no quotes to find.
        await sql`select id from conversations where id = ${jane} for update`.execute(trx);
        const locker = (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx)).rows[0]!.pid;
        made = t.request('POST', '/v1/rundowns', { key: a.key, body: RANGE });
        await waitingOn(locker, 1);
        await trx.deleteFrom('messages').where('conversation_id', '=', jane).execute();
        await trx.deleteFrom('conversations').where('id', '=', jane).execute();
      });
      const r = await made!;
      assert.equal(r.status, 201, r.text);
      assert.ok(!r.text.includes('Jane'), r.text);
      assert.deepEqual(r.body.data.unanswered.map((u: { question: string }) => u.question), ['Do you sell coffee beans?']);
      assert.deepEqual(await quoteRows(jane), []);
    });
  });
}
