import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { kbTextMatcher, loadDialogs, repeatedPassage, runDialog, type IsKbText } from '../../../bench/eval/dialogset.js';
import { loadSet, type KbFile } from '../../../bench/eval/kbset.js';
import { useTestApp } from '../../helpers/app.js';
import { DIALECTS } from '../../helpers/db.js';

// bench/eval/dialogs.ts runs the held-out dialogs through answer() with a copy of what the chat does around it (the
// history window, the persona, "yes" to the offer of a person, the escalation texts). If the chat changes and the copy
// does not, the figures in BENCHMARKS.md measure history the chat never passes: every turn must come out the same
// through the real chat API. Nothing here depends on how well the assistant answers.
const SET = 'saas';
const DIR = `bench/eval/heldout/${SET}`;

for (const dialect of DIALECTS) {
  describe(`held-out dialogs: the bench runner matches the chat (${dialect})`, () => {
    const t = useTestApp(dialect);

    test(`every turn of the ${SET} dialogs gets the same sources and reply text as through the chat API`, async () => {
      const kb = JSON.parse(readFileSync(`${DIR}/kb.json`, 'utf8')) as KbFile;
      const idToKey = new Map<string, string>();
      const post = async (path: string, body: unknown) => {
        const r = await t.request('POST', path, { key: t.key, body });
        assert.ok(r.status === 200 || r.status === 201, `${path}: ${r.text}`);
        return r.body.data;
      };
      for (const d of kb.documents) idToKey.set((await post('/v1/documents', { title: d.title, content: d.content, status: d.status })).id, d.key);
      for (const f of kb.faqs) idToKey.set((await post('/v1/faqs', { question: f.question, answer: f.answer, category: f.category, status: f.status })).id, f.key);

      const set = loadSet(DIR);
      const isKbText = kbTextMatcher(DIR);
      let turns = 0;
      for (const dialog of loadDialogs(SET)) {
        const bench = runDialog(set, dialog, isKbText);
        const conv = await post('/v1/chat/conversations', {});
        for (const [i, turn] of dialog.turns.entries()) {
          const sent = await post(`/v1/chat/conversations/${conv.conversation.id}/messages`, { content: turn.q });
          const reply = sent.messages[1] as { content: string; sources: string[] };
          const where = `${dialog.id} turn ${i} ${JSON.stringify(turn.q)}`;
          assert.deepEqual(reply.sources.map((id) => idToKey.get(id)), bench[i]!.keys, where);
          assert.equal(reply.content, bench[i]!.text, where);
          turns++;
        }
      }
      assert.ok(turns >= 20, `only ${turns} turns run`);
    });
  });
}

describe('held-out dialogs: what counts as a repeated passage', () => {
  const PARA = 'Shipping is $9.99 per box, and your first box ships free of charge.';
  const isKb: IsKbText = (p) => `${PARA} Boxes arrive between 8am and 8pm on your delivery day.`.includes(p);
  const earlier = [`${PARA}\n\nSee also: "How Harvest Crate Works: Plans and Prices".`];

  test('a knowledge-base paragraph given again as if new is a repeat, also inside a longer paragraph', () => {
    assert.equal(repeatedPassage(`${PARA}\n\nHope that helps!`, earlier, isKb), PARA);
    assert.equal(repeatedPassage(`From our article "Prices":\n\n${PARA} Boxes arrive between 8am and 8pm on your delivery day.`, earlier, isKb), PARA);
  });

  test('a quote that says it repeats the answer above, the answerer\'s own lines and other passages are not', () => {
    assert.equal(repeatedPassage(`As in my answer above: ${PARA}`, earlier, isKb), null);
    assert.equal(repeatedPassage('See also: "How Harvest Crate Works: Plans and Prices".', earlier, isKb), null);
    assert.equal(repeatedPassage('Boxes arrive between 8am and 8pm on your delivery day.', earlier, isKb), null);
    // Not knowledge-base text (a pointer the answerer wrote), however long: not a passage.
    const pointer = 'What I have on this is in my answer above, from our FAQ "How much is shipping?". Would you like a person?';
    assert.equal(repeatedPassage(pointer.replace('in my answer above', 'below'), [pointer.replace('in my answer above', 'below')], isKb), null);
  });
});
