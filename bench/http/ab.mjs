/* global fetch */
// A/B of two builds of the service on one database: each tree's `dist/` serves the same SQLite file (or PostgreSQL
// schema) from its own process, both pinned to the same CPU, and short autocannon rounds alternate between them
// (A B B A A B …), so a machine whose speed drifts (other jobs) favours neither. Reports, per scenario, each
// round's req/s and the server's CPU time (user + system, /proc) per request, and their medians. CPU per request
// is the steadier figure on a busy machine.
// Usage (after building both trees): node bench/http/ab.mjs --a /path/to/base --b . [--rounds 6] [--duration 3]
//   [--connections 50] [--db sqlite|postgres] [--only TEXT] [--log-level warn] [--a-log-level L] [--b-log-level L]
// One tree at two log levels: --a . --b . --a-log-level warn --b-log-level info. Both servers listen on ports the
// system picks; their stderr (logs) goes to a file each in the run's temporary directory (as `2>>parley.log`).
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { benchDatabase } from '../database.mjs';
import { startListening } from './listen.mjs';

const { values } = parseArgs({
  options: {
    a: { type: 'string' },
    b: { type: 'string', default: '.' },
    rounds: { type: 'string', default: '6' },
    duration: { type: 'string', default: '3' },
    connections: { type: 'string', default: '50' },
    db: { type: 'string', default: 'sqlite' },
    only: { type: 'string' },
    // The servers' LOG_LEVEL (`warn`: no per-request lines, as in the earlier figures), or each side's.
    'log-level': { type: 'string', default: 'warn' },
    'a-log-level': { type: 'string' },
    'b-log-level': { type: 'string' },
  },
});
if (!values.a) throw new Error('--a <tree> is required');
const trees = { A: resolve(values.a), B: resolve(values.b) };
const rounds = Number(values.rounds);
const duration = Number(values.duration);
const connections = Number(values.connections);
const logLevels = { A: values['a-log-level'] ?? values['log-level'], B: values['b-log-level'] ?? values['log-level'] };
const SERVER_CPU = '0';
const LOADGEN_CPU = '1';
execFileSync('taskset', ['-cp', LOADGEN_CPU, String(process.pid)], { stdio: 'ignore' });

const dir = mkdtempSync(join(tmpdir(), 'parley-ab-'));
const { url: databaseUrl, drop: dropSchema } = await benchDatabase(values.db, dir, 'bench_ab');
const env = { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: '0' };
const cli = (...args) => JSON.parse(execFileSync(process.execPath, [join(trees.B, 'bin/parley.js'), ...args, '--json'], { env, encoding: 'utf8' }));

async function start(which) {
  const logFile = join(dir, `${which}.log`);
  const fd = openSync(logFile, 'a');
  try {
    return await startListening('taskset', ['-c', SERVER_CPU, process.execPath, join(trees[which], 'bin/parley.js'), 'serve', '--no-worker', '--json'], {
      env: { ...env, LOG_LEVEL: logLevels[which] },
      stderr: fd,
    });
  } catch (err) {
    process.stderr.write(readFileSync(logFile, 'utf8').slice(-4000));
    throw err;
  } finally {
    closeSync(fd);
  }
}

const account = cli('accounts', 'create', '--name', 'Bench', '--plan', 'enterprise', '--rate-limit-minute', '100000000', '--rate-limit-day', '1000000000');
const { key } = cli('keys', 'create', '--account', account.id);
const started = { A: await start('A'), B: await start('B') };
const servers = { A: started.A.child, B: started.B.child };
const urls = { A: started.A.url, B: started.B.url };
const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const docBody = (i) => JSON.stringify({ title: `Article ${i}: shipping, returns and warranty`, content: `Body of article ${i}. `.repeat(40), status: 'active' });
let lastId;
for (let i = 0; i < 100; i++) {
  const r = await fetch(`${urls.B}/v1/documents`, { method: 'POST', headers: auth, body: docBody(i) });
  lastId = (await r.json()).data.id;
}
const faqBody = (i) => JSON.stringify({ question: `How do I return item ${i} after using it?`, answer: `Answer ${i}: within 30 days, unused, with the receipt. `.repeat(6), category: 'returns' });
let lastFaqId;
for (let i = 0; i < 100; i++) {
  const r = await fetch(`${urls.B}/v1/faqs`, { method: 'POST', headers: auth, body: faqBody(i) });
  lastFaqId = (await r.json()).data.id;
}

const scenarios = [
  { name: 'GET /v1/documents (20 of 100)', path: '/v1/documents?limit=20&offset=40' },
  { name: 'GET /v1/documents/:id', path: `/v1/documents/${lastId}` },
  { name: 'GET /v1/faqs (20 of 100)', path: '/v1/faqs?limit=20&offset=40' },
  { name: 'GET /v1/faqs/:id', path: `/v1/faqs/${lastFaqId}` },
].filter((s) => !values.only || s.name.includes(values.only));

const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim() || 100);
const cpuUs = (child) => {
  const f = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * TICK_US;
};
const run = (which, s, d) =>
  new Promise((res, rej) => {
    autocannon({ url: `${urls[which]}${s.path}`, headers: auth, connections, duration: d }, (err, r) => (err ? rej(err) : res(r)));
  });
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

console.log(JSON.stringify({ date: new Date().toISOString(), a: trees.A, b: trees.B, logLevels, db: values.db, rounds, duration, connections }));
for (const s of scenarios) {
  for (const w of ['A', 'B']) await run(w, s, 2);
  const res = { A: [], B: [] };
  for (let i = 0; i < rounds; i++) {
    for (const w of i % 2 ? ['B', 'A'] : ['A', 'B']) {
      const c0 = cpuUs(servers[w]);
      const r = await run(w, s, duration);
      if (r.errors || r.non2xx) throw new Error(`${w}: ${r.errors} errors, ${r.non2xx} non-2xx`);
      res[w].push({ rps: r.requests.average, p99: r.latency.p99, cpu: (cpuUs(servers[w]) - c0) / r.requests.total });
    }
  }
  for (const w of ['A', 'B']) {
    const xs = res[w];
    console.log(
      `${s.name} ${w}: CPU µs/req ${xs.map((x) => x.cpu.toFixed(0)).join(', ')} (median ${median(xs.map((x) => x.cpu)).toFixed(1)}); ` +
        `req/s ${xs.map((x) => Math.round(x.rps)).join(', ')} (median ${Math.round(median(xs.map((x) => x.rps)))}); p99 median ${median(xs.map((x) => x.p99))} ms`,
    );
  }
}
for (const c of Object.values(servers)) c.kill('SIGTERM');
await Promise.all(Object.values(servers).map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.on('exit', r)))));
await dropSchema();
rmSync(dir, { recursive: true, force: true });
