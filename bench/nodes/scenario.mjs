/* global Buffer, fetch, Headers, setTimeout */
// Several nodes on one PostgreSQL, as an operator runs them once Parley has outgrown one machine: three
// `parley serve --no-worker` and two `parley worker` processes (the build, bin/parley.js), Redis for the rate limits,
// a webhook receiver on 127.0.0.1 that checks every signature. A mixed load goes to the three nodes round-robin;
// midway one serve node and one worker are killed (SIGKILL). Then it checks, and prints as JSON:
//   - every acknowledged write is there, read from every node at once (knowledge versions, the assistant's index);
//   - every webhook event arrives (duplicates counted), signatures verify, no delivery is left pending;
//   - each idle conversation ends once (one conversation.ended), each scheduled rundown window once per account;
//   - rate limits are shared (remaining and reset across nodes, the 429 at the same count);
//   - a node whose Redis is unreachable: how it starts and counts;
//   - the answers of read endpoints are the same whichever node serves them.
// Usage (after `npm run build`): node bench/nodes/scenario.mjs [--lanes 4] [--rounds 60]
// Needs PostgreSQL (BENCH_DATABASE_URL, default postgres://postgres@127.0.0.1:5432/test) and Redis (BENCH_REDIS_URL,
// default redis://127.0.0.1:6379). Uses its own schema and Redis key prefix, and removes both at the end.
import { spawn } from 'node:child_process';
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import pg from 'pg';

const ROOT = join(import.meta.dirname, '../..');
const ENTRY = join(ROOT, 'bin/parley.js');
const { values: args } = parseArgs({ options: { lanes: { type: 'string', default: '4' }, rounds: { type: 'string', default: '60' } } });
const LANES = Number(args.lanes);
const ROUNDS = Number(args.rounds);
const PG_BASE = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const REDIS_URL = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
const tag = randomBytes(4).toString('hex');
const SCHEMA = `bench_nodes_${tag}`;
const PREFIX = `bench-nodes-${tag}:rl`;
const DATABASE_URL = `${PG_BASE}${PG_BASE.includes('?') ? '&' : '?'}options=${encodeURIComponent(`-c search_path=${SCHEMA}`)}`;
const IDLE_MS = 4_000;
const RUNDOWN_MS = 5_000;

const ENV = {
  PATH: process.env.PATH ?? '',
  DATABASE_URL,
  REDIS_URL,
  REDIS_KEY_PREFIX: PREFIX,
  CONVERSATION_IDLE_TIMEOUT: `${IDLE_MS}ms`,
  RUNDOWN_INTERVAL: `${RUNDOWN_MS}ms`,
  WEBHOOK_ALLOW_PRIVATE_URLS: 'true',
  WEBHOOK_TIMEOUT: '2s',
  WEBHOOK_RETRY_DELAYS: '0,200ms,500ms,1s,2s',
  LOG_LEVEL: 'warn',
};

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
async function until(what, fn, deadlineMs) {
  const end = Date.now() + deadlineMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await sleep(100);
  }
}

async function admin(statement) {
  const c = new pg.Client({ connectionString: PG_BASE });
  await c.connect();
  try {
    return await c.query(statement);
  } finally {
    await c.end();
  }
}

function run(cmd) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [ENTRY, ...cmd, '--json'], { env: ENV, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    let err = '';
    child.stdout.on('data', (c) => (out += c));
    child.stderr.on('data', (c) => (err += c));
    child.on('close', (code) => (code === 0 ? resolve(JSON.parse(out)) : reject(new Error(`${cmd.join(' ')}: ${err}`))));
  });
}

