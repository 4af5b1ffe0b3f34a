import { randomUUID } from 'node:crypto';
import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, RundownQuotesTable, RundownsTable } from '../../db/schema.js';
import { resourceError } from '../../db/resource-errors.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import { invalidRequest, notFound } from '../../http/errors.js';
import { toIso, type Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { instantField } from '../../http/time-range.js';
import { silentLogger, type Logger } from '../../lib/log.js';
import { accountsRepository } from '../accounts/accounts.repository.js';
import type { AnalyticsService } from '../analytics/analytics.service.js';
import { isKnowledgeQuestion, normaliseQuestion } from '../assistant/questions.js';
import { EMAILS_IN_TEXT } from '../assistant/text.js';
import { faqsRepository } from '../faqs/faqs.repository.js';
import type { FaqsService } from '../faqs/faqs.service.js';
import type { EventBus } from '../webhooks/events.js';
import { rundownsRepository as repo, type Period } from './rundowns.repository.js';
import { MAX_RUNDOWN_SPAN_DAYS, type CreateRundownBody, type ListRundownsQuery, type RundownFigures, type RundownRecord } from './rundowns.schemas.js';

type Trigger = RundownsTable['trigger'];

const DAY_MS = 86_400_000;
const TOP_TOPICS = 10;
const TOP_UNANSWERED = 10;
/** A question asked once may be a typo or a one-off; twice in one period is worth an FAQ. */
const SUGGEST_AT_COUNT = 2;
const MAX_FAQ_QUESTION = 1_000;
export const SUGGESTED_CATEGORY = 'suggested';
/**
 * One word no customer question uses: the assistant indexes pending FAQs (answer included) as evidence of
 * unpublished topics, so any ordinary word here ("answer", "question") would make it hold back on unrelated
 * questions that use it. The category `suggested` and the docs tell the owner what to do.
 */
export const PLACEHOLDER_ANSWER = 'TBD';

/** Shown instead of a wording once no conversation still present wrote it (the group's count and time stay). */
export const ERASED_WORDING = '(erased)';
/**
 * How many messages behind one group a rundown records (rundown_quotes): the latest of each wording, most frequent
 * wordings first. Enough to find another customer's wording when one is erased, without one question asked
 * thousands of times in a year-long rundown writing thousands of rows.
 */
const RECORD_PER_WORDING = 25;
const RECORD_PER_GROUP = 250;

interface Wording {
  n: number;
  last: number;
}

interface UnansweredGroup {
  key: string;
  question: string;
  count: number;
  lastAskedAt: number;
  /** The messages recorded behind it (rundown_quotes). */
  sources: { messageId: string; conversationId: string }[];
}

/**
 * The text a rundown shows for a customer message: as the customer wrote it, email addresses as `[email]` (a
 * rundown goes to webhooks and its suggestions become FAQs any key with faqs:read can list) and runs of whitespace
 * made single spaces.
 */
export function wordingOf(content: string) {
  return content.replace(EMAILS_IN_TEXT, '[email]').trim().replace(/\s+/g, ' ');
}

/** The customers' most frequent wording; the latest on a tie. */
function byRank(a: [string, Wording], b: [string, Wording]) {
  return b[1].n - a[1].n || b[1].last - a[1].last || (a[0] < b[0] ? -1 : 1);
}

function pickWording(wordings: Map<string, Wording>) {
  return [...wordings.entries()].sort(byRank)[0]![0];
}

/** A suggested FAQ's question: the wording, cut to what an FAQ question may hold. */
const faqQuestionOf = (wording: string) => [...wording].slice(0, MAX_FAQ_QUESTION).join('');

/**
 * Groups the uncited questions by normalised text. Requests for a person, small talk ("thanks", "bye"), a
 * message that only gives an email address and an email address written after the conversation was escalated
 * (the chat captures it as contact details) are not questions the knowledge base could have answered, so they
 * are not counted (`isKnowledgeQuestion`, the rule the conversation's `unanswered` tag uses too).
 */
export function groupUnanswered(rows: readonly { id: string; conversation_id: string; content: string; created_at: number; escalated_at: number | null }[]) {
  type Asked = { id: string; conversationId: string; at: number };
  const groups = new Map<string, { count: number; lastAskedAt: number; wordings: Map<string, Wording & { asked: Asked[] }> }>();
  let total = 0;
  for (const r of rows) {
    if (!isKnowledgeQuestion(r.content, r.created_at, r.escalated_at)) continue;
    // A customer's email address is theirs, not part of the question: a rundown goes to webhooks and its
    // suggestions become FAQs any key with faqs:read can list. "[email]" also groups the same question together.
    const content = r.content.replace(EMAILS_IN_TEXT, '[email]');
    const key = normaliseQuestion(content);
    total++;
    const at = r.created_at;
    const g = groups.get(key) ?? { count: 0, lastAskedAt: at, wordings: new Map() };
    g.count++;
    g.lastAskedAt = Math.max(g.lastAskedAt, at);
    const wording = wordingOf(r.content);
    const w = g.wordings.get(wording) ?? { n: 0, last: at, asked: [] };
    w.n++;
    w.last = Math.max(w.last, at);
    w.asked.push({ id: r.id, conversationId: r.conversation_id, at });
    g.wordings.set(wording, w);
    groups.set(key, g);
  }
  const list = [...groups.entries()].map(([key, g]) => ({ key, question: pickWording(g.wordings), count: g.count, lastAskedAt: g.lastAskedAt, wordings: g.wordings }));
  list.sort((a, b) => b.count - a.count || b.lastAskedAt - a.lastAskedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  const top: UnansweredGroup[] = list.slice(0, TOP_UNANSWERED).map(({ wordings, ...g }) => {
    // Every wording in rank order, its latest messages first: the shown one is always recorded, and the next ones
    // are what an erasure can show instead.
    const sources: UnansweredGroup['sources'] = [];
    for (const [, w] of [...wordings.entries()].sort(byRank)) {
      const latest = [...w.asked].sort((x, y) => y.at - x.at || (x.id < y.id ? -1 : 1)).slice(0, RECORD_PER_WORDING);
      for (const m of latest.slice(0, RECORD_PER_GROUP - sources.length)) sources.push({ messageId: m.id, conversationId: m.conversationId });
      if (sources.length >= RECORD_PER_GROUP) break;
    }
    return { ...g, sources };
  });
  return { total, top };
}

interface RundownBody {
  topTopics: RundownRecord['topTopics'];
  unanswered: RundownRecord['unanswered'];
  suggestedFaqs: RundownRecord['suggestedFaqs'];
}

/** A kept answer's body, if it is a JSON envelope (an answer of another endpoint may be anything). */
function parseKept(text: string | null): { data?: Partial<RundownRecord> } | null {
  if (text === null) return null;
  try {
    const v: unknown = JSON.parse(text);
    return typeof v === 'object' && v !== null ? (v as { data?: Partial<RundownRecord> }) : null;
  } catch {
    return null;
  }
}

export function toRundownRecord(r: Selectable<RundownsTable>): RundownRecord {
  const body = JSON.parse(r.body) as RundownBody;
  return {
    id: r.id,
    from: toIso(r.from_ts),
    to: toIso(r.to_ts),
    trigger: r.trigger,
    createdAt: toIso(r.created_at),
    figures: JSON.parse(r.figures) as RundownFigures,
    topTopics: body.topTopics,
    unanswered: body.unanswered,
    suggestedFaqs: body.suggestedFaqs,
  };
}

/** The last complete window before `now`: windows are multiples of the interval since the Unix epoch. */
export function lastCompleteWindow(now: number, intervalMs: number): Period {
  const to = Math.floor(now / intervalMs) * intervalMs;
  return { from: to - intervalMs, to };
}

/**
 * The windows one scheduler run looks at, oldest first: the `backfill` complete windows before the last one, then the
 * last one (`last`). Oldest first so that an account's rundown.generated events are emitted in the windows' order.
 */
export function windowsToSchedule(now: number, intervalMs: number, backfill: number): (Period & { last: boolean })[] {
  const { from } = lastCompleteWindow(now, intervalMs);
  const out: (Period & { last: boolean })[] = [];
  for (let i = backfill; i >= 0; i--) out.push({ from: from - i * intervalMs, to: from - (i - 1) * intervalMs, last: i === 0 });
  return out;
}

/**
 * How long a worker's claim on a scheduled window holds: far longer than a digest takes to build (each of its statements
 * is bounded by DATABASE_QUERY_TIMEOUT, 30 s by default), so a live worker keeps it; a window whose worker died while
 * building waits this long before another takes it over. A build that outlasts it is still correct (the unique index
 * keeps one of the two), only wasted.
 */
export const RUNDOWN_CLAIM_LEASE_MS = 5 * 60_000;
/**
 * How long after a window ends its scheduled rundowns may still go missing behind a run that found none missing: an
 * account created just before the window ended whose transaction commits after that run. Far longer than such a
 * transaction; at most a quarter of the interval, so a short one still settles.
 */
const SETTLE_MS = 60_000;

function parsePeriod(body: CreateRundownBody): Period {
  const p: Period = { from: instantField('body.from', body.from), to: instantField('body.to', body.to) };
  if (p.from >= p.to) throw invalidRequest('body.from must be earlier than body.to (from is inclusive, to is exclusive)');
  if (p.to - p.from > MAX_RUNDOWN_SPAN_DAYS * DAY_MS) throw invalidRequest(`body.to must be at most ${MAX_RUNDOWN_SPAN_DAYS} days after body.from`);
  return p;
}

export function createRundownsService(deps: {
  db: Kysely<DB>;
  clock: Clock;
  events: EventBus;
  analytics: AnalyticsService;
  faqs: FaqsService;
  intervalMs: number;
  /** RUNDOWN_BACKFILL: how many complete windows before the last one the scheduler also makes missed rundowns of. */
  backfill?: number;
  /** How long a worker's claim on a window holds (RUNDOWN_CLAIM_LEASE_MS). */
  claimLeaseMs?: number;
  log?: Logger;
}) {
  const { db, clock, events, analytics, faqs, intervalMs } = deps;
  const backfill = deps.backfill ?? 0;
  const log = deps.log ?? silentLogger;
  const claimLeaseMs = deps.claimLeaseMs ?? RUNDOWN_CLAIM_LEASE_MS;
  /** What this process did, since start (the metrics endpoint reads it). */
  const counts = {
    /** Digests built (a window's reads), by trigger, including those then thrown away. */
    built: { schedule: 0, manual: 0 },
    /** Scheduled digests built and thrown away because the window's rundown was stored meanwhile. */
    discarded: 0,
    /** The scheduler's claims on windows: taken, or refused because another run held the window. */
    claims: { taken: 0, held: 0 },
    /** Scheduled windows whose build failed ("scheduled rundown failed" in the log); the next run tries them again. */
    failed: 0,
  };
  /**
   * The end of the last complete window for which a run found nothing missing, at least SETTLE_MS after that window
   * ended: until the next window ends, nothing can go missing (below), so the runs in between skip the look.
   */
  let settledThrough: number | null = null;
  const settleMs = Math.min(SETTLE_MS, Math.floor(intervalMs / 4));

  /** Files the candidates (frequent unanswered questions) as pending FAQs, never one the account already has in any status. */
  async function suggest(trx: Transaction<DB>, accountId: string, candidates: UnansweredGroup[]) {
    if (candidates.length === 0) return [];
    const known = new Set((await repo.faqQuestions(trx, accountId)).map((f) => normaliseQuestion(f.question)));
    const out: RundownRecord['suggestedFaqs'] = [];
    for (const g of candidates) {
      if (known.has(g.key)) continue;
      known.add(g.key);
      const faq = await faqs.create(
        accountId,
        {
          question: faqQuestionOf(g.question),
          answer: PLACEHOLDER_ANSWER,
          category: SUGGESTED_CATEGORY,
          status: 'pending',
        },
        trx,
      );
      out.push({ id: faq.id, question: faq.question });
    }
    return out;
  }

  /**
   * Builds and stores the digest of [from, to), files its suggestions and emits rundown.generated, all in one
   * transaction. Answers null when a scheduled rundown of that window already existed (another worker made it). A
   * scheduled one drops the window's claim in the same transaction, so the claim goes exactly when the rundown is there.
   */
  async function generate(accountId: string, p: Period, trigger: Trigger): Promise<RundownRecord | null> {
    return writeTransaction(db, async (trx) => {
      // The claim was taken after the scheduler's look for missing rundowns: another worker may have stored this one in
      // between (and dropped its claim). A fresh read here (each statement's own snapshot on PostgreSQL; SQLite's write
      // lock is held from BEGIN) sees it, before any of the window's reads.
      if (trigger === 'schedule' && (await repo.scheduledExists(trx, accountId, p))) {
        await repo.dropClaim(trx, accountId, p);
        return null;
      }
      counts.built[trigger]++;
      const [f, topTopics, uncited] = await Promise.all([
        analytics.figures(accountId, p, trx),
        analytics.topicsIn(accountId, p, TOP_TOPICS, trx),
        repo.uncitedQuestions(trx, accountId, p),
      ]);
      let asked = uncited;
      let grouped = groupUnanswered(asked);
      // The conversations quoted are held until this commits, so an erasure of one of them waits and then finds the
      // quote rows. One erased between the read and the hold is gone: its questions are left out and the rest
      // grouped again. Held before the account row is locked below: the erasure's notice (an event insert) takes a
      // key-share lock on the account, and waiting for the conversation while holding the account could deadlock.
      for (;;) {
        const quoted = new Set(grouped.top.flatMap((g) => g.sources.map((s) => s.conversationId)));
        const present = await repo.holdConversations(trx, accountId, [...quoted]);
        if (present.size === quoted.size) break;
        asked = asked.filter((r) => !quoted.has(r.conversation_id) || present.has(r.conversation_id));
        grouped = groupUnanswered(asked);
      }
      const { total, top } = grouped;
      const figures: RundownFigures = {
        conversations: f.conversations,
        messages: f.messages,
        resolved: f.resolved,
        escalated: f.escalated,
        unresolved: f.unresolved,
        resolutionRate: f.resolutionRate,
        escalationRate: f.escalationRate,
        averageMessages: f.averageMessages,
        unansweredQuestions: total,
      };
      const body: RundownBody = {
        topTopics,
        unanswered: top.map((g) => ({ question: g.question, count: g.count, lastAskedAt: toIso(g.lastAskedAt) })),
        suggestedFaqs: [],
      };
      const now = clock.now();
      const row: RundownsTable = {
        id: newId('rd', now),
        account_id: accountId,
        trigger,
        from_ts: p.from,
        to_ts: p.to,
        figures: JSON.stringify(figures),
        body: JSON.stringify(body),
        created_at: now,
      };
      // Two rundowns of one account at once (a manual one during the scheduled one, two manual ones) would both see
      // a question as new and file it twice: with something to suggest, they take turns on the account row. Locked
      // before the rundown row is inserted: that insert takes a key-share lock on the account (its foreign key), and
      // two transactions each holding one and then asking for the update lock deadlocked (a 500 on PostgreSQL).
      const candidates = top.filter((g) => g.count >= SUGGEST_AT_COUNT);
      if (candidates.length > 0) await accountsRepository.lockAccount(trx, accountId);
      // Stored first: the loser of a race for a scheduled window (a claim that expired while its holder was still
      // building, or a worker of a version without claims) stops here, before filing any suggestion.
      if (!(await repo.insert(trx, row))) {
        counts.discarded++;
        await repo.dropClaim(trx, accountId, p);
        return null;
      }
      if (trigger === 'schedule') await repo.dropClaim(trx, accountId, p);
      const quotes: RundownQuotesTable[] = top.flatMap((g, position) =>
        g.sources.map((s) => ({ account_id: accountId, rundown_id: row.id, position, message_id: s.messageId, conversation_id: s.conversationId })),
      );
      await repo.insertQuotes(trx, quotes);
      body.suggestedFaqs = await suggest(trx, accountId, candidates);
      if (body.suggestedFaqs.length > 0) {
        row.body = JSON.stringify(body);
        await repo.setBody(trx, accountId, row.id, row.body);
      }
      await events.emit(trx, accountId, 'rundown.generated', {
        rundownId: row.id,
        from: toIso(p.from),
        to: toIso(p.to),
        trigger,
        conversations: figures.conversations,
        resolutionRate: figures.resolutionRate,
        escalationRate: figures.escalationRate,
        unansweredQuestions: figures.unansweredQuestions,
        suggestedFaqs: body.suggestedFaqs.length,
      });
      return toRundownRecord(row);
    });
  }

  /**
   * A suggested FAQ filed from a wording that is being erased: reworded to the replacement, or deleted when there is
   * none, but only while it is still exactly as the rundown filed it (pending, category `suggested`, answer TBD, the
   * filed question). Once the owner changed any of that it is the owner's own text, and left alone.
   */
  async function withdrawSuggestion(trx: Transaction<DB>, accountId: string, entry: RundownRecord['suggestedFaqs'][number], replacement: string | null) {
    const faq = await faqsRepository.find(trx, accountId, entry.id, true);
    if (!faq || faq.status !== 'pending' || faq.category !== SUGGESTED_CATEGORY || faq.answer !== PLACEHOLDER_ANSWER || faq.question !== entry.question) return;
    if (replacement === null) await faqs.delete(accountId, faq.id, trx);
    else await faqs.update(accountId, faq.id, { question: replacement }, trx);
  }

  /**
   * Rewords the rundowns that quote a conversation about to be erased, in the erasure's transaction (before its
   * messages go). A group whose shown wording no longer has a message of a conversation still present behind it
   * shows the most frequent wording that does (the latest on a tie), else ERASED_WORDING; its count and time stay
   * (aggregates), as do the rundown's figures. Rundowns made before quotes were recorded have no rows: a group there
   * is reworded to ERASED_WORDING when this conversation wrote exactly its wording in the rundown's period. A top
   * topic is the main keyword of some conversation's customer messages: the conversation's topic, in a rundown of the
   * period it was created in, becomes ERASED_WORDING once no other conversation of that period has it.
   * Answers how many rundowns changed.
   */
  async function forgetConversation(trx: Transaction<DB>, accountId: string, conversation: { id: string; createdAt: number; topic: string | null }) {
    const conversationId = conversation.id;
    const { topic } = conversation;
    const createdAt = Number(conversation.createdAt);
    const quoted = await repo.quotesOf(trx, accountId, conversationId);
    const positions = new Map<string, Set<number>>();
    for (const q of quoted) positions.set(q.rundown_id, (positions.get(q.rundown_id) ?? new Set()).add(Number(q.position)));

    // What the customer wrote, as a rundown shows it, and as rundowns made before email addresses were masked did.
    const asked = (await repo.customerMessagesOf(trx, accountId, conversationId)).map((m) => ({
      at: Number(m.created_at),
      wordings: new Set([wordingOf(m.content), m.content.trim().replace(/\s+/g, ' ')]),
    }));
    const wroteIn = (from: number, to: number, wording: string) => asked.some((m) => m.at >= from && m.at < to && m.wordings.has(wording));
    const topicIn = (from: number, to: number, topics: RundownBody['topTopics']) =>
      topic !== null && createdAt >= from && createdAt < to && topics.some((x) => x.name === topic);
    // Rundowns to look at beyond those with quote rows: any whose top topics name the conversation's topic, and
    // those made before quotes were recorded whose wording it wrote.
    const matched = new Set<string>();
    const times = [createdAt, ...asked.map((m) => m.at)];
    for (const r of await repo.overlapping(trx, accountId, Math.min(...times), Math.max(...times))) {
      const body = JSON.parse(r.body) as RundownBody;
      const [from, to] = [Number(r.from_ts), Number(r.to_ts)];
      if (topicIn(from, to, body.topTopics) || (!r.recorded && body.unanswered.some((u) => wroteIn(from, to, u.question)))) matched.add(r.id);
    }

    let changed = 0;
    // In id order: two erasures rewording the same rundowns lock them in the same order.
    for (const id of [...new Set([...positions.keys(), ...matched])].sort()) {
      // Read again under the row's lock: another erasure may have reworded it since.
      const row = await repo.find(trx, accountId, id, true);
      if (!row) continue;
      const body = JSON.parse(row.body) as RundownBody;
      const period = { from: Number(row.from_ts), to: Number(row.to_ts) };
      let topicErased = false;
      if (topicIn(period.from, period.to, body.topTopics) && !(await repo.topicInUse(trx, accountId, topic!, period, conversationId))) {
        for (const x of body.topTopics) if (x.name === topic) x.name = ERASED_WORDING;
        topicErased = true;
      }
      const replace = new Map<number, string | null>();
      const mine = positions.get(id);
      if (mine) {
        for (const position of mine) {
          const group = body.unanswered[position];
          if (!group) continue;
          const left = new Map<string, Wording>();
          for (const m of await repo.groupSources(trx, accountId, id, position, conversationId)) {
            const wording = wordingOf(m.content);
            const w = left.get(wording) ?? { n: 0, last: Number(m.created_at) };
            w.n++;
            w.last = Math.max(w.last, Number(m.created_at));
            left.set(wording, w);
          }
          // Another customer still present wrote the very wording shown: it stays.
          if (left.has(group.question)) continue;
          replace.set(position, left.size > 0 ? pickWording(left) : null);
        }
      } else if (!(await repo.hasQuotes(trx, accountId, id))) {
        body.unanswered.forEach((u, position) => {
          if (wroteIn(period.from, period.to, u.question)) replace.set(position, null);
        });
      }
      if (replace.size === 0 && !topicErased) continue;
      for (const [position, wording] of replace) {
        const group = body.unanswered[position]!;
        const filed = faqQuestionOf(group.question);
        group.question = wording ?? ERASED_WORDING;
        for (const entry of body.suggestedFaqs) {
          if (entry.question !== filed) continue;
          await withdrawSuggestion(trx, accountId, entry, wording === null ? null : faqQuestionOf(wording));
          entry.question = wording === null ? ERASED_WORDING : faqQuestionOf(wording);
        }
      }
      await repo.setBody(trx, accountId, id, JSON.stringify(body));
      // A POST /v1/rundowns answer kept for its Idempotency-Key repeats the rundown: it is replayed as reworded.
      for (const kept of await repo.keptAnswersNaming(trx, accountId, id)) {
        const answer = parseKept(kept.response);
        if (answer?.data?.id !== id) continue;
        answer.data.topTopics = body.topTopics;
        answer.data.unanswered = body.unanswered;
        answer.data.suggestedFaqs = body.suggestedFaqs;
        await repo.setKeptAnswer(trx, accountId, kept.key, JSON.stringify(answer));
      }
      changed++;
    }
    await repo.deleteQuotesOf(trx, accountId, conversationId);
    return changed;
  }

  return {
    forgetConversation,

    async list(accountId: string, q: ListRundownsQuery) {
      const f = { trigger: q.trigger ?? 'all', limit: q.limit, offset: q.offset };
      const { rows, total } = await repo.list(db, accountId, f);
      return { rundowns: rows.map(toRundownRecord), total, limit: f.limit, offset: f.offset };
    },

    async get(accountId: string, id: string) {
      const row = await repo.find(db, accountId, id);
      if (!row) throw notFound('rundown', id);
      return toRundownRecord(row);
    },

    async create(accountId: string, body: CreateRundownBody) {
      // A manual rundown never conflicts (the unique index covers scheduled ones only).
      return (await generate(accountId, parsePeriod(body), 'manual'))!;
    },

    /**
     * The scheduled rundowns of the last complete window and of the `backfill` windows before it that are missing,
     * oldest window first, for every account that existed before the window ended (repository.missingScheduled says
     * which). Answers how many this call generated.
     *
     * Each window is claimed before its digest is built (rundown_claims, a short statement of its own), so of several
     * workers catching up at once one builds it and the others pass it by; before, each built it and all but one threw
     * it away at the unique index. A window another run holds makes this run pass that account's later windows by too:
     * the holder makes them, in order, so the account's rundown.generated events stay oldest first (a window it has
     * not reached yet is made by the next run). A claim expires after `claimLeaseMs`: one left by a worker that died
     * is taken over by the next run after that, the window being still missing.
     *
     * Nothing can go missing between two windows' ends once a run has found nothing missing: rundowns are never
     * deleted but with their account, and an account created now is created after every complete window ended. So
     * from that run until the next window ends, runs skip the look (one statement, but one index probe per account
     * and window: about 80 ms per run on PostgreSQL with 3,000 accounts, BENCHMARKS.md).
     */
    async generateDue(signal?: AbortSignal) {
      const now = clock.now();
      const windows = windowsToSchedule(now, intervalMs, backfill);
      const lastEnd = windows[windows.length - 1]!.to;
      if (settledThrough === lastEnd) return 0;
      const due = await repo.missingScheduled(db, windows);
      if (due.length === 0) {
        if (now >= lastEnd + settleMs) settledThrough = lastEnd;
        return 0;
      }
      await writeTransaction(db, (trx) => repo.pruneClaims(trx, now));
      const passed = new Set<string>();
      let made = 0;
      for (const d of due) {
        if (signal?.aborted) break;
        if (passed.has(d.account_id)) continue;
        const window = { from: d.from_ts, to: d.to_ts };
        const holder = randomUUID();
        let claimed = false;
        try {
          const at = clock.now();
          claimed = await writeTransaction(db, (trx) => repo.claimWindow(trx, d.account_id, window, holder, at, at + claimLeaseMs));
          if (!claimed) {
            counts.claims.held++;
            passed.add(d.account_id);
            continue;
          }
          counts.claims.taken++;
          if (await generate(d.account_id, window, 'schedule')) made++;
        } catch (err) {
          // A database that is full (or out of another resource) refuses every account alike: the run stops and the
          // worker backs off (one log line, not one per account and window at every run).
          if (resourceError(err)) throw err;
          // One failure must not starve the other accounts, nor this account's later windows; the next run tries it
          // again (it is still missing, and no later window of the same interval starts before it ends).
          counts.failed++;
          log.error({ err, accountId: d.account_id, from: toIso(window.from), to: toIso(window.to) }, 'scheduled rundown failed');
          if (claimed) await writeTransaction(db, (trx) => repo.dropClaim(trx, d.account_id, window, holder)).catch(() => undefined);
        }
      }
      return made;
    },

    counts: counts as { readonly built: Readonly<Record<Trigger, number>>; readonly discarded: number; readonly claims: Readonly<typeof counts.claims>; readonly failed: number },
  };
}

export type RundownsService = ReturnType<typeof createRundownsService>;
