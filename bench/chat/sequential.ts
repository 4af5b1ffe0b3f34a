/**
 * Chat messages one at a time, in process, on PostgreSQL: the statements a message costs and the time it takes
 * from the service's call to its answer (no HTTP, no concurrency: what a customer waits for on a quiet machine, where
 * round trips dominate). The `parley demo` shop's knowledge, 20 conversations, the messages a mix of questions and
 * small talk; the first message of each conversation is not timed (it loads the account's index).
 *
 *   node --import tsx bench/chat/sequential.ts [--messages 400] [--webhook] [--start] [--root DIR]
 *
 * --webhook registers a webhook subscribed to conversation.message (and conversation.started) first. --start times
 * starting conversations (POST /v1/chat/conversations: the greeting and both events) instead of messages. --root times another checkout's source
 * (its node_modules linked to this one's), to compare two versions in one window.
 */
import { parseArgs } from 'node:util';
import pg from 'pg';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '400' },
    webhook: { type: 'boolean', default: false },
    start: { type: 'boolean', default: false },
    root: { type: 'string', default: new URL('../..', import.meta.url).pathname },
  },
});
const root = values.root.replace(/\/$/, '');
const { loadConfig } = (await import(`${root}/src/config.ts`)) as typeof import('../../src/config.js');
const { createContext } = (await import(`${root}/src/context.ts`)) as typeof import('../../src/context.js');
const { systemClock } = (await import(`${root}/src/lib/clock.ts`)) as typeof import('../../src/lib/clock.js');
const { createTestDatabase } = (await import(`${root}/test/helpers/db.ts`)) as typeof import('../../test/helpers/db.js');
const { runDemo } = (await import(`${root}/src/cli/demo.ts`)) as typeof import('../../src/cli/demo.js');

let statements = 0;
/** The announcements of new deliveries, counted apart: sent on their own once the write is done. */
let notifies = 0;
const query = pg.Client.prototype.query;
pg.Client.prototype.query = function (this: pg.Client, ...args: unknown[]) {
  const first = args[0];
  const text = typeof first === 'string' ? first : ((first as { text?: string } | undefined)?.text ?? '');
  if (text.trimStart().startsWith('select pg_notify')) notifies++;
  else statements++;
  return (query as (...a: unknown[]) => unknown).apply(this, args);
} as typeof query;

const database = await createTestDatabase('postgres');
const ctx = createContext(loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true' }), database, systemClock);
try {
  const account = await ctx.services.accounts.createAccount({ name: 'seq', plan: 'enterprise', rateLimitMinute: 1_000_000, rateLimitDay: 10_000_000 });
  await runDemo(ctx, account.id);
  if (values.webhook) await ctx.services.webhooks.create(account.id, { url: 'http://127.0.0.1:9/hook', events: ['conversation.message', 'conversation.started'], secret: 'whsec_sequential_bench' });
  const QUESTIONS = ['how do I track my order?', 'how long do refunds take?', 'thanks!', 'do you ship to Canada?', 'what is your warranty?'];
  const ids: string[] = [];
  for (let i = 0; i < 20; i++) {
    const id = (await ctx.services.chat.start(account.id, {})).conversation.id;
    await ctx.services.chat.send(account.id, id, 'hello');
    ids.push(id);
  }
  const times: number[] = [];
  const counted = Number(values.messages);
  const before = { statements, notifies };
  for (let i = 0; i < counted; i++) {
    const t = process.hrtime.bigint();
    if (values.start) await ctx.services.chat.start(account.id, {});
    else await ctx.services.chat.send(account.id, ids[i % ids.length]!, QUESTIONS[i % QUESTIONS.length]!);
    times.push(Number(process.hrtime.bigint() - t) / 1e6);
  }
  // Announcements are sent without waiting: let the last ones be counted.
  await new Promise((r) => setTimeout(r, 50));
  const per = (n: number) => +(n / counted).toFixed(2);
  times.sort((a, b) => a - b);
  const at = (p: number) => +times[Math.min(times.length - 1, Math.floor(p * times.length))]!.toFixed(2);
  console.log(JSON.stringify({
    root,
    webhook: values.webhook,
    timed: values.start ? 'start' : 'message',
    count: counted,
    statementsEach: per(statements - before.statements),
    notifiesEach: per(notifies - before.notifies),
    p50ms: at(0.5), p95ms: at(0.95),
    date: new Date().toISOString(),
  }));
} finally {
  await ctx.deliveries.close();
  await database.cleanup();
}
