import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { useTestApp, type SuiteApp } from '../helpers/app.js';
import { DIALECTS } from '../helpers/db.js';
import { newId } from '../../src/lib/ids.js';
import { insertConversation } from '../modules/conversations/fixtures.js';

/**
 * A list's `total` and its page describe the same rows however writes interleave with the read. Each list below
 * is read again and again while rows are added one commit at a time; every page holds all the rows (fewer than
 * its limit), so its length must equal its total. Read by two statements, on PostgreSQL each with its own
 * snapshot on its own connection, a commit landing between them gave a total one off the page.
 */
const ROWS = 60;

interface Case {
  name: string;
  path: string;
  items: string;
  add(t: SuiteApp, i: number): Promise<unknown>;
}

const CASES: Case[] = [
  {
    name: 'documents (a precompiled page)',
    path: '/v1/documents?limit=100',
    items: 'documents',
    add: (t, i) => t.request('POST', '/v1/documents', { key: t.key, body: { title: `Doc ${i}`, content: 'Some text.' } }),
  },
  {
    name: 'FAQs (a page of whole rows)',
    path: '/v1/faqs?limit=100',
    items: 'faqs',
    add: (t, i) => t.request('POST', '/v1/faqs', { key: t.key, body: { question: `Question ${i}?`, answer: 'An answer.', category: 'general' } }),
  },
  {
    name: 'conversations (a page by ids)',
    path: '/v1/conversations?limit=100',
    items: 'conversations',
    add: (t, i) => insertConversation(t.ctx.db, t.accountId, { created_at: Date.now() - 60_000 + i }),
  },
  {
    name: 'the event feed (a page by ids)',
    path: '/v1/events?limit=100',
    items: 'events',
    add: (t, i) => {
      const at = Date.now();
      const payload = JSON.stringify({ event: 'conversation.started', timestamp: new Date(at).toISOString(), data: { n: i } });
      return t.ctx.db.insertInto('events').values({ id: newId('evt', at), account_id: t.accountId, kind: 'conversation.started', payload, created_at: at }).execute();
    },
  },
];

for (const dialect of DIALECTS) {
  describe(`a list's page and total come from one snapshot (${dialect})`, () => {
    for (const c of CASES) {
      describe(c.name, () => {
        const t = useTestApp(dialect);

        test(`every page read while ${ROWS} rows are added one by one has as many items as its total`, async () => {
          let adding = true;
          const writer = (async () => {
            try {
              for (let i = 0; i < ROWS; i++) {
                const r = await c.add(t, i);
                if (r && typeof r === 'object' && 'status' in r) assert.equal(r.status, 201);
                // Paced, so that the reads overlap every commit (a direct insert takes well under a millisecond).
                await new Promise((resolve) => setTimeout(resolve, 2));
              }
            } finally {
              adding = false;
            }
          })();
          const off: string[] = [];
          let reads = 0;
          const reader = async () => {
            while (adding) {
              const r = await t.request('GET', c.path, { key: t.key });
              assert.equal(r.status, 200, r.text);
              const { total } = r.body.data;
              const items = r.body.data[c.items] as unknown[];
              reads += 1;
              if (items.length !== total) off.push(`${items.length} items, total ${total}`);
            }
          };
          await Promise.all([writer, reader(), reader(), reader()]);
          assert.ok(reads >= ROWS / 2, `only ${reads} reads while the rows were added`);
          assert.deepEqual(off, [], `${off.length} of ${reads} pages disagreed with their total`);
          const last = await t.request('GET', c.path, { key: t.key });
          assert.equal(last.body.data.total, ROWS);
        });

        test('a page past the end is empty and still tells the total; an empty list is 0', async () => {
          const past = await t.request('GET', `${c.path.split('?')[0]}?limit=10&offset=${ROWS + 5}`, { key: t.key });
          assert.equal(past.status, 200, past.text);
          assert.deepEqual(past.body.data[c.items], []);
          assert.equal(past.body.data.total, ROWS);
          const other = await t.account();
          const empty = await t.request('GET', c.path, { key: other.key });
          assert.deepEqual(empty.body.data[c.items], []);
          assert.equal(empty.body.data.total, 0);
        });
      });
    }
  });
}
