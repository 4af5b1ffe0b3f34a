/**
 * Multi-turn dialogs (bench/eval/dialogs/<set>.jsonl, format in its README) run turn by turn through the default
 * answerer, the way the chat sends them: each customer message is answered with the conversation so far as history,
 * and the chat's own handling around the answerer (a request for a person, "yes" to the offer of one, "no thanks",
 * escalation after repeated unanswered questions) decides what the next turn's history holds.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  answer,
  isNoAnswerText,
  offersPerson,
  UNANSWERED_ESCALATION_TEXT,
  UNKNOWN_TEXT,
  type AssistantAnswer,
  type ChatTurn,
} from '../../src/modules/assistant/answerer.js';
import { DEFAULT_SETTINGS, UNNAMED_GREETING } from '../../src/modules/assistant/assistant.schemas.js';
import { asksSomething, detectHandoff, isAffirmative, isNegative } from '../../src/modules/assistant/intent.js';
import { onlyGivesEmail } from '../../src/modules/assistant/questions.js';
import { loadSet, type KbFile, type LoadedSet } from './kbset.js';

export interface DialogTurn {
  q: string;
  kind: 'answerable' | 'unanswerable' | 'handoff' | 'any';
  expect?: string[];
  tags?: string[];
}
export interface Dialog {
  id: string;
  turns: DialogTurn[];
}

/** The five knowledge bases the dialogs are written for (each has bench/eval/heldout/<set>/kb.json). */
export const DIALOG_SETS = ['foodbox', 'furniture', 'fitness', 'telecom', 'saas'] as const;

export function loadDialogs(set: string): Dialog[] {
  return readFileSync(join('bench/eval/dialogs', `${set}.jsonl`), 'utf8')
    .split('\n')
    .filter((l) => l.trim())
    .map((l) => JSON.parse(l) as Dialog);
}

// Mirrors of chat.service.ts (not exported there). If the chat changes them, these must follow, or the history the
// answerer sees here is not the one it sees in production.
/** The chat passes the last this many messages (both roles, the greeting included) as history. */
const HISTORY_TURNS = 6;
const UNANSWERED_BEFORE_ESCALATION = 2;
const DECLINED_TEXT = 'No problem. Is there anything else I can help with?';
const ASK_EMAIL = " What's the best email address to reach you?";
/** An account that has not changed its assistant settings (its tone adds "Hope that helps!" to answers). */
const PERSONA = { name: DEFAULT_SETTINGS.name, tone: DEFAULT_SETTINGS.tone };

export interface TurnResult {
  dialog: string;
  index: number;
  turn: DialogTurn;
  reply: AssistantAnswer;
  /** The assistant message the chat would store (and the next turn's history holds). */
  text: string;
  /** Cited sources as kb.json keys (the sets' ids are their keys). */
  keys: string[];
  /** The conversation escalates on this turn, by customer request or after repeated unanswered questions. */
  escalated: 'customer_request' | 'no_answer' | null;
  /** A passage of an earlier reply of this dialog given again word for word (see {@link repeatedPassage}). */
  repeats: string | null;
  /** An answer identical to the reply just before it. */
  sameAsBefore: boolean;
  /** An answer that quotes or points to an earlier one ("As in my answer above: …"). */
  refersBack: boolean;
  leak: boolean;
}

