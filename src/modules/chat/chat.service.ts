import type { Kysely, Selectable, Transaction } from 'kysely';
import type { ConversationsTable, DB, MessagesTable } from '../../db/schema.js';
import { writeTransaction, writesAlone } from '../../db/unit-of-work.js';
import { ApiError, invalidRequest, notFound, rejectBlank } from '../../http/errors.js';
import { toIso, type Clock } from '../../lib/clock.js';
import { newId } from '../../lib/ids.js';
import { offersPerson, UNANSWERED_ESCALATION_TEXT, UNKNOWN_TEXT, type AssistantAnswer } from '../assistant/answerer.js';
import { settingsFrom, type AssistantService } from '../assistant/assistant.service.js';
import type { AssistantSettings } from '../assistant/assistant.schemas.js';
import { asksSomething, detectHandoff, handoffRemainder, isAffirmative, isNegative, smallTalkKind } from '../assistant/intent.js';
import { isKnowledgeQuestion, onlyGivesEmail } from '../assistant/questions.js';
import { EMAIL_IN_TEXT, EMAILS_IN_TEXT, STOPWORDS, stripMarkup, words } from '../assistant/text.js';
import { toConversationRecord as toConversation, toMessage } from '../conversations/conversations.service.js';
import type { EventBus } from '../webhooks/events.js';
import type { WorkflowsService } from '../workflows/workflows.service.js';
import { chatRepository as repo, type ExchangeExpectation, type ExchangeFigures } from './chat.repository.js';
import { MAX_METADATA_BYTES, type ContactBody, type EscalateBody, type StartConversationBody } from './chat.schemas.js';

type Conn = Kysely<DB> | Transaction<DB>;
type ConversationRow = Selectable<ConversationsTable>;

/** Two unanswered questions in a row hand the conversation to a person (reason no_answer). */
const UNANSWERED_BEFORE_ESCALATION = 2;
const HISTORY_TURNS = 6;

/** The label of a conversation started with neither a label, an email address nor a customer id. */
const visitorLabel = (conversationId: string) => `Visitor ${conversationId.slice(-6)}`;
const EMAIL_ONLY = /^[^\s@]+@[^\s@]+$/;
const DECLINED_TEXT = 'No problem. Is there anything else I can help with?';

/**
 * A document's label: its title in lower case, runs of anything but letters, digits and marks made single
 * hyphens, in any script ("Доставка в Нарнию" → "доставка-в-нарнию"; Latin accents dropped: "Café" → "cafe"),
 * at most 60 characters. A title with no letter or digit at all ("🚚 → 📦") is labelled by the document id, so a
 * tag or topic is never "".
 */
export function documentLabel(title: string, id: string) {
  const s = title
    .normalize('NFKD')
    .replace(/(\p{Script=Latin})\p{M}+/gu, '$1')
    .normalize('NFC')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\p{M}]+/gu, '-')
    .replace(/^-+|-+$/g, '');
  const label = Array.from(s).slice(0, 60).join('').replace(/-+$/, '');
  return /[\p{L}\p{N}]/u.test(label) ? label : id;
}

/**
 * A customer message as topic keywords see it: markup taken out (the whole of a script or style element, the
 * other tags and comments, character references), and email addresses and URLs too, so `<script>` or
 * `jo@acme.test` never becomes a topic. Messages are at most 4,000 characters, which bounds the scans.
 */
export function topicText(text: string) {
  return stripMarkup(text)
    .replace(EMAILS_IN_TEXT, ' ')
    .replace(/\b(?:https?:\/\/|www\.)\S*/gi, ' ');
}

/** The account's assistant settings as a conversation's persona speaks them: its own name when it has one. */
const speakingAs = (settings: AssistantSettings, persona: string | null): AssistantSettings => ({ ...settings, name: persona ?? settings.name });

function countOf(items: string[]) {
  const counts = new Map<string, number>();
  for (const x of items) counts.set(x, (counts.get(x) ?? 0) + 1);
  return counts;
}

/** The most frequent key, ties broken alphabetically so the choice is stable; null when empty. */
const mostFrequent = (counts: Map<string, number>) => [...counts.entries()].sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]))[0]?.[0] ?? null;

