import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS, insertionOrder } from '../../helpers/db.js';

for (const dialect of DIALECTS) {
  describe(`event bus: events emitted together (${dialect})`, () => {
    const t = useTestApp(dialect);

    test('emitMany stores the events in order and fans each out to exactly the webhooks subscribed to its kind', async () => {
      const hook = async (events: string[]) =>
        (await t.request('POST', '/v1/webhooks', { key: t.key, body: { url: 'https://example.com/h', events, secret: 'whsec_events_1' } })).body.data.id as string;
      const messagesOnly = await hook(['conversation.message']);
      const both = await hook(['conversation.message', 'conversation.started']);
      const emitted = await t.ctx.db.transaction().execute((trx) =>
        t.ctx.events.emitMany(trx, t.accountId, [
          { kind: 'conversation.started', data: { n: 1 } },
          { kind: 'conversation.message', data: { n: 2 } },
          { kind: 'conversation.message', data: { n: 3 } },
        ]),
      );
      assert.deepEqual(emitted.map((e) => e.kind), ['conversation.started', 'conversation.message', 'conversation.message']);
      const stored = await t.ctx.db.selectFrom('events').select(['id', 'payload']).where('account_id', '=', t.accountId).orderBy(insertionOrder(t.database.dialect)).execute();
      assert.deepEqual(stored.map((r) => JSON.parse(r.payload).data.n), [1, 2, 3]);
      assert.deepEqual(stored.map((r) => r.id), emitted.map((e) => e.id), 'stored in emission order');
      const deliveries = await t.ctx.db.selectFrom('deliveries').select(['webhook_id', 'event_id', 'body']).where('account_id', '=', t.accountId).execute();
      const position = (eventId: string | null) => emitted.findIndex((e) => e.id === eventId);
      const byHook = (id: string) =>
        deliveries
          .filter((d) => d.webhook_id === id)
          .sort((a, b) => position(a.event_id) - position(b.event_id))
          .map((d) => JSON.parse(d.body).data.n);
      assert.deepEqual(byHook(messagesOnly), [2, 3]);
      assert.deepEqual(byHook(both), [1, 2, 3]);
      for (const d of deliveries) assert.equal(d.body, emitted.find((e) => e.id === d.event_id)!.body, 'the delivery freezes the event body');
    });

    test('events and their deliveries roll back with the emitting transaction', async () => {
      const count = async () => ({
        events: (await t.ctx.db.selectFrom('events').select('id').where('account_id', '=', t.accountId).execute()).length,
        deliveries: (await t.ctx.db.selectFrom('deliveries').select('id').where('account_id', '=', t.accountId).execute()).length,
      });
      const before = await count();
      await assert.rejects(
        t.ctx.db.transaction().execute(async (trx) => {
          await t.ctx.events.emitMany(trx, t.accountId, [{ kind: 'conversation.message', data: { n: 4 } }]);
          throw new Error('the change that caused the event failed');
        }),
      );
      assert.deepEqual(await count(), before);
    });
  });
}