/** One dialog through the answerer, turn by turn, with the history the chat would pass. */
export function runDialog(set: LoadedSet, dialog: Dialog, isKbText: IsKbText): TurnResult[] {
  const transcript: ChatTurn[] = [{ role: 'assistant', content: UNNAMED_GREETING }];
  const earlier: string[] = [];
  let streak = 0;
  let escalatedAlready = false;
  const out: TurnResult[] = [];
  dialog.turns.forEach((turn, index) => {
    const history = transcript.slice(-HISTORY_TURNS);
    const lastReply = transcript.findLast((m) => m.role === 'assistant');
    const offered = lastReply !== undefined && offersPerson(lastReply.content);
    const handoff = detectHandoff(turn.q) || onlyGivesEmail(turn.q) || (offered && isAffirmative(turn.q));
    let reply: AssistantAnswer;
    if (handoff) reply = { kind: 'handoff', content: '', sources: [], confidence: 1, topics: [] };
    else if (offered && isNegative(turn.q)) reply = { kind: 'smalltalk', content: DECLINED_TEXT, sources: [], confidence: 1, topics: [] };
    else reply = answer(set.index, turn.q, { history, persona: PERSONA });

    if (reply.kind === 'no_answer') streak++;
    else if (reply.sources.length > 0) streak = 0;
    let escalated: TurnResult['escalated'] = null;
    if (!escalatedAlready && reply.kind === 'handoff') escalated = 'customer_request';
    else if (!escalatedAlready && reply.kind === 'no_answer' && streak >= UNANSWERED_BEFORE_ESCALATION) escalated = 'no_answer';
    let text = reply.content;
    if (escalated === 'no_answer') text = `${UNANSWERED_ESCALATION_TEXT} I'm passing this conversation to a person from our team.${ASK_EMAIL}`;
    else if (reply.kind === 'handoff') {
      text = escalatedAlready
        ? `A person from our team has already been asked to take over this conversation.${ASK_EMAIL}`
        : `Of course. I'm passing this conversation to a person from our team.${ASK_EMAIL}`;
    } else if (escalatedAlready && reply.kind === 'no_answer') {
      const unknown = asksSomething(turn.q) && reply.confidence > 0 ? `${UNKNOWN_TEXT} ` : '';
      text = `${unknown}A person from our team has already been asked to take over this conversation.${ASK_EMAIL}`;
    }
    if (escalated) escalatedAlready = true;

    const repeats = reply.sources.length > 0 ? repeatedPassage(reply.content, earlier, isKbText) : null;
    // The same answer as the turn before (a pointer to "my answer above" given twice): the customer is going in circles.
    const sameAsBefore = reply.sources.length > 0 && lastReply !== undefined && reply.content === lastReply.content;
    out.push({
      dialog: dialog.id,
      index,
      turn,
      reply,
      text,
      keys: reply.sources,
      escalated,
      repeats,
      sameAsBefore,
      refersBack: reply.sources.length > 0 && REFERS_BACK.test(reply.content),
      leak: reply.sources.some((id) => set.leakIds.has(id)),
    });
    if (reply.sources.length > 0) earlier.push(reply.content);
    transcript.push({ role: 'customer', content: turn.q }, { role: 'assistant', content: text });
  });
  return out;
}

const norm = (s: string) => s.replace(/\s+/g, ' ').trim();

/** Shorter paragraphs are not counted: a short FAQ sentence may recur in different answers by chance. */
const MIN_PASSAGE_WORDS = 8;
/** A reply that says it is giving an earlier answer again: a quote, which is what the chat should do, not a repeat. */
export const REFERS_BACK = /\b(?:in my (?:answer|reply) above|as I (?:said|mentioned))\b/i;

/** Whether a paragraph of a reply is text of the knowledge base (an FAQ answer, a document paragraph or part of one). */
export type IsKbText = (paragraph: string) => boolean;

export function kbTextMatcher(dir: string): IsKbText {
  const kb = JSON.parse(readFileSync(join(dir, 'kb.json'), 'utf8')) as KbFile;
  const texts = [...kb.documents.map((d) => norm(d.content)), ...kb.faqs.map((f) => norm(f.answer))];
  return (p) => texts.some((t) => t.includes(p));
}

/**
 * The first passage of an earlier answer that `reply` gives again word for word, or null. A passage is a paragraph of
 * the earlier reply that is knowledge-base text of at least {@link MIN_PASSAGE_WORDS} words (the answerer's own lines —
 * "From our article …", "See also", a pointer to the answer above — are not passages). A reply that refers back to
 * the earlier answer ("As in my answer above: …") quotes it and is not counted.
 */
export function repeatedPassage(reply: string, earlierAnswers: readonly string[], isKbText: IsKbText): string | null {
  if (REFERS_BACK.test(reply)) return null;
  const now = norm(reply);
  for (const prev of earlierAnswers) {
    for (const para of prev.split(/\n\s*\n/)) {
      const p = norm(para).replace(/…$/, '');
      if (p.split(' ').length < MIN_PASSAGE_WORDS || !isKbText(p)) continue;
      if (now.includes(p)) return p;
    }
  }
  return null;
}

export interface Score {
  firstExpect: number;
  firstR1: number;
  firstR3: number;
  laterExpect: number;
  laterR1: number;
  laterR3: number;
  /** Later turns with `expect`, each sent alone (no history): what the follow-up handling adds over none. */
  laterAloneR1: number;
  unanswerable: number;
  abstained: number;
  /** The same, over unanswerable turns after the first. */
  unanswerableLater: number;
  abstainedLater: number;
  handoffs: number;
  handedOff: number;
  /** Escalations by customer request on turns that did not ask for a person. */
  falseHandoffs: number;
  /** Escalations after repeated unanswered questions. */
  noAnswerEscalations: number;
  repeats: number;
  sameAsBefore: number;
  refersBack: number;
  leaks: number;
  /** `any` turns tagged frustrated that cited a source (a complaint answered with an article). */
  frustratedCited: number;
  frustrated: number;
  byTag: Map<string, { n: number; r1: number }>;
}

