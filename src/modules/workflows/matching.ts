/**
 * Trigger matching and field extraction for workflows. Pure and synchronous.
 *
 * A trigger phrase matches a customer message when every content word of the phrase occurs in the message,
 * in any order, after the assistant's own analysis (stems, synonyms, stopwords dropped): "book a demo" matches
 * "could I book a product demo?" and "booking demos"; a phrase word of six letters or more also matches a word
 * one typo away ("scheduel a demo"). A phrase made only of stopwords ("I want to") is matched as normalised
 * words in sequence instead.
 *
 * Fields are looked for in the customer's messages, newest first (the latest value wins):
 * - a labelled value — the key's words ("orderNumber" → "order number") followed by the value, optionally
 *   with "is", ":", "=", "#" or "-" between, or for numbers preceding it ("12 seats") — for every type but
 *   pattern; a text value runs to the end of its clause (punctuation, "and", "but", "with"…, 80 characters);
 * - unlabelled, by shape: the first email address, the first phone number (7–15 digits), the first match of a
 *   `pattern` field (its first capture group, else the whole match); a number only when the conversation
 *   holds exactly one, since "2 wheels, order 58213" says nothing about which is meant; `text` never (it has
 *   no shape);
 * - an email field falls back to the email the conversation already knows (given at start or as contact).
 */
import { RE2JS } from 're2js';
import { analyze, EMAIL_IN_TEXT as EMAIL, normalize, oneTypoApart } from '../assistant/text.js';
import type { Field } from './workflows.schemas.js';

export interface CompiledTrigger {
  /** Analysed terms that must all occur in the message; empty for a phrase of stopwords only. */
  terms: string[];
  /** Normalised phrase, for stopword-only phrases. */
  phrase: string;
  /** Per term, the phrase's words (normalised, before stemming) that give it: typos are looked for on words. */
  words: Map<string, string[]>;
}

const PHONE = /(?:\+?\d[\d\s().-]{5,20}\d)/;
/** A date written as digits (2026-11-24, 24/11/2026, 24.11.2026) has a phone number's shape but is not one. */
const DATE = /^(?:\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{4})$/;
// Not the tail of a longer token: ".5" is one number (0.5), not 5.
const NUMBER = /(?<![\d.,])-?(?:\d+(?:[.,]\d+)*|\.\d+)/;
// Global twins for scanning every run, shared by every call: matchAll scans a copy, and match with /g restarts
// at 0 and ends at 0, so neither leaves state behind (nothing calls exec or test on them).
const PHONE_RUNS = new RegExp(PHONE.source, 'g');
const NUMBER_RUNS = new RegExp(NUMBER.source, 'g');
/** Customer text is cut to this before a pattern runs on it: owner patterns meet untrusted input. */
const MAX_SCAN_CHARS = 1_000;

const plainWords = (s: string) => normalize(s).replace(/[^\p{L}\p{N}]+/gu, ' ').trim();

export function compileTrigger(phrase: string): CompiledTrigger {
  const plain = plainWords(phrase);
  const words = new Map<string, string[]>();
  for (const w of plain.split(' ')) {
    for (const t of analyze(w)) words.set(t, [...(words.get(t) ?? []), w]);
  }
  return { terms: [...new Set(analyze(phrase))], phrase: plain, words };
}

export interface AnalysedMessage {
  terms: Set<string>;
  plain: string;
  /** The message's words, normalised, before stemming. */
  words: Set<string>;
}

/** The analysed form of a message, computed once and shared by every trigger of every workflow. */
export function analyseMessage(content: string): AnalysedMessage {
  const plain = plainWords(content);
  return { terms: new Set(analyze(content)), plain: ` ${plain} `, words: new Set(plain.split(' ')) };
}

/** Trigger words this long also match a message word one typo away ("scheduel" for "schedule"). */
const FUZZY_MIN_LENGTH = 6;

/**
 * Whether the message has a word one typo away from one of the trigger's words for term `t`. Compared on words as
 * written, not stems: stemming a misspelt word does not cut it where it cuts the word ("delte" → "delt" against
 * "delet").
 */
const typoOf = (message: AnalysedMessage, trigger: CompiledTrigger, t: string) => {
  for (const w of trigger.words.get(t) ?? []) {
    if (w.length < FUZZY_MIN_LENGTH) continue;
    for (const m of message.words) if (oneTypoApart(w, m)) return true;
  }
  return false;
};

export function matchesTrigger(message: AnalysedMessage, trigger: CompiledTrigger): boolean {
  if (trigger.terms.length > 0) return trigger.terms.every((t) => message.terms.has(t) || typoOf(message, trigger, t));
  return trigger.phrase.length > 0 && message.plain.includes(` ${trigger.phrase} `);
}

/**
 * Owner patterns run on untrusted customer text in the process that serves every account, so they run on RE2
 * (re2js: linear time in the input, whatever the pattern), never on the backtracking RegExp engine: a syntax
 * check cannot catch every exponential shape — ((a)+)+$ and (a|a)*$ passed the earlier one and took a minute on
 * 29 characters. RE2 has no back-references or look-arounds; such patterns are refused.
 */
const compiledPatterns = new Map<string, RE2JS | null>();
const MAX_CACHED_PATTERNS = 1_000;

function compilePattern(pattern: string): RE2JS | null {
  let re = compiledPatterns.get(pattern);
  if (re !== undefined) return re;
  try {
    re = RE2JS.compile(pattern, RE2JS.CASE_INSENSITIVE);
  } catch {
    re = null;
  }
  if (compiledPatterns.size >= MAX_CACHED_PATTERNS) compiledPatterns.delete(compiledPatterns.keys().next().value!);
  compiledPatterns.set(pattern, re);
  return re;
}