const children = [];
/** A long-running parley process; resolves once it printed its --json line. */
function start(kind, extraEnv = {}) {
  const child = spawn(process.execPath, [ENTRY, ...(kind === 'worker' ? ['worker'] : ['serve', '--no-worker']), '--json'], {
    env: { ...ENV, PORT: '0', ...extraEnv },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  children.push(child);
  const p = { child, stderr: '', url: null, kind };
  child.stderr.on('data', (c) => (p.stderr += c));
  return new Promise((resolve, reject) => {
    let out = '';
    child.stdout.on('data', (c) => {
      out += c;
      if (!out.includes('\n')) return;
      const said = JSON.parse(out.split('\n')[0]);
      p.url = said.listening ?? null;
      resolve(p);
    });
    child.once('exit', (code) => reject(new Error(`${kind} exited ${code}: ${p.stderr}`)));
  });
}
const kill = (p) => new Promise((r) => (p.child.exitCode !== null || p.child.signalCode ? r() : (p.child.once('exit', () => r()), p.child.kill('SIGKILL'))));
const stop = (p) => new Promise((r) => (p.child.exitCode !== null || p.child.signalCode ? r() : (p.child.once('exit', () => r()), p.child.kill('SIGTERM'))));

// ---- receiver ------------------------------------------------------------------------------------------------
const secrets = new Map(); // path -> secret
const received = []; // {path, id, event, data, sigOk, stdOk}
let failFirst = new Set(); // delivery ids answered 503 once (to exercise retries by either worker)
const receiver = http.createServer((req, res) => {
  const chunks = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks);
    const secret = secrets.get(req.url);
    const sig = String(req.headers['x-service-signature'] ?? '');
    const expected = `sha256=${createHmac('sha256', secret ?? '').update(body).digest('hex')}`;
    const sigOk = sig.length === expected.length && timingSafeEqual(Buffer.from(sig), Buffer.from(expected));
    const id = String(req.headers['x-service-delivery-id']);
    const ts = String(req.headers['webhook-timestamp']);
    const std = createHmac('sha256', Buffer.from(secret ?? '', 'utf8')).update(`${req.headers['webhook-id']}.${ts}.${body}`).digest('base64');
    const stdOk = String(req.headers['webhook-signature']).split(' ').includes(`v1,${std}`) && req.headers['webhook-id'] === id;
    const parsed = JSON.parse(body.toString());
    received.push({ path: req.url, id, event: parsed.event, header: req.headers['x-service-event'], data: parsed.data, sigOk, stdOk, at: Date.now() });
    // One delivery in 16 is refused on its first arrival: its retry may go to the other worker.
    const flaky = parseInt(id.slice(-2), 32) % 16 === 0;
    if (flaky && !failFirst.has(id)) {
      failFirst.add(id);
      res.writeHead(503).end();
      return;
    }
    res.writeHead(200).end('ok');
  });
});