export const emptyScore = (): Score => ({
  firstExpect: 0, firstR1: 0, firstR3: 0, laterExpect: 0, laterR1: 0, laterR3: 0, laterAloneR1: 0,
  unanswerable: 0, abstained: 0, unanswerableLater: 0, abstainedLater: 0, handoffs: 0, handedOff: 0, falseHandoffs: 0, noAnswerEscalations: 0,
  repeats: 0, sameAsBefore: 0, refersBack: 0, leaks: 0, frustratedCited: 0, frustrated: 0, byTag: new Map(),
});

/** The mark `--verbose` prints for a turn: ok@1, ok@3, MISS, ABST (answerable); abst, ANSW; hand, NOHO; '-' for any. */
export function markOf(r: TurnResult): string {
  const t = r.turn;
  if (t.kind === 'answerable') {
    const exp = t.expect ?? [];
    if (r.keys[0] !== undefined && exp.includes(r.keys[0])) return 'ok@1';
    if (r.keys.slice(0, 3).some((k) => exp.includes(k))) return 'ok@3';
    return r.keys.length === 0 ? 'ABST' : 'MISS';
  }
  if (t.kind === 'unanswerable') return abstains(r) ? 'abst' : 'ANSW';
  if (t.kind === 'handoff') return r.reply.kind === 'handoff' ? 'hand' : 'NOHO';
  return '-';
}

/**
 * Cites nothing and says it does not know / offers a person, or passes the customer to one (an escalation after
 * repeated unanswered questions counts, as in /work/shared/eval/README.md; its text does not say "don't know").
 */
const abstains = (r: TurnResult) =>
  r.keys.length === 0 && (r.reply.kind === 'handoff' || r.reply.kind === 'no_answer' || isNoAnswerText(r.text));

export function addToScore(s: Score, set: LoadedSet, results: readonly TurnResult[]): void {
  for (const r of results) {
    const t = r.turn;
    const mark = markOf(r);
    if (r.repeats) s.repeats++;
    if (r.sameAsBefore) s.sameAsBefore++;
    if (r.refersBack) s.refersBack++;
    if (r.leak) s.leaks++;
    if (r.escalated === 'no_answer') s.noAnswerEscalations++;
    if (r.escalated === 'customer_request' && t.kind !== 'handoff') s.falseHandoffs++;
    if (t.kind === 'answerable') {
      const hit1 = mark === 'ok@1';
      const hit3 = hit1 || mark === 'ok@3';
      if (r.index === 0) {
        s.firstExpect++;
        s.firstR1 += hit1 ? 1 : 0;
        s.firstR3 += hit3 ? 1 : 0;
      } else {
        s.laterExpect++;
        s.laterR1 += hit1 ? 1 : 0;
        s.laterR3 += hit3 ? 1 : 0;
        const alone = answer(set.index, t.q).sources[0];
        if (alone !== undefined && (t.expect ?? []).includes(alone)) s.laterAloneR1++;
      }
      for (const tag of t.tags ?? []) {
        const e = s.byTag.get(tag) ?? { n: 0, r1: 0 };
        e.n++;
        e.r1 += hit1 ? 1 : 0;
        s.byTag.set(tag, e);
      }
    } else if (t.kind === 'unanswerable') {
      s.unanswerable++;
      if (mark === 'abst') s.abstained++;
      if (r.index > 0) {
        s.unanswerableLater++;
        if (mark === 'abst') s.abstainedLater++;
      }
    } else if (t.kind === 'handoff') {
      s.handoffs++;
      if (mark === 'hand') s.handedOff++;
    } else if (t.tags?.includes('frustrated')) {
      s.frustrated++;
      if (r.keys.length > 0) s.frustratedCited++;
    }
  }
}

export function mergeScores(into: Score, from: Score): void {
  for (const k of Object.keys(from) as (keyof Score)[]) {
    if (k === 'byTag') continue;
    (into[k] as number) += from[k] as number;
  }
  for (const [tag, e] of from.byTag) {
    const t = into.byTag.get(tag) ?? { n: 0, r1: 0 };
    t.n += e.n;
    t.r1 += e.r1;
    into.byTag.set(tag, t);
  }
}

/** Loads one set's KB and dialogs, runs them all and scores them. */
export function runSet(name: string): { set: LoadedSet; results: TurnResult[][]; score: Score } {
  const dir = `bench/eval/heldout/${name}`;
  const set = loadSet(dir);
  const isKbText = kbTextMatcher(dir);
  const results = loadDialogs(name).map((d) => runDialog(set, d, isKbText));
  const score = emptyScore();
  for (const r of results) addToScore(score, set, r);
  return { set, results, score };
}
