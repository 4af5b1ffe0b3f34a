import type { Kysely, Selectable, Transaction } from 'kysely';
import type { DB, RundownsTable } from '../../db/schema.js';
import { writeTransaction } from '../../db/unit-of-work.js';
import { invalidRequest, notFound } from '../../http/errors.js';
import { toIso, type Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { parseIsoInstant } from '../../lib/iso-time.js';
import { silentLogger, type Logger } from '../../lib/log.js';
import { accountsRepository } from '../accounts/accounts.repository.js';
import type { AnalyticsService } from '../analytics/analytics.service.js';
import { isKnowledgeQuestion, normaliseQuestion } from '../assistant/questions.js';
import { EMAILS_IN_TEXT } from '../assistant/text.js';
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

interface UnansweredGroup {
  key: string;
  question: string;
  count: number;
  lastAskedAt: number;
}

/**
 * Groups the uncited questions by normalised text. Requests for a person, small talk ("thanks", "bye"), a
 * message that only gives an email address and an email address written after the conversation was escalated
 * (the chat captures it as contact details) are not questions the knowledge base could have answered, so they
 * are not counted (`isKnowledgeQuestion`, the rule the conversation's `unanswered` tag uses too).
 */
export function groupUnanswered(rows: readonly { content: string; created_at: number; escalated_at: number | null }[]) {
  const groups = new Map<string, { count: number; lastAskedAt: number; wordings: Map<string, { n: number; last: number }> }>();
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
    // Shown and filed as the customer wrote it, only with runs of whitespace made single spaces.
    const wording = content.trim().replace(/\s+/g, ' ');
    const w = g.wordings.get(wording) ?? { n: 0, last: at };
    w.n++;
    w.last = Math.max(w.last, at);
    g.wordings.set(wording, w);
    groups.set(key, g);
  }
  const list: UnansweredGroup[] = [...groups.entries()].map(([key, g]) => ({
    key,
    // The customers' most frequent wording; the latest on a tie.
    question: [...g.wordings.entries()].sort((a, b) => b[1].n - a[1].n || b[1].last - a[1].last || (a[0] < b[0] ? -1 : 1))[0]![0],
    count: g.count,
    lastAskedAt: g.lastAskedAt,
  }));
  list.sort((a, b) => b.count - a.count || b.lastAskedAt - a.lastAskedAt || (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  return { total, top: list.slice(0, TOP_UNANSWERED) };
}

interface RundownBody {
  topTopics: RundownRecord['topTopics'];
  unanswered: RundownRecord['unanswered'];
  suggestedFaqs: RundownRecord['suggestedFaqs'];
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

function parsePeriod(body: CreateRundownBody): Period {
  const out: Partial<Period> = {};
  for (const field of ['from', 'to'] as const) {
    const ms = parseIsoInstant(body[field]);
    if (ms === null) throw invalidRequest(`body.${field} must be an ISO 8601 date or date-time such as 2026-01-01 or 2026-01-01T09:30:00Z`);
    out[field] = ms;
  }
  const p = out as Period;
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
  log?: Logger;
}) {
  const { db, clock, events, analytics, faqs, intervalMs } = deps;
  const log = deps.log ?? silentLogger;

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
          question: [...g.question].slice(0, MAX_FAQ_QUESTION).join(''),
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
   * transaction. Answers null when a scheduled rundown of that window already existed (another worker won).
   */
  async function generate(accountId: string, p: Period, trigger: Trigger): Promise<RundownRecord | null> {
    return writeTransaction(db, async (trx) => {
      const [f, topTopics, uncited] = await Promise.all([
        analytics.figures(accountId, p, trx),
        analytics.topicsIn(accountId, p, TOP_TOPICS, trx),
        repo.uncitedQuestions(trx, accountId, p),
      ]);
      const { total, top } = groupUnanswered(uncited);
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
      // Claim first: the loser of a race for a scheduled window stops here, before filing any suggestion.
      if (!(await repo.insert(trx, row))) return null;
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

  return {
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
     * The scheduled rundowns of the last complete window, for every account that existed before it ended and
     * has none yet; older missed windows are not back-filled. Answers how many this call generated.
     */
    async generateDue(signal?: AbortSignal) {
      const window = lastCompleteWindow(clock.now(), intervalMs);
      const due = await repo.accountsMissingWindow(db, window);
      let made = 0;
      for (const { id } of due) {
        if (signal?.aborted) break;
        try {
          if (await generate(id, window, 'schedule')) made++;
        } catch (err) {
          // One account's failure must not starve the others; the next run tries it again.
          log.error({ err, accountId: id }, 'scheduled rundown failed');
        }
      }
      return made;
    },
  };
}

export type RundownsService = ReturnType<typeof createRundownsService>;
