/**
 * Fits the answerer's confidence model (a logistic regression over DECISION_FEATURES, see
 * answerer.ts) on the HELD-OUT sets only — never on eval set A — and prints the
 * weights to paste into CONFIDENCE_MODEL, plus leave-one-set-out figures: for
 * each threshold, recall@1 and abstention when every set is judged by a model
 * trained without it. The loss is class-balanced, so 0.5 (DEFAULT_MIN_CONFIDENCE)
 * is where answering and abstaining are equally likely to be right; the table
 * shows what moving it would trade, and the last line the threshold chosen by
 * rule: the lowest one whose leave-one-set-out abstention meets the 0.85 target.
 *
 *   node --import tsx bench/eval/calibrate.ts [--l2=0.01]
 *
 * Training examples (handoff questions excluded, as they never reach the model):
 * - positive: answerable question whose best hit is an expected source (answering is right);
 * - negative: unanswerable question (answering is wrong, whatever is cited);
 * - answerable questions whose best hit is wrong are left out: abstaining or
 *   answering costs the same on recall@1, so they carry no signal for the decision.
 */
import { decide, DECISION_FEATURES } from '../../src/modules/assistant/answerer.js';
import { detectHandoff } from '../../src/modules/assistant/intent.js';
import { HELDOUT_DIRS, loadSet } from './kbset.js';

const l2 = Number(process.argv.find((a) => a.startsWith('--l2='))?.slice(5) ?? 0.01);
const KEYS = DECISION_FEATURES;

interface Example {
  set: string;
  x: number[];
  y: 0 | 1;
}

const examples: Example[] = [];
/** Answerable questions whose best hit is wrong: never right at 1, whatever the decision. */
let answerableTotal = 0;
for (const dir of HELDOUT_DIRS) {
  const s = loadSet(dir);
  for (const q of s.questions) {
    if (q.kind === 'handoff' || detectHandoff(q.q)) continue;
    const d = decide(s.index, q.q);
    const x = d ? KEYS.map((k) => d.features[k]) : KEYS.map((k) => (k === 'unknownShare' ? 1 : 0));
    if (q.kind === 'answerable') answerableTotal++;
    if (q.kind === 'unanswerable') examples.push({ set: dir, x, y: 0 });
    else if (d && q.expect.includes(d.hits[0]!.sourceId)) examples.push({ set: dir, x, y: 1 });
  }
}

/** Batch gradient descent on the class-balanced log loss with L2 on the weights (not the bias). */
function fit(data: Example[]): { bias: number; w: number[] } {
  const pos = data.filter((e) => e.y === 1).length;
  const neg = data.length - pos;
  // Balance the classes: there are far more answerable questions than unanswerable ones
  const cw = (y: number) => (y === 1 ? data.length / (2 * pos) : data.length / (2 * neg));
  let bias = 0;
  const w = KEYS.map(() => 0);
  for (let it = 0; it < 20_000; it++) {
    let gb = 0;
    const gw = w.map(() => 0);
    for (const e of data) {
      const z = bias + e.x.reduce((s, v, i) => s + v * w[i]!, 0);
      const err = (1 / (1 + Math.exp(-z)) - e.y) * cw(e.y);
      gb += err;
      e.x.forEach((v, i) => (gw[i]! += err * v));
    }
    const lr = 0.5;
    bias -= (lr * gb) / data.length;
    w.forEach((_, i) => (w[i]! -= lr * (gw[i]! / data.length + l2 * w[i]!)));
  }
  return { bias, w };
}

const prob = (m: { bias: number; w: number[] }, x: number[]) => 1 / (1 + Math.exp(-(m.bias + x.reduce((s, v, i) => s + v * m.w[i]!, 0))));
const report = (label: string, m: { bias: number; w: number[] }, data: Example[]) => {
  const pos = data.filter((e) => e.y === 1);
  const neg = data.filter((e) => e.y === 0);
  const tp = pos.filter((e) => prob(m, e.x) >= 0.5).length;
  const tn = neg.filter((e) => prob(m, e.x) < 0.5).length;
  console.log(`${label}: answered ${tp}/${pos.length} right-at-1 answerable, abstained on ${tn}/${neg.length} unanswerable`);
};

const all = fit(examples);
console.log(`examples: ${examples.length} (${examples.filter((e) => e.y === 1).length} positive), l2=${l2}`);
console.log('CONFIDENCE_MODEL = {');
console.log(`  bias: ${all.bias.toFixed(3)},`);
console.log(`  weights: { ${KEYS.map((k, i) => `${k}: ${all.w[i]!.toFixed(3)}`).join(', ')} },`);
console.log('}');
report(`fitted on all ${HELDOUT_DIRS.length} held-out sets (training fit)`, all, examples);
const held = new Map<Example, number>();
for (const dir of HELDOUT_DIRS) {
  const m = fit(examples.filter((e) => e.set !== dir));
  const test = examples.filter((e) => e.set === dir);
  report(`trained without ${dir}, tested on it`, m, test);
  for (const e of test) held.set(e, prob(m, e.x));
}

// Operating point, from the leave-one-set-out probabilities only.
const negatives = examples.filter((e) => e.y === 0);
const ABSTENTION_TARGET = 0.85;
let chosen: number | undefined;
console.log('threshold  recall@1 (all answerable, abstaining counts as a miss)  abstention');
for (let i = 0; i <= 8; i++) {
  const th = 0.3 + i * 0.05;
  const r1 = examples.filter((e) => e.y === 1 && held.get(e)! >= th).length / answerableTotal;
  const ab = negatives.filter((e) => held.get(e)! < th).length / negatives.length;
  if (chosen === undefined && ab >= ABSTENTION_TARGET) chosen = th;
  console.log(`${th.toFixed(2)}       ${r1.toFixed(3)}                                                ${ab.toFixed(3)}`);
}
// The rule for DEFAULT_MIN_CONFIDENCE: answer as much as possible while abstaining on at least the target share of
// unanswerable questions of knowledge bases the model has not seen.
console.log(`DEFAULT_MIN_CONFIDENCE: ${chosen?.toFixed(2) ?? 'none reaches'} (lowest threshold with leave-one-set-out abstention >= ${ABSTENTION_TARGET})`);

