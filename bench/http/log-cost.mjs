// What request logging costs per request, without the network: the app of each build (its `dist/`) at each level,
// all in this one process on one SQLite file, each answering requests sent with Fastify's inject (no socket, no load
// generator), one after another; rounds alternate the configurations (order reversed every other round), so a
// machine whose speed drifts favours none. Reports the process's CPU time (user + system, all its threads: an
// asynchronous log write's thread too) per request. The loggers write to stderr as `parley serve`'s does: this script
// runs itself again with stderr sent to a file (appended to, as `2>>parley.log`), whose lines per request it reports.
// Usage (after building the trees): node bench/http/log-cost.mjs --tree /path/to/base --tree . [--levels warn,info]
//   [--rounds 10] [--requests 4000]
import { spawn } from 'node:child_process';
import { mkdtempSync, openSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setImmediate } from 'node:timers';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({
  options: {
    tree: { type: 'string', multiple: true },
    levels: { type: 'string', default: 'warn,info' },
    rounds: { type: 'string', default: '10' },
    requests: { type: 'string', default: '4000' },
    dir: { type: 'string' },
  },
});
if (!values.tree?.length) throw new Error('--tree <path> is required (one or more)');

if (!values.dir) {
  const dir = mkdtempSync(join(tmpdir(), 'parley-log-cost-'));
  const fd = openSync(join(dir, 'stderr.log'), 'a');
  const child = spawn(process.execPath, [...process.argv.slice(1), '--dir', dir], { stdio: ['ignore', 'inherit', fd] });
  const code = await new Promise((r) => child.on('exit', r));
  if (code !== 0) process.stderr.write(readFileSync(join(dir, 'stderr.log'), 'utf8').slice(-4000));
  rmSync(dir, { recursive: true, force: true });
  process.exit(code ?? 1);
}

const trees = values.tree.map((t) => resolve(t));
const rounds = Number(values.rounds);
const requests = Number(values.requests);
const logFile = join(values.dir, 'stderr.log');
const url = `sqlite:${join(values.dir, 'bench.db')}`;

async function appOf(tree, level) {
  const { loadConfig } = await import(join(tree, 'dist/config.js'));
  const { createContext } = await import(join(tree, 'dist/context.js'));
  const { openDatabase, migrateToLatest } = await import(join(tree, 'dist/db/database.js'));
  const { createLogger } = await import(join(tree, 'dist/lib/log.js'));
  const { systemClock } = await import(join(tree, 'dist/lib/clock.js'));
  const { buildApp } = await import(join(tree, 'dist/app.js'));
  const config = loadConfig({ DATABASE_URL: url, LOG_LEVEL: level });
  const database = openDatabase(url);
  await migrateToLatest(database.db);
  const log = createLogger(level);
  const ctx = createContext(config, database, systemClock, log);
  const app = await buildApp(ctx, { loggerInstance: log });
  await app.ready();
  return { app, ctx, database };
}

const configs = [];
for (const [i, tree] of trees.entries()) for (const level of values.levels.split(',')) configs.push({ name: `#${i + 1} ${level}`, ...(await appOf(tree, level)) });

// Enterprise limits far above what the run sends; the documents as bench/http/run.mjs makes them.
const first = configs[0];
const account = await first.ctx.services.accounts.createAccount({ name: 'Bench', plan: 'enterprise', rateLimitMinute: 1e8, rateLimitDay: 1e9 });
const { key } = await first.ctx.services.accounts.createKey({ accountId: account.id, type: 'server' });
const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
let lastId;
for (let i = 0; i < 100; i++) {
  const payload = { title: `Article ${i}: shipping, returns and warranty`, content: `Body of article ${i}. `.repeat(40), status: 'active' };
  lastId = (await first.app.inject({ method: 'POST', url: '/v1/documents', headers, payload })).json().data.id;
}
const scenarios = [
  { name: 'GET /v1/documents (20 of 100)', url: '/v1/documents?limit=20&offset=40' },
  { name: 'GET /v1/documents/:id', url: `/v1/documents/${lastId}` },
];

async function measure(c, s, n) {
  const size0 = statSync(logFile).size;
  const cpu0 = process.cpuUsage();
  for (let i = 0; i < n; i++) {
    const r = await c.app.inject({ method: 'GET', url: s.url, headers });
    if (r.statusCode !== 200) throw new Error(`${c.name} ${s.name}: ${r.statusCode} ${r.body}`);
    // inject never waits on I/O: let an asynchronous logger's writes complete, as a server's event loop would.
    if (i % 10 === 9) await new Promise(setImmediate);
  }
  await new Promise(setImmediate);
  const cpu = process.cpuUsage(cpu0);
  const logged = readFileSync(logFile).subarray(size0);
  let lines = 0;
  for (let i = logged.indexOf(10); i !== -1; i = logged.indexOf(10, i + 1)) lines++;
  return { cpu: (cpu.user + cpu.system) / n, lines: lines / n, bytes: logged.length / n };
}
const median = (xs) => {
  const s = [...xs].sort((x, y) => x - y);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

console.log(JSON.stringify({ date: new Date().toISOString(), trees, rounds, requests, node: process.version }));
for (const s of scenarios) {
  for (const c of configs) await measure(c, s, 1000);
  const res = Object.fromEntries(configs.map((c) => [c.name, []]));
  for (let i = 0; i < rounds; i++) {
    for (const c of i % 2 ? [...configs].reverse() : configs) res[c.name].push(await measure(c, s, requests));
  }
  for (const c of configs) {
    const xs = res[c.name];
    console.log(
      `${s.name} ${c.name}: CPU µs/req ${xs.map((x) => x.cpu.toFixed(1)).join(', ')} (median ${median(xs.map((x) => x.cpu)).toFixed(1)}); ` +
        `log lines/req ${median(xs.map((x) => x.lines)).toFixed(2)}, bytes/req ${median(xs.map((x) => x.bytes)).toFixed(0)}`,
    );
  }
}
for (const c of configs) {
  await c.app.close();
  await c.database.close();
}
