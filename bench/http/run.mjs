/* global URL, fetch, Buffer */
// Benchmarks the service (compiled dist, its own process) beside a bare node:http server answering the same
// bytes, in the same run on the same machine. Usage (after `npm run build`):
//   node bench/http/run.mjs [--duration 10] [--connections 50] [--db sqlite|postgres] [--log-level warn]
// Both servers listen on ports the system picks. The service's stderr (its logs) goes to a file in the run's
// temporary directory, appended to as `parley serve 2>>parley.log` would; its bytes and lines per request are reported.
import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, readFileSync, readSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir, cpus } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { benchDatabase } from '../database.mjs';
import { startListening } from './listen.mjs';

const { values } = parseArgs({
  options: {
    duration: { type: 'string', default: '10' },
    connections: { type: 'string', default: '50' },
    db: { type: 'string', default: 'sqlite' },
    out: { type: 'string' },
    // Pin the load generator (this process) and each server to separate CPUs (Linux taskset), so autocannon
    // does not compete with the server it measures; applied identically to the service and the bare baseline.
    pin: { type: 'boolean', default: false },
    // Profile the service (node --cpu-prof into this directory); the bare baseline is skipped.
    'cpu-prof': { type: 'string' },
    // Only the scenarios whose name contains this text.
    only: { type: 'string' },
    // The service's LOG_LEVEL. `warn` (no per-request lines) keeps the figures comparable with the earlier ones;
    // `info` is what `parley serve` logs by default.
    'log-level': { type: 'string', default: 'warn' },
  },
});
const duration = Number(values.duration);
const connections = Number(values.connections);
const ROOT = new URL('../..', import.meta.url).pathname;
const BIN = join(ROOT, 'bin/parley.js');
const logLevel = values['log-level'];

const dir = mkdtempSync(join(tmpdir(), 'parley-bench-'));
const { url: databaseUrl, drop: dropSchema } = await benchDatabase(values.db, dir, 'bench');
const env = { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: logLevel, PORT: '0', HOST: '127.0.0.1' };
const cli = (...args) => JSON.parse(execFileSync(process.execPath, [BIN, ...args, '--json'], { env, encoding: 'utf8' }));

const SERVER_CPU = '0';
const LOADGEN_CPU = '1';
if (values.pin) execFileSync('taskset', ['-cp', LOADGEN_CPU, String(process.pid)], { stdio: 'ignore' });

function start(args, stderr) {
  const [cmd, argv] = values.pin ? ['taskset', ['-c', SERVER_CPU, process.execPath, ...args]] : [process.execPath, args];
  return startListening(cmd, argv, { env, stderr });
}
const logFile = join(dir, 'service.log');
const logSize = () => statSync(logFile).size;
/** Lines the service logged from byte `from` on (read after the measured run, so not part of it). */
function logLinesFrom(from) {
  const fd = openSync(logFile, 'r');
  try {
    const buf = Buffer.alloc(logSize() - from);
    readSync(fd, buf, 0, buf.length, from);
    let n = 0;
    for (let i = buf.indexOf(10); i !== -1; i = buf.indexOf(10, i + 1)) n++;
    return n;
  } finally {
    closeSync(fd);
  }
}

// Enterprise limits far above what the run sends, so the benchmark measures the limiter, not 429s.
const account = cli('accounts', 'create', '--name', 'Bench', '--plan', 'enterprise', '--rate-limit-minute', '100000000', '--rate-limit-day', '1000000000');
const { key } = cli('keys', 'create', '--account', account.id);
const profDir = values['cpu-prof'];
const logFd = openSync(logFile, 'a');
const { child: service, url: base } = await start([...(profDir ? ['--cpu-prof', '--cpu-prof-dir', profDir] : []), BIN, 'serve', '--no-worker', '--json'], logFd).catch((err) => {
  process.stderr.write(readFileSync(logFile, 'utf8').slice(-4000));
  throw err;
});
closeSync(logFd);
const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
const docBody = (i) => JSON.stringify({ title: `Article ${i}: shipping, returns and warranty`, content: `Body of article ${i}. `.repeat(40), status: 'active' });

let lastId;
for (let i = 0; i < 100; i++) {
  const r = await fetch(`${base}/v1/documents`, { method: 'POST', headers: auth, body: docBody(i) });
  lastId = (await r.json()).data.id;
}
const faqBody = (i) => JSON.stringify({ question: `How do I return item ${i} after using it?`, answer: `Answer ${i}: within 30 days, unused, with the receipt. `.repeat(6), category: 'returns' });
let lastFaqId;
for (let i = 0; i < 100; i++) {
  const r = await fetch(`${base}/v1/faqs`, { method: 'POST', headers: auth, body: faqBody(i) });
  lastFaqId = (await r.json()).data.id;
}
const capture = async (path, init = {}) => (await fetch(`${base}${path}`, { headers: auth, ...init })).text();
const bytes = {
  list: await capture('/v1/documents?limit=20&offset=40'),
  get: await capture(`/v1/documents/${lastId}`),
  create: await capture('/v1/documents', { method: 'POST', body: docBody(999) }),
  faqList: await capture('/v1/faqs?limit=20&offset=40'),
  faqGet: await capture(`/v1/faqs/${lastFaqId}`),
};
const bare = profDir ? null : await start([join(ROOT, 'bench/http/bare.mjs'), JSON.stringify(bytes)], 'inherit');