export const REPLY_KINDS: readonly AssistantAnswer['kind'][] = ['answer', 'no_answer', 'handoff', 'smalltalk'];
/**
 * Who wrote a reply: the configured LLM; the built-in answerer (no LLM, or it was not asked or failed) and the
 * built-in rules (a request for a person, a declined offer); or an owner's workflow.
 */
export const REPLY_AUTHORS = ['llm', 'builtin', 'workflow'] as const;
export type ReplyAuthor = (typeof REPLY_AUTHORS)[number];

export function createChatService(deps: { db: Kysely<DB>; clock: Clock; events: EventBus; assistant: AssistantService; workflows: WorkflowsService }) {
  const { db, clock, events, assistant, workflows } = deps;
  /** Replies sent (their exchange committed) since start, by kind and author (the metrics endpoint reads them). */
  const replies = Object.fromEntries(REPLY_KINDS.map((k) => [k, Object.fromEntries(REPLY_AUTHORS.map((a) => [a, 0]))])) as Record<
    AssistantAnswer['kind'],
    Record<ReplyAuthor, number>
  >;

  async function load(conn: Conn, accountId: string, id: string) {
    const c = await repo.find(conn, accountId, id);
    if (!c) throw notFound('conversation', id);
    return c;
  }

  async function snapshot(conn: Conn, accountId: string, id: string) {
    const [c, messages] = await Promise.all([load(conn, accountId, id), repo.messages(conn, accountId, id)]);
    return toConversation(c, messages);
  }

  function assistantMessage(accountId: string, conversationId: string, content: string, sources: string[], at: number, seq: number, workflowId: string | null = null): MessagesTable {
    return { id: newId('msg', at), account_id: accountId, conversation_id: conversationId, role: 'assistant', content, sources: JSON.stringify(sources), workflow_id: workflowId, created_at: at, seq };
  }

  /** The conversation.message events of messages of `c`. */
  const messageEvents = (c: ConversationRow, rows: MessagesTable[]) =>
    rows.map((m) => ({
      kind: 'conversation.message' as const,
      data: {
        conversationId: c.id,
        messageId: m.id,
        role: m.role,
        content: m.content,
        customerId: c.customer_id,
        ...(m.role === 'assistant' ? { sources: m.sources ? JSON.parse(m.sources) : [] } : {}),
        timestamp: toIso(m.created_at),
        // Deliveries can arrive out of order, and one exchange's messages share a timestamp: its place in the
        // conversation lets a receiver rebuild the transcript.
        position: m.seq,
      },
    }));

  /** Inserts the messages and emits their events (one statement on PostgreSQL). */
  async function insertMessages(trx: Conn, c: ConversationRow, rows: MessagesTable[]) {
    await events.emitMany(trx, c.account_id, messageEvents(c, rows), (db) => repo.insertMessages(db, rows));
  }

  /**
   * Counts an exchange on `c`, inserts its messages and emits their events (with their deliveries) as one statement
   * outside any transaction (events.emitAlone). False, with nothing written, when the row is no longer `asRead` or
   * the account has more enabled webhooks than the `webhooks` read with it.
   */
  async function recordExchangeAlone(c: ConversationRow, webhooks: number, figures: ExchangeFigures, asRead: ExchangeExpectation, rows: MessagesTable[]) {
    const emitted = await events.emitAlone(db, c.account_id, messageEvents(c, rows), webhooks, repo.exchangeAlone(c.account_id, c.id, figures, asRead, rows));
    return emitted !== undefined;
  }

  /**
   * Writes the escalation and its event; the caller holds the transaction. One escalation per conversation: the
   * UPDATE requires it not escalated yet, so of concurrent escalations only the one that changed the row emits.
   * Answers whether this call escalated it.
   */
  async function escalateIn(trx: Conn, c: ConversationRow, reason: string, at: number): Promise<boolean> {
    const ok = await repo.markEscalated(trx, c.account_id, c.id, reason, at);
    if (!ok) {
      // Read after the UPDATE: on PostgreSQL this sees the transaction that got there first. One that erased the
      // conversation (DELETE /v1/conversations/:id) leaves none: a 404, as for a message or an end held up by it.
      const now = await repo.find(trx, c.account_id, c.id);
      if (!now) throw notFound('conversation', c.id);
      if (now.ended_at !== null) throw invalidRequest(`conversation ${c.id} has ended`);
      return false;
    }
    const transcript = await repo.messages(trx, c.account_id, c.id);
    const lastCustomer = [...transcript].reverse().find((m) => m.role === 'customer');
    await events.emit(trx, c.account_id, 'escalation', {
      conversationId: c.id,
      customerId: c.customer_id,
      customerLabel: c.customer_label,
      customerEmail: c.customer_email ?? '',
      reason,
      lastMessage: lastCustomer?.content ?? '',
      transcript: transcript.map((m) => ({ role: m.role, content: m.content, timestamp: toIso(m.created_at) })),
    });
    return true;
  }

  async function submitContact(trx: Conn, c: ConversationRow, contact: ContactBody) {
    // The name the customer leaves names the conversation only in place of a label Parley made up (the visitor
    // placeholder, the customer id or an email address): a label the integration chose stays, since anyone with
    // the page's public key can call this endpoint.
    const madeUp = c.customer_label === visitorLabel(c.id) || c.customer_label === c.customer_id || EMAIL_ONLY.test(c.customer_label);
    const label = contact.name !== undefined && madeUp ? contact.name : c.customer_label;
    await repo.update(trx, c.account_id, c.id, { customer_email: contact.email, customer_label: label });
    await events.emit(trx, c.account_id, 'escalation.submitted', {
      conversationId: c.id,
      customerId: c.customer_id,
      customerLabel: label,
      customerEmail: contact.email,
      name: contact.name ?? null,
      phone: contact.phone ?? null,
      message: contact.message ?? null,
      escalated: c.escalated_at !== null,
    });
  }

  /**
   * Tags and topic from what the assistant cited; the customer's main keyword when it cited nothing. Only
   * questions (`isKnowledgeQuestion`: not a request for a person, small talk or contact details) give keywords,
   * and `unanswered` means what the rundowns count: a question whose reply cited nothing and was not a workflow's.
   */
  async function classify(conn: Kysely<DB>, c: ConversationRow, messages: MessagesTable[]) {
    const citations = messages.flatMap((m) => (m.role === 'assistant' && m.sources ? (JSON.parse(m.sources) as string[]) : []));
    const { faqs, docs } = await assistant.labelsOf(conn, c.account_id, [...new Set(citations)]);
    const labelOf = new Map<string, string>([...faqs.map((f) => [f.id, f.category] as const), ...docs.map((d) => [d.id, documentLabel(d.title, d.id)] as const)]);
    const cited = countOf(citations.flatMap((id) => labelOf.get(id) ?? []));
    // Messages come in conversation order (seq): a customer message's reply is the message after it.
    const replies: (MessagesTable | undefined)[] = [];
    const topical: string[] = [];
    messages.forEach((m, i) => {
      if (m.role !== 'customer') return;
      // A request for a person can say what it is about ("a human about my refund"): that part counts too.
      if (detectHandoff(m.content)) topical.push(handoffRemainder(topicText(m.content)));
      else if (isKnowledgeQuestion(m.content, m.created_at, c.escalated_at)) {
        topical.push(topicText(m.content));
        replies.push(messages[i + 1]);
      }
    });
    const keywords = countOf(topical.flatMap((text) => words(text).filter((w) => w.length > 2 && !STOPWORDS.has(w) && !/^\d+$/.test(w))));
    const topic = mostFrequent(cited) ?? mostFrequent(keywords);
    const tags = [...cited.keys()].sort();
    if (c.escalated_at !== null) tags.push('escalated');
    const uncited = (r: MessagesTable | undefined) => r?.role === 'assistant' && (r.sources === null || r.sources === '[]') && r.workflow_id === null;
    if (replies.some(uncited)) tags.push('unanswered');
    return { topic, tags };
  }

  /**
   * Ends a conversation; with `idleBefore` (the idle sweeper), only if no message came in since that time. The
   * outcome, tags, topic and the event's messageCount are decided from the conversation row locked in this
   * transaction (FOR UPDATE on PostgreSQL: a message in flight commits first, and its exchange is counted) and
   * from the messages read after the lock, never from a row read before a concurrent send committed.
   */
  async function end(accountId: string, id: string, idleBefore?: number) {
    return writeTransaction(db, async (trx) => {
      const c = await repo.findLocked(trx, accountId, id);
      if (!c) throw notFound('conversation', id);
      if (c.ended_at !== null || (idleBefore !== undefined && c.last_message_at >= idleBefore)) return snapshot(trx, accountId, id);
      const at = Math.max(clock.now(), c.last_message_at);
      const messages = await repo.messages(trx, accountId, id);
      const outcome = c.escalated_at !== null ? 'escalated' : c.answered_count > 0 ? 'resolved' : 'unresolved';
      const { topic, tags } = await classify(trx, c, messages);
      const ok = await repo.updateOpen(trx, accountId, id, {
        status: outcome === 'escalated' ? 'escalated' : 'ended',
        outcome,
        ended_at: at,
        tags: JSON.stringify(tags),
        topic,
      }, { idleBefore });
      if (ok) {
        await events.emit(trx, accountId, 'conversation.ended', {
          conversationId: id,
          customerId: c.customer_id,
          status: outcome,
          messageCount: c.message_count,
          // Ended for idleness: the conversation lasted until its last message. Counting the idle wait would add
          // CONVERSATION_IDLE_TIMEOUT to every conversation a customer simply left. `endedAt` stays the time it
          // was ended, so a period's figures do not change after the period.
          duration: Math.round(((idleBefore !== undefined ? c.last_message_at : at) - c.created_at) / 1000),
          tags,
        });
      }
      return snapshot(trx, accountId, id);
    });
  }

  return {
    async start(accountId: string, body: StartConversationBody) {
      for (const f of ['customerId', 'customerLabel', 'persona'] as const) rejectBlank(`body.${f}`, body[f]);
      const metadata = body.metadata ?? {};
      if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) throw invalidRequest('body.metadata must be at most 16 KiB of JSON');
      const read = await repo.forStart(db, accountId);
      const settings = settingsFrom(read.settings);
      const at = clock.now();
      const id = newId('conv', at);
      const customerId = body.customerId ?? `anon_${id.slice(5)}`;
      const row: ConversationRow = {
        id,
        account_id: accountId,
        customer_id: customerId,
        customer_label: body.customerLabel ?? body.customerEmail ?? (body.customerId ? body.customerId : visitorLabel(id)),
        customer_email: body.customerEmail ?? null,
        persona: body.persona ?? settings.name,
        metadata: JSON.stringify(metadata),
        status: 'active',
        outcome: null,
        escalation_reason: null,
        tags: '[]',
        topic: null,
        created_at: at,
        last_message_at: at,
        message_count: 1,
        answered_count: 0,
        unanswered_streak: 0,
        escalated_at: null,
        ended_at: null,
      };
      // The persona named at start speaks for this conversation (the account's greeting and tone, its name).
      const greeting = assistantMessage(accountId, id, assistant.greetingText(speakingAs(settings, row.persona)), [], at, 1);
      const started = {
        kind: 'conversation.started' as const,
        data: { conversationId: id, customerId, customerLabel: row.customer_label, persona: row.persona, metadata },
      };
      const answer = { conversation: toConversation(row, [greeting]), messages: [toMessage(greeting)] };
      // On PostgreSQL the conversation, its greeting, both events and their deliveries are one statement: no
      // transaction round trips. Not written if a webhook was enabled since the read (its deliveries would lack ids):
      // the transaction below then writes it all, delivering to every webhook enabled by then.
      if (writesAlone(db)) {
        const emitted = await events.emitAlone(db, accountId, [started, ...messageEvents(row, [greeting])], read.enabledWebhooks, repo.startAlone(row, [greeting]));
        if (emitted) return answer;
      }
      return writeTransaction(db, async (trx) => {
        await repo.insertConversation(trx, row);
        await events.emit(trx, accountId, started.kind, started.data);
        await insertMessages(trx, row, [greeting]);
        return answer;
      });
    },

    get: (accountId: string, id: string) => snapshot(db, accountId, id),

    async send(accountId: string, id: string, content: string) {
      rejectBlank('body.content', content);
      const ended = () => invalidRequest(`conversation ${id} has ended; start a new conversation`);
      // Only the end of the transcript: the reply reads the last turns, not the whole conversation.
      const c = await repo.findForReply(db, accountId, id, HISTORY_TURNS);
      if (!c) throw notFound('conversation', id);
      if (c.ended_at !== null) throw ended();
      const transcript = c.recent;
      const triggered = workflows.matchingAmong(c.workflows, content);
      const settings = settingsFrom(c.assistant_settings);
      const history = transcript.map((m) => ({ role: m.role, content: m.content }));

      // The reply does not depend on the conversation's state; what does (escalating, asking for an email) is
      // decided inside the transaction, from the conversation row locked there, so concurrent messages cannot
      // each escalate, or each miss the second unanswered question.
      let reply: AssistantAnswer;
      let by: ReplyAuthor = 'builtin';
      // "yes please" right after the assistant offered a person accepts the offer: a request for a person.
      const lastReply = transcript.findLast((m) => m.role === 'assistant');
      const offered = lastReply !== undefined && offersPerson(lastReply.content);
      // A message that only gives an email address ("jo@acme.test", "my email is jo@acme.test") asks to be reached
      // there: a request for a person (once escalated, the address is taken as contact details below).
      const handoff = detectHandoff(content) || onlyGivesEmail(content) || (offered && isAffirmative(content));
      const email = EMAIL_IN_TEXT.exec(content)?.[0];
      // "no thanks" to that offer declines it: not a question the knowledge base failed to answer.
      const declined = !handoff && offered && isNegative(content);
      // A workflow that has its own reply answers the message in place of the knowledge base; a request for a
      // person comes first.
      const replying = handoff ? undefined : triggered.find((w) => w.reply !== null);
      if (handoff) {
        reply = { kind: 'handoff', content: '', sources: [], confidence: 1, topics: [] };
      } else if (declined) {
        reply = { kind: 'smalltalk', content: DECLINED_TEXT, sources: [], confidence: 1, topics: [] };
      } else if (replying) {
        reply = { kind: 'answer', content: replying.reply!, sources: [], confidence: 1, topics: [] };
        by = 'workflow';
      } else {
        // As the conversation's persona (named at start, or the account's at the time), not the account's current one.
        // Without its email addresses: they are contact details, not words to look up, and an address's domain (often
        // the business's own, as in the article giving "support@example.com") made that article the answer to "my
        // email is jo@example.com, where is my order?".
        const question = email ? content.replace(EMAILS_IN_TEXT, ' ') : content;
        const answered = await assistant.reply(accountId, question, history, speakingAs(settings, c.persona), c.knowledge_version);
        reply = answered;
        if (answered.provider === 'llm') by = 'llm';
      }
      const sources = reply.kind === 'answer' ? reply.sources : [];

      /** What the exchange does to the conversation, decided from its row as it stands. */
      const decide = (cur: ConversationRow) => {
        const alreadyEscalated = cur.escalated_at !== null;
        // Once a person is involved, an email address the customer writes is their contact address — also one that
        // corrects the address given before — not a question for the knowledge base.
        const contactEmail = alreadyEscalated && email ? email : null;
        // The workflow's reply went out as is (not folded into the thank-you for contact details).
        const byWorkflow = replying && !contactEmail ? replying.id : null;
        // A workflow's reply handles the message as an answer from the knowledge base does.
        const answered = sources.length > 0 || byWorkflow !== null;
        const streak = reply.kind === 'no_answer' && !contactEmail ? 'increment' : answered ? 'reset' : 'keep';
        // The conversation's messages never go back in time.
        const at = Math.max(clock.now(), cur.last_message_at);
        return {
          cur,
          alreadyEscalated,
          contactEmail,
          emailChanged: contactEmail !== null && contactEmail.toLowerCase() !== (cur.customer_email ?? '').toLowerCase(),
          byWorkflow,
          at,
          /** The row's figures once this exchange is counted: written only while the row is as read, or locked. */
          figures: {
            message_count: cur.message_count + 2,
            answered_count: cur.answered_count + (answered ? 1 : 0),
            unanswered_streak: streak === 'increment' ? cur.unanswered_streak + 1 : streak === 'reset' ? 0 : cur.unanswered_streak,
            last_message_at: at,
          } satisfies ExchangeFigures,
        };
      };
      type Decision = ReturnType<typeof decide>;
      /** The row as the decision read it, which its UPDATE requires (every exchange changes the message count). */
      const asRead = (d: Decision) => ({ messageCount: d.cur.message_count, escalated: d.alreadyEscalated, customerEmail: d.cur.customer_email });

      /** What follows from the decisions and the figures the exchange leaves: an escalation or not, and the two messages. */
      const settle = (d: Decision, counted: ExchangeFigures) => {
        const { cur, alreadyEscalated, contactEmail, byWorkflow, at } = d;
        let escalateWith: string | null = null;
        if (reply.kind === 'handoff' && !alreadyEscalated) escalateWith = 'customer_request';
        // The streak as this exchange left it (every message of the conversation counted).
        if (reply.kind === 'no_answer' && !alreadyEscalated && counted.unanswered_streak >= UNANSWERED_BEFORE_ESCALATION) escalateWith = 'no_answer';
        const escalating = escalateWith !== null;
        // An email address in the message that escalates ("a person please, I'm jo@acme.test") is the contact
        // address: stored before the escalation, so its event carries it and the reply does not ask for it.
        const escalatingEmail = escalating && email ? email : null;
        const reachAt = escalatingEmail ?? cur.customer_email;
        const ask = reachAt ? ` They will reply to ${reachAt}.` : " What's the best email address to reach you?";
        let text = reply.content;
        if (contactEmail) {
          text = `Thank you — a person from our team will reach you at ${contactEmail}.${reply.kind === 'answer' ? `\n\n${reply.content}` : ''}`;
        } else if (escalating || reply.kind === 'handoff') {
          const lead =
            escalateWith === 'no_answer'
              ? `${UNANSWERED_ESCALATION_TEXT} I'm passing this conversation to a person from our team.`
              : alreadyEscalated
                ? 'A person from our team has already been asked to take over this conversation.'
                : "Of course. I'm passing this conversation to a person from our team.";
          text = lead + ask;
        } else if (alreadyEscalated && (reply.kind === 'no_answer' || smallTalkKind(content) === 'presence')) {
          // A person is already on the way: no offer to connect one. "I don't know the answer" only to a question about
          // something (some word of it is in the knowledge base), not to "yes" or "are you there?" after being asked
          // for an email.
          const unknown = reply.kind === 'no_answer' && asksSomething(content) && reply.confidence > 0 ? `${UNKNOWN_TEXT} ` : '';
          text = `${unknown}A person from our team has already been asked to take over this conversation.${ask}`;
        }
        // Positions in the conversation: message_count counted both.
        const customerMsg: MessagesTable = {
          id: newId('msg', at), account_id: accountId, conversation_id: id, role: 'customer', content, sources: null, created_at: at, seq: counted.message_count - 1,
        };
        const assistantMsg = assistantMessage(accountId, id, text, sources, at, counted.message_count, byWorkflow);
        return { escalateWith, escalatingEmail, messages: [customerMsg, assistantMsg] };
      };
      // The status tells a client whether to fetch the conversation again (an escalation's details, the contact address).
      const answer = (messages: MessagesTable[], escalated: boolean) => ({
        messages: messages.map(toMessage),
        status: escalated ? ('escalated' as const) : ('active' as const),
      });
      /** Counted once the exchange has committed. */
      const sent = <T>(out: T) => {
        replies[reply.kind][by]++;
        return out;
      };

      // Decided from the row read before any write, and written only if the row is still as read (its message count,
      // escalated or not, the contact address): the UPDATE checks it, waiting for any concurrent exchange on
      // PostgreSQL. Nearly always it is, and the exchange costs no locking read. Otherwise it is decided again from
      // the row read under lock (FOR UPDATE on PostgreSQL; SQLite has one writer), so concurrent messages cannot each
      // escalate, or each miss the second unanswered question.
      const first = decide(c);
      const planned = settle(first, first.figures);
      // An exchange that writes nothing after its messages and their events' deliveries (no workflow, escalation or
      // contact address) is one statement on PostgreSQL: no transaction round trips. Not written when the row is no
      // longer as read, or a webhook was enabled since: the transaction below then decides again from the locked row.
      const alone = triggered.length === 0 && planned.escalateWith === null && first.contactEmail === null && writesAlone(db);
      if (alone && (await recordExchangeAlone(c, c.enabled_webhooks, first.figures, asRead(first), planned.messages))) return sent(answer(planned.messages, first.alreadyEscalated));

      return sent(await writeTransaction(db, async (trx) => {
        let d = first;
        // The updated row comes back from the UPDATE itself (RETURNING): no read after it.
        let fresh = alone ? undefined : await repo.recordExchange(trx, accountId, id, d.figures, asRead(d));
        if (!fresh) {
          const cur = await repo.findLocked(trx, accountId, id);
          if (!cur) throw notFound('conversation', id);
          if (cur.ended_at !== null) throw ended();
          d = decide(cur);
          fresh = await repo.recordExchange(trx, accountId, id, d.figures);
          if (!fresh) throw ended();
        }
        const { contactEmail, emailChanged, at } = d;
        const { escalateWith, escalatingEmail, messages } = settle(d, fresh);
        await insertMessages(trx, fresh, messages);
        // A workflow reads its fields from everything the customer wrote (this message included, inserted above):
        // the whole transcript is read only when one fired.
        if (triggered.length > 0) await workflows.fire(trx, fresh, triggered, await repo.customerTexts(trx, accountId, id), at);
        if (escalatingEmail) await repo.update(trx, accountId, id, { customer_email: escalatingEmail });
        if (escalateWith) await escalateIn(trx, escalatingEmail ? { ...fresh, customer_email: escalatingEmail } : fresh, escalateWith, at);
        // The same address again changes nothing and emits nothing.
        if (contactEmail && emailChanged) await submitContact(trx, fresh, { email: contactEmail });
        return answer(messages, d.alreadyEscalated || escalateWith !== null);
      }));
    },

    async contact(accountId: string, id: string, body: ContactBody) {
      // A blank name would also replace the customer's label.
      for (const f of ['name', 'phone', 'message'] as const) rejectBlank(`body.${f}`, body[f]);
      return writeTransaction(db, async (trx) => {
        const c = await load(trx, accountId, id);
        await submitContact(trx, c, body);
        return { conversation: await snapshot(trx, accountId, id) };
      });
    },

    async escalate(accountId: string, id: string, body: EscalateBody) {
      return writeTransaction(db, async (trx) => {
        const c = await load(trx, accountId, id);
        if (c.ended_at !== null) throw invalidRequest(`conversation ${id} has ended`);
        // Escalating twice is a no-op: one escalation event per conversation (escalateIn re-checks in its UPDATE).
        if (c.escalated_at === null) await escalateIn(trx, c, body.reason ?? 'customer_request', Math.max(clock.now(), c.last_message_at));
        return { conversation: await snapshot(trx, accountId, id) };
      });
    },

    async end(accountId: string, id: string) {
      return { conversation: await end(accountId, id) };
    },

    /** Ends conversations idle longer than idleMs; returns how many it ended. */
    async endIdle(idleMs: number, batch = 100) {
      const before = clock.now() - idleMs;
      const rows = await repo.idle(db, before, batch);
      // Re-checked as each one ends: a message may have come in since the list was read, or it may have been erased.
      for (const r of rows) {
        try {
          await end(r.account_id, r.id, before);
        } catch (err) {
          if (!(err instanceof ApiError && err.code === 'NOT_FOUND')) throw err;
        }
      }
      return rows.length;
    },

    /** Ends the conversation only if it has had no message since `idleBefore` (the sweeper's step, exposed for tests). */
    endIfIdle: (accountId: string, id: string, idleBefore: number) => end(accountId, id, idleBefore),

    /** Replies sent since start, by kind and author. */
    replies: replies as Readonly<Record<AssistantAnswer['kind'], Readonly<Record<ReplyAuthor, number>>>>,
  };
}

export type ChatService = ReturnType<typeof createChatService>;
