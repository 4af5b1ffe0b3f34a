import assert from 'node:assert/strict';
import { before, describe, test } from 'node:test';
import { verify } from '@octokit/webhooks-methods';
import { workerTasks } from '../../../src/worker/tasks.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';
import { useWebhookReceiver } from '../../helpers/webhooks.js';
import { sleep, waitFor } from '../webhooks/delivery-helpers.js';
import { converse, DAY, HOUR, iso, loadKnowledge, MIN, T0 } from './helpers.js';

const SECRET = 'rundown-webhook-secret';

for (const dialect of DIALECTS) {
  describe(`rundown.generated reaches a registered webhook (${dialect})`, () => {
    // The account is created inside the window [T0, T0 + DAY): the worker's first run (at start) has no window to make.
    const t = useTestApp(dialect, { fakeClock: T0 + MIN });
    before(async () => {
      await loadKnowledge(t, t.key);
      await converse(t, t.key, T0 + HOUR, ['How long should I brew green tea?'], { end: true });
      await converse(t, t.key, T0 + 2 * HOUR, ['Do you sell coffee beans?', 'Do you sell coffee beans?'], { end: true });
    });
    const receiver = useWebhookReceiver(t, { secret: SECRET, events: ['rundown.generated'] });

    const bodies = () => receiver.received.map((r) => JSON.parse(r.body.toString('utf8')));

    test('a manual rundown: signed delivery with the documented data', async () => {
      t.fakeClock.set(T0 + 6 * HOUR);
      const r = await t.request('POST', '/v1/rundowns', { key: t.key, body: { from: iso(T0), to: iso(T0 + 6 * HOUR) } });
      assert.equal(r.status, 201, r.text);
      const rd = r.body.data;
      await waitFor(() => receiver.received.length >= 1, 'the delivery');
      // The spec's signature (the Standard Webhooks one checks its timestamp against the real clock, and
      // this test runs on a fake one; test/modules/webhooks covers it).
      const delivered = receiver.received[0]!;
      assert.equal(await verify(SECRET, delivered.body.toString('utf8'), delivered.headers['x-service-signature'] as string), true);
      assert.equal(receiver.received[0]!.headers['x-service-event'], 'rundown.generated');
      const [body] = bodies();
      assert.deepEqual(Object.keys(body).sort(), ['data', 'event', 'timestamp']);
      assert.equal(body.event, 'rundown.generated');
      assert.equal(body.timestamp, iso(T0 + 6 * HOUR));
      assert.deepEqual(body.data, {
        rundownId: rd.id,
        from: iso(T0),
        to: iso(T0 + 6 * HOUR),
        trigger: 'manual',
        conversations: 2,
        resolutionRate: 1 / 2,
        escalationRate: 1 / 2,
        unansweredQuestions: 2,
        suggestedFaqs: 1,
      });
      assert.equal(rd.figures.conversations, body.data.conversations);
      assert.equal(rd.suggestedFaqs.length, 1);
    });

    test('the worker’s scheduled rundown of the day that just ended is delivered too', async () => {
      t.fakeClock.set(T0 + DAY + HOUR);
      await workerTasks(t.ctx).find((x) => x.name === 'rundown-scheduler')!.run(new AbortController().signal);
      await waitFor(() => receiver.received.length >= 2, 'the scheduled delivery');
      const scheduled = bodies()[1];
      const list = (await t.request('GET', '/v1/rundowns?trigger=schedule', { key: t.key })).body.data;
      assert.equal(list.total, 1);
      assert.deepEqual(scheduled.data, {
        rundownId: list.rundowns[0].id,
        from: iso(T0),
        to: iso(T0 + DAY),
        trigger: 'schedule',
        conversations: 2,
        resolutionRate: 1 / 2,
        escalationRate: 1 / 2,
        unansweredQuestions: 2,
        suggestedFaqs: 0, // filed by the manual rundown already
      });
      await sleep(100);
      assert.equal(receiver.received.length, 2, 'one event per rundown');
    });
  });
}