const scenarios = [
  { name: 'GET /v1/documents (20 of 100)', method: 'GET', path: '/v1/documents?limit=20&offset=40' },
  { name: 'GET /v1/documents/:id', method: 'GET', path: `/v1/documents/${lastId}` },
  { name: 'GET /v1/faqs (20 of 100)', method: 'GET', path: '/v1/faqs?limit=20&offset=40' },
  { name: 'GET /v1/faqs/:id', method: 'GET', path: `/v1/faqs/${lastFaqId}` },
  { name: 'POST /v1/documents', method: 'POST', path: '/v1/documents', body: docBody(1) },
].filter((s) => !values.only || s.name.includes(values.only));

const run = (url, s) =>
  new Promise((resolve, reject) => {
    autocannon({ url: `${url}${s.path}`, method: s.method, headers: auth, body: s.body, connections, duration }, (err, res) => (err ? reject(err) : resolve(res)));
  });

// CPU time (user + system) a server process has used, in µs (Linux /proc; NaN elsewhere). Per request it is a
// cost that other jobs on a busy machine disturb much less than req/s, which drops whenever they take the CPU.
const TICK_US = 1e6 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim() || 100);
function cpuUs(child) {
  try {
    const fields = readFileSync(`/proc/${child.pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return (Number(fields[11]) + Number(fields[12])) * TICK_US;
  } catch {
    return NaN;
  }
}
async function measure(child, url, s) {
  const cpu0 = cpuUs(child);
  const r = await run(url, s);
  r.cpuPerReq = (cpuUs(child) - cpu0) / (r.requests.total || NaN);
  return r;
}
/** The service's run, with the bytes and lines it logged per request (every request it answered, warm-up excluded). */
async function measureService(s) {
  const size0 = logSize();
  const r = await measure(service, base, s);
  const answered = r.requests.total || NaN;
  r.logBytesPerReq = (logSize() - size0) / answered;
  r.logLinesPerReq = logLinesFrom(size0) / answered;
  return r;
}

const rows = [];
for (const s of scenarios) {
  // short warm-up of each so JIT and caches are equal before the measured run
  await run(base, { ...s, duration: 2 }).catch(() => {});
  const svc = await measureService(s);
  const figures = { rps: svc.requests.average, p50: svc.latency.p50, p99: svc.latency.p99, cpuUs: svc.cpuPerReq, logBytes: svc.logBytesPerReq, logLines: svc.logLinesPerReq, errors: svc.errors + svc.non2xx };
  if (!bare) {
    rows.push({ scenario: s.name, service: figures, bare: { rps: NaN }, ratio: NaN });
    continue;
  }
  await run(bare.url, { ...s, duration: 2 }).catch(() => {});
  const b = await measure(bare.child, bare.url, s);
  rows.push({
    scenario: s.name,
    service: figures,
    bare: { rps: b.requests.average, p50: b.latency.p50, p99: b.latency.p99, cpuUs: b.cpuPerReq },
    ratio: svc.requests.average / b.requests.average,
  });
}

service.kill('SIGTERM');
bare?.child.kill('SIGTERM');
// --cpu-prof writes the profile on exit
if (profDir) await new Promise((r) => service.on('exit', r));
await dropSchema();
rmSync(dir, { recursive: true, force: true });

const meta = { date: new Date().toISOString(), db: values.db, logLevel, connections, duration, pinned: values.pin, node: process.version, cpus: `${cpus().length} × ${cpus()[0]?.model}` };
const table = [
  `| scenario | service req/s | p50 ms | p99 ms | bare req/s | bare p50 | bare p99 | ratio | service CPU µs/req | bare CPU µs/req | log lines/req | log bytes/req |`,
  `|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|`,
  ...rows.map(
    (r) =>
      `| ${r.scenario} | ${Math.round(r.service.rps)} | ${r.service.p50} | ${r.service.p99} | ${Math.round(r.bare.rps)} | ${r.bare.p50} | ${r.bare.p99} | ${(r.ratio * 100).toFixed(0)}% | ${r.service.cpuUs?.toFixed(0)} | ${r.bare.cpuUs?.toFixed(0)} | ${r.service.logLines.toFixed(2)} | ${r.service.logBytes.toFixed(0)} |`,
  ),
].join('\n');
console.log(JSON.stringify(meta));
console.log(table);
if (rows.some((r) => r.service.errors)) console.log('errors:', rows.map((r) => r.service.errors).join(', '));
if (values.out) writeFileSync(values.out, JSON.stringify({ meta, rows }, null, 2));
