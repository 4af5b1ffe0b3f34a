/* global URL, fetch, setTimeout */
// Customer chat messages under load: POST /v1/chat/conversations/:id/messages over 100 open conversations of the
// `parley demo` shop (each request: the assistant's retrieval, two messages, two events, the conversation row),
// beside a bare node:http server answering the same bytes, in the same run. Usage (after `npm run build`):
//   node bench/chat/run.mjs [--duration 10] [--connections 50] [--db sqlite|postgres] [--pin] [--root DIR] [--cpu-prof DIR] [--webhook]
// --webhook registers a webhook subscribed to conversation.message first, as an account that integrates has: each
// message then also writes two deliveries (left pending: the service runs without its worker).
// --root runs the service of another checkout (built), to compare two versions in one window.
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { benchDatabase } from '../database.mjs';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    db: { type: 'string', default: 'sqlite' },
    pin: { type: 'boolean', default: false },
    root: { type: 'string' },
    // Profile the service (node --cpu-prof into this directory; summarise with bench/http/profile.mjs).
    'cpu-prof': { type: 'string' },
    webhook: { type: 'boolean', default: false },
  },
});
const ROOT = values.root ?? new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/parley.js');
const SERVICE_PORT = 3927;
const BARE_PORT = 3928;
const QUESTION = JSON.stringify({ content: 'how do I track my order?' });

const dir = mkdtempSync(join(tmpdir(), 'parley-chat-bench-'));
const { url: databaseUrl, drop: dropSchema } = await benchDatabase(values.db, dir, 'bench_chat');
const env = { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', PORT: String(SERVICE_PORT), HOST: '127.0.0.1', WEBHOOK_ALLOW_PRIVATE_URLS: 'true' };
const cli = (...args) => JSON.parse(execFileSync(process.execPath, [BIN, ...args, '--json'], { env, encoding: 'utf8' }));
if (values.pin) execFileSync('taskset', ['-cp', '1', String(process.pid)], { stdio: 'ignore' });
const pinned = (args) => (values.pin ? ['taskset', ['-c', '0', process.execPath, ...args]] : [process.execPath, args]);

const account = cli('accounts', 'create', '--name', 'bench', '--plan', 'enterprise', '--rate-limit-minute', '100000000', '--rate-limit-day', '1000000000');
const { key } = cli('keys', 'create', '--account', account.id);
cli('demo', '--account', account.id);
const profile = values['cpu-prof'] ? ['--cpu-prof', '--cpu-prof-dir', values['cpu-prof']] : [];
const [cmd, args] = pinned([...profile, BIN, 'serve', '--no-worker']);
const service = spawn(cmd, args, { env, stdio: 'inherit' });
const api = `http://127.0.0.1:${SERVICE_PORT}/v1`;
for (let i = 0; i < 300; i++) {
  const up = await fetch(`${api}/health`).then((r) => r.ok, () => false);
  if (up) break;
  await new Promise((r) => setTimeout(r, 100));
}
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
if (values.webhook) {
  const hook = { url: 'http://127.0.0.1:9/hook', events: ['conversation.message'], secret: 'whsec_bench_chat_webhook' };
  const r = await (await fetch(`${api}/webhooks`, { method: 'POST', headers, body: JSON.stringify(hook) })).json();
  if (!r.success) throw new Error(JSON.stringify(r));
}
const ids = [];
for (let i = 0; i < 100; i++) {
  const body = await (await fetch(`${api}/chat/conversations`, { method: 'POST', headers, body: '{}' })).json();
  if (!body.success) throw new Error(JSON.stringify(body));
  ids.push(body.data.conversation.id);
}
// The bytes the bare server answers: one real reply.
const sample = await (await fetch(`${api}/chat/conversations/${ids[0]}/messages`, { method: 'POST', headers, body: QUESTION })).text();
// The bare server: a child process like the service (pinned the same way with --pin), answering those bytes
// after reading and parsing the request body, as the service must.
const BARE = `
  const http = require('node:http');
  const sample = ${JSON.stringify(sample)};
  const headers = { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(sample) };
  const s = http.createServer((req, res) => {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => { JSON.parse(Buffer.concat(chunks).toString()); res.writeHead(200, headers); res.end(sample); });
  });
  s.keepAliveTimeout = 60000;
  s.listen(${BARE_PORT}, '127.0.0.1', () => process.stdout.write('ready\\n'));`;

// CPU seconds used so far by processes (utime + stime from /proc), to report CPU per message: on this shared
// machine far steadier than req/s. PostgreSQL's are all its processes (the service's backends among them).
const TICK = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }));
const cpuOf = (pid) => {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) / TICK;
  } catch {
    return 0;
  }
};
const postgresCpu = () =>
  readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        return readFileSync(`/proc/${d}/comm`, 'utf8').trim() === 'postgres';
      } catch {
        return false;
      }
    })
    .reduce((sum, d) => sum + cpuOf(d), 0);

async function load(port, pid) {
  const before = { own: cpuOf(pid), pg: values.db === 'postgres' ? postgresCpu() : 0 };
  let n = 0;
  const r = await autocannon({
    url: `http://127.0.0.1:${port}`,
    connections: Number(values.connections),
    duration: Number(values.duration),
    requests: [{ method: 'POST', headers, setupRequest: (req) => ({ ...req, path: `/v1/chat/conversations/${ids[n++ % ids.length]}/messages`, body: QUESTION }) }],
  });
  const per = (seconds) => Math.round((seconds * 1e6) / r.requests.total);
  return {
    rps: Math.round(r.requests.average),
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.non2xx,
    cpuUsPerMessage: per(cpuOf(pid) - before.own),
    ...(values.db === 'postgres' && port === SERVICE_PORT ? { postgresCpuUsPerMessage: per(postgresCpu() - before.pg) } : {}),
  };
}

const svc = await load(SERVICE_PORT, service.pid);
service.kill('SIGTERM');
const [bareCmd, bareArgs] = pinned(['-e', BARE]);
const bare = spawn(bareCmd, bareArgs, { stdio: ['ignore', 'pipe', 'inherit'] });
await new Promise((r) => bare.stdout.once('data', r));
const b = await load(BARE_PORT, bare.pid);
bare.kill('SIGTERM');
console.log(JSON.stringify({ root: ROOT, db: values.db, webhook: values.webhook, service: svc, bare: b, ratio: +(svc.rps / b.rps).toFixed(3), date: new Date().toISOString() }));
await dropSchema();
rmSync(dir, { recursive: true, force: true });