// ---- API client ----------------------------------------------------------------------------------------------
const stats = { requests: 0, byStatus: {}, unacknowledged: 0 };
async function api(node, key, method, path, body) {
  stats.requests++;
  let res;
  try {
    res = await fetch(`${node.url}/v1${path}`, {
      method,
      headers: { authorization: `Bearer ${key}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
  } catch (err) {
    stats.unacknowledged++;
    return { status: 0, error: err, headers: new Headers(), json: null };
  }
  stats.byStatus[res.status] = (stats.byStatus[res.status] ?? 0) + 1;
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: text ? JSON.parse(text) : null, text };
}

const problems = [];
const problem = (what, detail) => {
  if (problems.length < 50) problems.push({ what, ...detail });
  counts.problems++;
};
const counts = { problems: 0, docs: 0, docReadsElsewhere: 0, staleDocReads: 0, faqs: 0, faqAnsweredElsewhere: 0, faqNotAnswered: 0, faqUpdateAsks: 0, faqDeleteAsks: 0, conversations: 0, erasedCustomers: 0 };

async function main() {
  await admin(`CREATE SCHEMA ${SCHEMA}`);
  const redis = new Redis(REDIS_URL);
  try {
    await new Promise((r) => receiver.listen(0, '127.0.0.1', r));
    const rx = `http://127.0.0.1:${receiver.address().port}`;
    await run(['migrate']);
    const acctA = await run(['accounts', 'create', '--name', 'Load Co', '--plan', 'enterprise', '--rate-limit-minute', '1000000', '--rate-limit-day', '10000000']);
    const acctB = await run(['accounts', 'create', '--name', 'Limited Co', '--plan', 'enterprise', '--rate-limit-minute', '30', '--rate-limit-day', '100000']);
    const keyA = (await run(['keys', 'create', '--account', acctA.id])).key;
    const keyB = (await run(['keys', 'create', '--account', acctB.id])).key;
    const pkB = (await run(['keys', 'create', '--account', acctB.id, '--type', 'public'])).key;

    const t0 = Date.now();
    const nodes = await Promise.all([start('serve'), start('serve'), start('serve')]);
    const workers = await Promise.all([start('worker'), start('worker')]);
    const startedMs = Date.now() - t0;
    const node = (i) => nodes[i % nodes.length];
    const alive = () => nodes.filter((n) => n.child.exitCode === null && !n.child.signalCode);
    let rr = 0;
    const next = () => {
      const a = alive();
      return a[rr++ % a.length];
    };

    // Webhooks: two on account A (every kind), one on B.
    const kinds = ['conversation.started', 'conversation.ended', 'conversation.message', 'conversation.erased', 'escalation', 'escalation.submitted', 'workflow.triggered', 'rundown.generated'];
    const hooks = [];
    for (const [acct, key, path] of [[acctA, keyA, '/a1'], [acctA, keyA, '/a2'], [acctB, keyB, '/b1']]) {
      const secret = `secret-${path}-${tag}`;
      secrets.set(path, secret);
      const r = await api(next(), key, 'POST', '/webhooks', { url: `${rx}${path}`, events: kinds, secret });
      if (r.status !== 201) throw new Error(`webhook: ${r.text}`);
      hooks.push({ id: r.json.data.id, account: acct.id, path });
    }
    await api(next(), keyA, 'POST', '/workflows', { slug: 'demo', name: 'Demo', triggers: ['book a demo'], fields: [{ key: 'email', type: 'email' }], reply: 'Happy to!' });

    // ---- rate limits shared across nodes (account B, 30 per minute) ----
    const rate = { seq: [], resets: new Set(), firstRefusedAt: null, refusedOn: [], nodeCount: nodes.length };
    for (let i = 0; i < 36; i++) {
      const n = node(i);
      const r = await api(n, i % 2 ? pkB : keyB, i % 2 ? 'POST' : 'GET', i % 2 ? '/chat/conversations' : '/documents', i % 2 ? { customerId: `rl-${i}` } : undefined);
      rate.seq.push({ node: nodes.indexOf(n), status: r.status, remaining: Number(r.headers.get('x-ratelimit-remaining')), reset: r.headers.get('x-ratelimit-reset') });
      rate.resets.add(r.headers.get('x-ratelimit-reset'));
      if (r.status === 429) {
        rate.refusedOn.push(nodes.indexOf(n));
        rate.firstRefusedAt ??= i + 1;
      }
    }
    const okSeq = rate.seq.filter((s) => s.status !== 429).map((s) => s.remaining);
    const rateResult = {
      admitted: okSeq.length,
      firstRefusedAtRequest: rate.firstRefusedAt,
      remainingStrictlyDecreasing: okSeq.every((v, i) => i === 0 || v === okSeq[i - 1] - 1),
      refusedOnNodes: [...new Set(rate.refusedOn)].sort(),
      distinctResetValues: rate.resets.size,
    };

    // ---- the load ----
    const convs = []; // {id, kind, customerId, ended:bool, erased:bool, sends, escalated, contacts}
    const docs = [];
    const faqs = [];
    /** A new conversation on every live node, each asked `content` at once: the replies, with the node's index. */
    const askEveryNode = async (prefix, content) => {
      const replies = [];
      for (const n of alive()) {
        const customerId = `${prefix}-${nodes.indexOf(n)}`;
        const c = await api(n, keyA, 'POST', '/chat/conversations', { customerId });
        if (c.status !== 201) continue;
        const conv = { id: c.json.data.conversation.id, kind: 'faq', sends: 0, customerId };
        convs.push(conv);
        const m = await api(n, keyA, 'POST', `/chat/conversations/${conv.id}/messages`, { content });
        if (m.status !== 200) continue;
        conv.sends++;
        replies.push({ node: nodes.indexOf(n), reply: m.json.data.messages[1] });
      }
      return replies;
    };
    let killedAt = null;
    let killedAtEpoch = Infinity;
    const kinds5 = ['end', 'escalate-contact-end', 'idle', 'handoff-contact', 'erase'];
    const lane = async (laneNo) => {
      for (let round = laneNo; round < ROUNDS; round += LANES) {
        // Documents: create on one node, read at once on the others (get and list), update, read again.
        const n0 = next();
        const d = await api(n0, keyA, 'POST', '/documents', { title: `Doc ${round} ${tag}`, content: `Article ${round}: the warranty covers part ${round}.` });
        if (d.status === 201) {
          counts.docs++;
          docs.push(d.json.data.id);
          for (const n of alive()) {
            if (n === n0) continue;
            counts.docReadsElsewhere++;
            const g = await api(n, keyA, 'GET', `/documents/${d.json.data.id}`);
            const l = await api(n, keyA, 'GET', '/documents?limit=100');
            if (g.status === 0 || l.status === 0) continue; // killed meanwhile
            if (l.status !== 200) {
              problem('list failed', { status: l.status, body: l.text.slice(0, 200) });
              continue;
            }
            if (g.status !== 200 || !l.json.data.documents.some((x) => x.id === d.json.data.id)) {
              counts.staleDocReads++;
              problem('document not seen on another node', { id: d.json.data.id, get: g.status });
            }
          }
          const n1 = next();
          const u = await api(n1, keyA, 'PUT', `/documents/${d.json.data.id}`, { title: `Doc ${round} v2 ${tag}` });
          if (u.status === 200) {
            for (const n of alive()) {
              counts.docReadsElsewhere++;
              const g = await api(n, keyA, 'GET', `/documents/${d.json.data.id}`);
              const l = await api(n, keyA, 'GET', '/documents?limit=100');
              if (g.status === 0 || l.status === 0) continue;
              if (l.status !== 200 || g.status !== 200) {
                problem('read failed', { status: [g.status, l.status], body: l.text.slice(0, 200) });
                continue;
              }
              const listed = l.json.data.documents.find((x) => x.id === d.json.data.id);
              if (g.json.data.title !== `Doc ${round} v2 ${tag}` || listed?.title !== `Doc ${round} v2 ${tag}`) {
                counts.staleDocReads++;
                problem('document update not seen on another node', { id: d.json.data.id, get: g.json.data.title, list: listed?.title });
              }
            }
          }
        }
        // FAQ: created on one node, answered on every other one at once.
        const word = `zorblax${round}q${tag}`;
        const f = await api(next(), keyA, 'POST', '/faqs', { question: `How do I reset the ${word} gadget?`, answer: `Hold the ${word} button for ten seconds.`, category: 'gadgets' });
        if (f.status === 201) {
          counts.faqs++;
          faqs.push(f.json.data.id);
          for (const { node, reply } of await askEveryNode(`faq-${round}`, `how do I reset the ${word} gadget?`)) {
            counts.faqAnsweredElsewhere++;
            if (!reply.sources.includes(f.json.data.id)) {
              counts.faqNotAnswered++;
              problem('new FAQ not answered on a node', { faq: f.json.data.id, node, reply: reply.content.slice(0, 80) });
            }
          }
        }
        // The FAQ changed on one node: every other one answers with the new text at once; deleted: none cites it.
        if (f.status === 201 && round % 4 === 0) {
          const newWord = `quuxle${round}r${tag}`;
          const u = await api(next(), keyA, 'PUT', `/faqs/${f.json.data.id}`, { answer: `Press the ${newWord} switch twice.` });
          if (u.status === 200) {
            for (const { node, reply } of await askEveryNode(`faq2-${round}`, `how do I reset the ${word} gadget?`)) {
              counts.faqUpdateAsks++;
              if (!reply.content.includes(newWord)) problem('FAQ update not answered on a node', { faq: f.json.data.id, node, reply: reply.content.slice(0, 120) });
            }
            const del = await api(next(), keyA, 'DELETE', `/faqs/${f.json.data.id}`);
            if (del.status === 200) {
              faqs.splice(faqs.indexOf(f.json.data.id), 1);
              for (const { node, reply } of await askEveryNode(`faq3-${round}`, `how do I reset the ${word} gadget?`)) {
                counts.faqDeleteAsks++;
                if (reply.sources.includes(f.json.data.id)) problem('deleted FAQ cited on a node', { faq: f.json.data.id, node });
              }
            }
          }
        }
        // A chat, each step on the next node.
        const kind = kinds5[round % kinds5.length];
        const customerId = `cust-${round}-${tag}`;
        const key = keyA;
        const s = await api(next(), key, 'POST', '/chat/conversations', { customerId, customerEmail: round % 2 ? `c${round}@example.com` : undefined });
        if (s.status !== 201) continue;
        counts.conversations++;
        const conv = { id: s.json.data.conversation.id, kind, customerId, sends: 0, escalated: false, contacts: 0, ended: false, erased: false };
        convs.push(conv);
        const say = async (content) => {
          const r = await api(next(), key, 'POST', `/chat/conversations/${conv.id}/messages`, { content });
          if (r.status === 200) conv.sends++;
          return r;
        };
        await say('what does the warranty cover?');
        if (kind === 'idle') continue;
        if (kind === 'escalate-contact-end') {
          if ((await api(next(), key, 'POST', `/chat/conversations/${conv.id}/escalate`, {})).status === 200) conv.escalated = true;
          if ((await api(next(), key, 'POST', `/chat/conversations/${conv.id}/contact`, { email: `x${round}@example.com`, name: 'X' })).status === 200) conv.contacts++;
        }
        if (kind === 'handoff-contact') {
          await say('I want to talk to a person please');
          if ((await api(next(), key, 'POST', `/chat/conversations/${conv.id}/contact`, { email: `y${round}@example.com` })).status === 200) conv.contacts++;
          if (round % 3 === 0) await say('I would like to book a demo');
          continue; // left open: the worker ends it
        }
        if (kind === 'erase') {
          // The same erasure sent to every node at once (a client retrying elsewhere): each conversation erased once.
          const all = await Promise.all(alive().map((n) => api(n, keyA, 'DELETE', `/conversations?customerId=${encodeURIComponent(customerId)}`)));
          const e = all.find((r) => r.status === 200) ?? all[0];
          const erasedCounts = all.filter((r) => r.status === 200).map((r) => r.json.data.count);
          if (erasedCounts.reduce((a, b) => a + b, 0) !== 1) problem('concurrent erasure counted other than once', { counts: erasedCounts });
          if (e.status === 200) {
            conv.erased = true;
            counts.erasedCustomers++;
            for (const n of alive()) {
              const g = await api(n, keyA, 'GET', `/conversations/${conv.id}`);
              if (g.status !== 404 && g.status !== 0) problem('erased conversation still readable', { id: conv.id, node: nodes.indexOf(n), status: g.status });
            }
          }
          continue;
        }
        if ((await api(next(), key, 'POST', `/chat/conversations/${conv.id}/end`)).status === 200) conv.ended = true;
      }
    };
    const killer = (async () => {
      await until('half the load', () => counts.conversations >= ROUNDS / 2, 300_000);
      killedAt = Date.now() - t0;
      killedAtEpoch = Date.now();
      await Promise.all([kill(nodes[2]), kill(workers[1])]);
    })();
    const loadStart = Date.now();
    await Promise.all([...Array.from({ length: LANES }, (_, i) => lane(i)), killer]);
    const loadMs = Date.now() - loadStart;

    // ---- a node whose Redis is unreachable ----
    const deadPort = await new Promise((r) => {
      const s = http.createServer().listen(0, '127.0.0.1', () => {
        const p = s.address().port;
        s.close(() => r(p));
      });
    });
    const nd0 = Date.now();
    const badRedis = await start('serve', { REDIS_URL: `redis://127.0.0.1:${deadPort}`, LOG_LEVEL: 'warn' });
    const badRedisStartMs = Date.now() - nd0;
    const onBad = [];
    for (let i = 0; i < 3; i++) {
      const r = await api(badRedis, keyB, 'GET', '/documents');
      onBad.push({ status: r.status, remaining: r.headers.get('x-ratelimit-remaining'), reset: r.headers.get('x-ratelimit-reset') });
    }
    const onGood = await api(nodes[0], keyB, 'GET', '/documents');
    const redisDown = {
      started: true,
      startMs: badRedisStartMs,
      requests: onBad,
      sameRequestOnSharedNode: { status: onGood.status, remaining: onGood.headers.get('x-ratelimit-remaining') },
      stderr: badRedis.stderr.split('\n').filter(Boolean).map((l) => {
        try {
          const o = JSON.parse(l);
          return `${o.level} ${o.msg}${o.err ? `: ${o.err}` : ''}`;
        } catch {
          return l;
        }
      }),
    };
    await stop(badRedis);

    // ---- wait for the workers to settle: idle conversations end, deliveries finish ----
    const db = new pg.Client({ connectionString: DATABASE_URL });
    await db.connect();
    const q = async (text, params) => (await db.query(text, params)).rows;
    const settleStart = Date.now();
    await until('every conversation ended', async () => Number((await q(`select count(*) n from conversations where ended_at is null`))[0].n) === 0, 60_000);
    // A rundown window past the last conversation's end, so its rundown exists before we look.
    const lastEnd = Number((await q(`select max(ended_at) m from conversations`))[0].m);
    await until('the rundown after the last end', async () => Number((await q(`select count(*) n from rundowns where trigger = 'schedule' and from_ts > $1`, [lastEnd]))[0].n) >= 2, 60_000);
    await until('no delivery pending', async () => Number((await q(`select count(*) n from deliveries where status = 'pending'`))[0].n) === 0, 60_000);
    await until('the receiver got every succeeded delivery', async () => {
      const ids = new Set(received.map((r) => r.id));
      return (await q(`select id from deliveries where status = 'succeeded'`)).every((r) => ids.has(r.id));
    }, 30_000);
    const settleMs = Date.now() - settleStart;

    // ---- same answers on every node ----
    const first = convs.find((c) => !c.erased);
    const paths = ['/documents?limit=100', `/documents/${docs[0]}`, '/faqs?limit=100', `/faqs/${faqs[0]}`, '/conversations?limit=100', `/conversations/${first.id}`, `/chat/conversations/${first.id}`, '/webhooks', `/webhooks/${hooks[0].id}/deliveries?limit=5`, '/analytics/overview', '/analytics/topics', '/rundowns?limit=5', '/workflows', '/documents/doc_nope', '/nope', '/health', '/openapi.json'];
    const differing = [];
    for (const p of paths) {
      const answers = [];
      // Node 0 again at the end: an answer that changed meanwhile is time, not the node.
      for (const n of [...alive(), alive()[0]]) {
        const r = await api(n, keyA, 'GET', p);
        const volatile = new Set(['date', 'x-request-id', 'x-ratelimit-remaining', 'x-ratelimit-reset', 'keep-alive', 'connection']);
        const headers = [...r.headers].filter(([h]) => !volatile.has(h)).map(([h, v]) => `${h}: ${v}`).sort().join('\n');
        answers.push(`${r.status}\n${headers}\n\n${r.text}`);
      }
      if (new Set(answers).size > 1) differing.push({ path: p, sameNodeTwice: answers[0] === answers.at(-1) });
    }

    // ---- checks ----
    const deliveries = await q(`select status, count(*)::int n from deliveries group by status order by status`);
    const byId = new Map();
    for (const r of received) byId.set(r.id, (byId.get(r.id) ?? 0) + 1);
    const okArrivals = received.filter((r) => r.sigOk && r.stdOk);
    const dupSucceeded = await q(
      `select delivery_id, count(*)::int n, count(distinct worker)::int workers from delivery_attempts where status_code between 200 and 299 group by delivery_id having count(*) > 1`,
    );
    const attemptsByWorker = await q(`select worker, count(*)::int n from delivery_attempts group by worker order by n desc`);
    // Each conversation's events as they reached each webhook (distinct delivery ids).
    const per = new Map(); // `${path} ${conv}` -> Map(event -> Set(deliveryIds))
    for (const r of received) {
      const conv = r.data?.conversationId;
      if (!conv) continue;
      const k = `${r.path} ${conv}`;
      if (!per.has(k)) per.set(k, new Map());
      const m = per.get(k);
      if (!m.has(r.event)) m.set(r.event, new Set());
      m.get(r.event).add(r.id);
    }
    // conversation.message positions: 1..n, each once, per webhook and conversation.
    const positions = new Map();
    for (const r of received.filter((x) => x.event === 'conversation.message')) {
      const k = `${r.path} ${r.data.conversationId}`;
      if (!positions.has(k)) positions.set(k, new Map());
      positions.get(k).set(r.data.messageId, r.data.position);
    }
    let positionGaps = 0;
    let outOfOrderArrivals = 0;
    for (const m of positions.values()) {
      const ps = [...m.values()].sort((a, b) => a - b);
      if (!ps.every((p, i) => p === i + 1)) positionGaps++;
    }
    const lastPos = new Map();
    for (const r of received.filter((x) => x.event === 'conversation.message')) {
      const k = `${r.path} ${r.data.conversationId}`;
      if ((lastPos.get(k) ?? 0) > r.data.position) outOfOrderArrivals++;
      lastPos.set(k, Math.max(lastPos.get(k) ?? 0, r.data.position));
    }
    const ev = (path, conv, e) => per.get(`${path} ${conv}`)?.get(e)?.size ?? 0;
    const convCheck = { checked: 0, missingStarted: 0, endedNotOnce: 0, messagesShort: 0, escalationMissing: 0, erasedNotice: 0, erasedEndedSent: 0 };
    for (const c of convs) {
      for (const path of ['/a1', '/a2']) {
        convCheck.checked++;
        if (c.erased) {
          if (ev(path, c.id, 'conversation.erased') !== 1) {
            convCheck.erasedNotice++;
            problem('erased: not one conversation.erased', { id: c.id, path });
          }
          if (ev(path, c.id, 'conversation.ended') > 0) convCheck.erasedEndedSent++;
          continue;
        }
        const check = (ok, counter, what, detail) => {
          if (ok) return;
          convCheck[counter]++;
          problem(what, { id: c.id, path, ...detail });
        };
        check(ev(path, c.id, 'conversation.started') === 1, 'missingStarted', 'conversation.started not once', { n: ev(path, c.id, 'conversation.started') });
        check(ev(path, c.id, 'conversation.ended') === 1, 'endedNotOnce', 'conversation.ended not once', { kind: c.kind, n: ev(path, c.id, 'conversation.ended') });
        check(ev(path, c.id, 'conversation.message') >= 1 + 2 * c.sends, 'messagesShort', 'messages missing', { got: ev(path, c.id, 'conversation.message'), want: 1 + 2 * c.sends });
        check(!c.escalated || ev(path, c.id, 'escalation') === 1, 'escalationMissing', 'escalation not once', {});
      }
    }
    const idleConvs = convs.filter((c) => !c.erased && !c.ended);
    const rundownDup = await q(`select account_id, from_ts, count(*)::int n from rundowns where trigger = 'schedule' group by account_id, from_ts having count(*) > 1`);
    const rundownWindows = await q(
      `select a.id account, a.created_at, min(r.from_ts) first, max(r.from_ts) last, count(*)::int n from accounts a join rundowns r on r.account_id = a.id and r.trigger = 'schedule' group by a.id, a.created_at`,
    );
    const gaps = rundownWindows.map((w) => ({ account: w.account, windows: w.n, expected: (Number(w.last) - Number(w.first)) / RUNDOWN_MS + 1 }));
    const rundownEvents = new Map();
    for (const r of received.filter((x) => x.event === 'rundown.generated')) {
      const k = `${r.path} ${r.data.from}`;
      if (!rundownEvents.has(k)) rundownEvents.set(k, new Set());
      rundownEvents.get(k).add(r.id);
    }
    const lostDocs = [];
    for (const id of docs) if ((await api(nodes[0], keyA, 'GET', `/documents/${id}`)).status !== 200) lostDocs.push(id);
    const leftKeys = await redis.keys(`${PREFIX}:*`);

    const report = {
      setup: { schema: SCHEMA, redisPrefix: PREFIX, serveNodes: 3, workers: 2, lanes: LANES, rounds: ROUNDS, idleTimeoutMs: IDLE_MS, rundownIntervalMs: RUNDOWN_MS, startMs: startedMs },
      load: { ms: loadMs, ...stats, killedServeNodeAndWorkerAtMs: killedAt },
      freshness: { docs: counts.docs, docReadsOnOtherNodes: counts.docReadsElsewhere, staleDocReads: counts.staleDocReads, faqs: counts.faqs, faqAsksOnEveryNode: counts.faqAnsweredElsewhere, faqNotAnswered: counts.faqNotAnswered, faqUpdateAsks: counts.faqUpdateAsks, faqDeleteAsks: counts.faqDeleteAsks },
      acknowledgedLost: { documents: lostDocs.length },
      rateLimits: rateResult,
      redisUnreachable: redisDown,
      warningsOfOtherNodes: [...nodes, ...workers].map((p) => p.stderr.split('\n').filter((l) => l.includes('"level":40') || l.includes('"level":50')).map((l) => JSON.parse(l).msg)),
      differingAnswers: differing,
      webhooks: {
        deliveriesByStatus: deliveries,
        arrivals: received.length,
        distinctDeliveries: byId.size,
        duplicateArrivals: received.length - byId.size - [...failFirst].filter((id) => byId.get(id) > 1).length,
        refusedOnceOnPurpose: failFirst.size,
        // A delivery sent twice because the killed worker sent it and died before recording it: first seen before the kill.
        duplicatesFirstSeenBeforeTheKill: [...byId].filter(([id, n]) => n > (failFirst.has(id) ? 2 : 1) && received.find((r) => r.id === id).at <= killedAtEpoch).length,
        badSignatures: received.length - okArrivals.length,
        headerEventMismatch: received.filter((r) => r.header !== r.event).length,
        succeededAttemptsTwice: dupSucceeded.length,
        messagePositionGaps: positionGaps,
        messagesArrivedBeforeAnEarlierOne: outOfOrderArrivals,
        succeededTwiceByTwoWorkers: dupSucceeded.filter((d) => d.workers > 1).length,
        attemptsByWorker: attemptsByWorker.map((w) => w.n),
        settleMs,
      },
      conversations: { total: convs.length, idleOrLeftOpen: idleConvs.length, erased: convs.filter((c) => c.erased).length, ...convCheck },
      rundowns: { duplicatedWindows: rundownDup.length, perAccount: gaps, eventsPerWindowNotOne: [...rundownEvents.values()].filter((s) => s.size !== 1).length },
      redisKeysLeft: leftKeys.length,
      problems: counts.problems,
      firstProblems: problems.slice(0, 15),
    };
    await db.end();
    console.log(JSON.stringify(report, null, 2));
  } finally {
    for (const c of children) if (c.exitCode === null && !c.signalCode) c.kill('SIGTERM');
    await Promise.all(children.map((c) => (c.exitCode !== null || c.signalCode ? null : new Promise((r) => c.once('exit', r)))));
    receiver.close();
    const keys = await redis.keys(`${PREFIX}:*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await admin(`DROP SCHEMA ${SCHEMA} CASCADE`);
  }
}

main().catch((err) => {
  console.error(err);
  process.exitCode = 1;
});
