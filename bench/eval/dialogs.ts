/**
 * Multi-turn evaluation of the default assistant on the held-out dialogs (bench/eval/dialogs, format and the rule
 * that the set is not edited to fit results in its README). Every dialog is run turn by turn through answer() with
 * the history the chat passes (dialogset.ts), and scored per set and overall:
 * - follow-up recall@1 / @3 over turns with `expect`, first turns and later turns apart (a later turn is a hit only if
 *   its first cited source answers it in the context of the conversation); for reference, the later turns' recall@1
 *   when each is sent alone, without history;
 * - abstention over `unanswerable` turns (no source cited, and "I don't know" / an offer of a person);
 * - handoff rate over `handoff` turns (the chat escalates by customer request), and escalations on other turns;
 * - repeats: replies that give again, word for word, a knowledge-base paragraph an earlier reply of the dialog gave,
 *   without saying so (should be 0; "As in my answer above: …" quotes it and is not a repeat); for information, the
 *   answers that quote or point to an earlier one, and the answers identical to the reply just before;
 * - leaks: replies citing a draft or pending entry (should be 0).
 *
 *   node --import tsx bench/eval/dialogs.ts [--verbose] [--set=foodbox]
 */
import { DIALOG_SETS, emptyScore, markOf, mergeScores, runSet, type Score } from './dialogset.js';

const args = process.argv.slice(2);
const verbose = args.includes('--verbose');
const only = args.find((a) => a.startsWith('--set='))?.slice(6);
const names = only ? [only] : [...DIALOG_SETS];

const f = (n: number, d: number) => (d ? (n / d).toFixed(3) : '  -  ');
const total = emptyScore();
const rows: string[] = [];
let dialogs = 0;
let turns = 0;

function line(name: string, s: Score) {
  return [
    name.padEnd(9),
    `first r@1 ${f(s.firstR1, s.firstExpect)} r@3 ${f(s.firstR3, s.firstExpect)} (${s.firstExpect})`,
    `later r@1 ${f(s.laterR1, s.laterExpect)} r@3 ${f(s.laterR3, s.laterExpect)} (${s.laterExpect}; alone r@1 ${f(s.laterAloneR1, s.laterExpect)})`,
    `abst ${f(s.abstained, s.unanswerable)} (${s.unanswerable}; later ${s.abstainedLater}/${s.unanswerableLater})`,
    `handoff ${f(s.handedOff, s.handoffs)} (${s.handoffs})`,
    `repeats ${s.repeats}`,
  ].join('  ');
}

for (const name of names) {
  const { results, score } = runSet(name);
  dialogs += results.length;
  for (const dialog of results) {
    turns += dialog.length;
    if (!verbose) continue;
    console.log(`--- ${dialog[0]?.dialog ?? name}`);
    for (const r of dialog) {
      const expect = r.turn.kind === 'answerable' ? `expect=[${(r.turn.expect ?? []).join(',')}]` : `(${r.turn.kind})`;
      const extra = [r.escalated ? `ESCALATED:${r.escalated}` : '', r.sameAsBefore ? 'SAME-AS-BEFORE' : '', r.repeats ? `REPEAT: "${r.repeats.slice(0, 60)}…"` : '', r.leak ? 'LEAK' : '']
        .filter(Boolean)
        .join(' ');
      console.log(
        `  ${markOf(r).padEnd(4)} ${r.reply.kind.padEnd(9)} conf=${r.reply.confidence.toFixed(2)} [${r.keys.join(',')}] ${expect}  ${JSON.stringify(r.turn.q)} ${extra}`,
      );
      console.log(`         → ${JSON.stringify(r.text.length > 160 ? `${r.text.slice(0, 160)}…` : r.text)}`);
    }
  }
  rows.push(line(name, score));
  mergeScores(total, score);
}

console.log(`dialogs: ${dialogs}, customer turns: ${turns}  (sets: ${names.join(', ')})`);
for (const r of rows) console.log(r);
console.log(line('overall', total));
console.log(
  `answers referring back to an earlier one ${total.refersBack}, identical to the reply just before ${total.sameAsBefore}; ` +
    `escalations: on turns that did not ask for a person ${total.falseHandoffs}, after repeated unanswered questions ${total.noAnswerEscalations};` +
    ` frustrated remarks answered with a source ${total.frustratedCited}/${total.frustrated}; leaks ${total.leaks}`,
);
const tags = [...total.byTag].sort(([a], [b]) => a.localeCompare(b));
console.log(`recall@1 by tag (turns with expect): ${tags.map(([t, e]) => `${t} ${f(e.r1, e.n)} (${e.n})`).join(', ')}`);