/** Why a pattern cannot be used, or null when it can. */
export function patternProblem(pattern: string): string | null {
  if (compilePattern(pattern)) return null;
  return /\\[1-9]|\\k<|\(\?<?[=!]/.test(pattern)
    ? 'must not use back-references or look-arounds (patterns run on RE2, in linear time)'
    : 'is not a valid regular expression (RE2 syntax)';
}

function labelOf(key: string): string {
  return key
    .replace(/([a-z0-9])([A-Z])/g, '$1 $2')
    .replace(/_/g, ' ')
    .toLowerCase()
    .trim()
    .split(/\s+/)
    .map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('[\\s_-]*');
}

/** "seats: 12", "company is Acme"; for numbers also "12 seats" (English puts a count before its noun). */
function labelRegexes(field: Field): RegExp[] {
  if (field.type === 'pattern') return [];
  const label = labelOf(field.key);
  const value = SHAPE[field.type];
  const after = new RegExp(`\\b${label}\\b\\s*(?:is\\s+|:|=|#|-)?\\s*(${value})`, 'i');
  return field.type === 'number' ? [after, new RegExp(`(${value})\\s*${label}\\b`, 'i')] : [after];
}

const SHAPE: Record<Exclude<Field['type'], 'pattern'>, string> = {
  email: EMAIL.source,
  phone: PHONE.source,
  number: NUMBER.source,
  // Up to the end of the clause: punctuation or a joining word ("Acme Ltd and we need…" → "Acme Ltd").
  text: "(?:(?!\\s(?:and|but|so|because|which|who|with)\\b)[^,.;!?\\n]){1,80}?(?=\\s*(?:[,.;!?\\n]|\\s(?:and|but|so|because|which|who|with)\\b|$))",
};

/**
 * A number as customers write it: 12, -3, 4.5, 4,5 (decimal comma), .5, 1,234 and 1,234.56 (thousands commas),
 * 1.000.000 and 1.234,56 (thousands dots). Undefined for anything else ("1,2,3"): a `number` field is a JSON
 * number or absent, never a string.
 */
export function parseNumber(raw: string): number | undefined {
  const v = raw.trim();
  let text: string | null = null;
  if (/^-?\d+$/.test(v) || /^-?\d*\.\d+$/.test(v)) text = v;
  else if (/^-?\d{1,3}(?:,\d{3})+(?:\.\d+)?$/.test(v)) text = v.replaceAll(',', '');
  else if (/^-?\d{1,3}(?:\.\d{3})+(?:,\d+)?$/.test(v)) text = v.replaceAll('.', '').replace(',', '.');
  else if (/^-?\d+,\d+$/.test(v)) text = v.replace(',', '.');
  const n = text === null ? NaN : Number(text);
  return Number.isFinite(n) ? n : undefined;
}

function typed(field: Field, raw: string): string | number | undefined {
  return field.type === 'number' ? parseNumber(raw) : raw.trim();
}

/** The fields found in the conversation (absent fields are left out). `customerTexts` are oldest first. */
export function extractFields(fields: readonly Field[], customerTexts: readonly string[], knownEmail: string | null): Record<string, string | number> {
  const texts = [...customerTexts].reverse().map((t) => t.slice(0, MAX_SCAN_CHARS));
  const out: Record<string, string | number> = {};
  for (const field of fields) {
    const value = field.type === 'pattern' ? byPattern(field.pattern ?? '', texts) : (labelled(field, texts) ?? unlabelled(field, texts, knownEmail));
    const v = value === undefined || value === '' ? undefined : typed(field, value);
    if (v !== undefined) out[field.key] = v;
  }
  return out;
}

function labelled(field: Field, texts: string[]): string | undefined {
  const res = labelRegexes(field);
  for (const t of texts) {
    for (const re of res) {
      const m = re.exec(t);
      if (m?.[1]) return m[1];
    }
  }
  return undefined;
}

function unlabelled(field: Field, texts: string[], knownEmail: string | null): string | undefined {
  switch (field.type) {
    case 'email':
      return first(EMAIL, texts) ?? knownEmail ?? undefined;
    case 'phone': {
      // The first run that is a phone number: "items 1 2 3 4, call me on 0612345678" has a shorter run first.
      for (const t of texts) {
        for (const [m] of t.matchAll(PHONE_RUNS)) {
          const digits = m.replace(/\D/g, '').length;
          if (digits >= 7 && digits <= 15 && !DATE.test(m.trim())) return m;
        }
      }
      return undefined;
    }
    case 'number': {
      const all = texts.flatMap((t) => t.match(NUMBER_RUNS) ?? []);
      return all.length === 1 ? all[0] : undefined;
    }
    default:
      return undefined;
  }
}

function byPattern(pattern: string, texts: string[]): string | undefined {
  // A pattern stored before patterns ran on RE2 that RE2 cannot compile extracts nothing.
  const re = compilePattern(pattern);
  if (!re) return undefined;
  for (const t of texts) {
    const m = re.matcher(t);
    if (m.find()) return (m.groupCount() >= 1 ? m.group(1) : null) ?? m.group() ?? undefined;
  }
  return undefined;
}

function first(re: RegExp, texts: string[]): string | undefined {
  for (const t of texts) {
    const m = re.exec(t)?.[0];
    if (m) return m;
  }
  return undefined;
}
