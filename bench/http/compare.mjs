/* global Buffer, URL */
// Compares the documents API's answers of two builds byte for byte: both trees' `dist/` serve one database (a SQLite
// file or a PostgreSQL schema) from their own processes, and every request below goes to each, twice (the second
// may be answered from what the first left behind). Status, body and every header, in order, must be the same,
// except `date`, `x-request-id` and the moving rate-limit values (`x-ratelimit-remaining`, `x-ratelimit-reset`).
// Usage (after building both trees): node bench/http/compare.mjs --a /path/to/base --b . [--db sqlite|postgres]
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import http from 'node:http';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { benchDatabase } from '../database.mjs';
import { startListening } from './listen.mjs';

const { values } = parseArgs({ options: { a: { type: 'string' }, b: { type: 'string', default: '.' }, db: { type: 'string', default: 'sqlite' } } });
if (!values.a) throw new Error('--a <tree> is required');
const trees = { A: resolve(values.a), B: resolve(values.b) };
const MOVING = new Set(['date', 'x-request-id', 'x-ratelimit-remaining', 'x-ratelimit-reset']);

const dir = mkdtempSync(join(tmpdir(), 'parley-compare-'));
const { url: databaseUrl, drop } = await benchDatabase(values.db, dir, 'bench_cmp');
const env = { ...process.env, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn', HOST: '127.0.0.1', PORT: '0' };
const cli = (...args) => JSON.parse(execFileSync(process.execPath, [join(trees.B, 'bin/parley.js'), ...args, '--json'], { env, encoding: 'utf8' }));
// Both listen on ports the system picks (PORT=0), read from their `--json` line.
const start = (tree) => startListening(process.execPath, [join(tree, 'bin/parley.js'), 'serve', '--no-worker', '--json'], { env });

function request(port, method, path, headers = {}, body) {
  return new Promise((res, rej) => {
    const req = http.request({ host: '127.0.0.1', port, method, path, headers }, (r) => {
      const chunks = [];
      r.on('data', (c) => chunks.push(c));
      r.on('end', () => res({ status: r.statusCode, rawHeaders: r.rawHeaders, body: Buffer.concat(chunks) }));
    });
    req.on('error', rej);
    req.end(body);
  });
}

const account = cli('accounts', 'create', '--name', 'Compare', '--plan', 'enterprise', '--rate-limit-minute', '100000', '--rate-limit-day', '1000000');
const { key } = cli('keys', 'create', '--account', account.id);
const { key: faqsOnly } = cli('keys', 'create', '--account', account.id, '--scopes', 'faqs:read');
const other = cli('accounts', 'create', '--name', 'Other', '--plan', 'pro');
const { key: otherKey } = cli('keys', 'create', '--account', other.id);
const started = { A: await start(trees.A), B: await start(trees.B) };
const servers = { A: started.A.child, B: started.B.child };
const PORTS = { A: Number(new URL(started.A.url).port), B: Number(new URL(started.B.url).port) };

const auth = (k) => ({ authorization: `Bearer ${k}` });
const titles = [
  'Plain title',
  'Quotes "double" and \'single\'',
  'Back\\slash and /slash',
  'Control \u0001\u0007\b\f\n\r\t chars',
  'Emoji 🚀 and 🇫🇷 flags',
  'Line\u2028and paragraph\u2029separators',
  'Latin-1 é ü ß and CJK 漢字',
  '<script>alert(1)</script> & ampersand',
];
const ids = [];
for (let i = 0; i < 45; i++) {
  const title = titles[i % titles.length] + (i >= titles.length ? ` ${i}` : '');
  const body = JSON.stringify({ title, content: `${title}: body ${i}. `.repeat(1 + (i % 5)), status: i % 3 === 0 ? 'draft' : 'active' });
  const r = await request(PORTS.B, 'POST', '/v1/documents', { ...auth(key), 'content-type': 'application/json' }, body);
  if (r.status !== 201) throw new Error(`seed: ${r.status} ${r.body}`);
  ids.push(JSON.parse(r.body).data.id);
}
const theirs = JSON.parse((await request(PORTS.B, 'POST', '/v1/documents', { ...auth(otherKey), 'content-type': 'application/json' }, JSON.stringify({ title: 'Theirs', content: 'Not yours.' }))).body).data.id;

const cases = [
  ['GET', '/v1/documents'],
  ['GET', '/v1/documents?limit=1'],
  ['GET', '/v1/documents?limit=100'],
  ['GET', '/v1/documents?limit=20&offset=40'],
  ['GET', '/v1/documents?offset=44'],
  ['GET', '/v1/documents?offset=1000'],
  ['GET', '/v1/documents?status=active'],
  ['GET', '/v1/documents?status=draft&limit=5&offset=2'],
  ['GET', '/v1/documents?status=all'],
  ['GET', '/v1/documents?limit=020'],
  ['GET', '/v1/documents?status=bogus'],
  ['GET', '/v1/documents?limit=0'],
  ['GET', '/v1/documents?limit=101'],
  ['GET', '/v1/documents?limit=abc'],
  ['GET', '/v1/documents?limit=1e1'],
  ['GET', '/v1/documents?limit=5.0'],
  ['GET', '/v1/documents?offset=-1'],
  ['GET', '/v1/documents?limit=2&limit=3'],
  ['GET', '/v1/documents?unknown=1'],
  ['GET', '/v1/documents?status=%FF'],
  ['HEAD', '/v1/documents?limit=3'],
  ...ids.slice(0, titles.length + 1).map((id) => ['GET', `/v1/documents/${id}`]),
  ['HEAD', `/v1/documents/${ids[1]}`],
  ['GET', '/v1/documents/doc_00000000000000000000000000'],
  ['GET', `/v1/documents/${'x'.repeat(65)}`],
  ['GET', `/v1/documents/${'x'.repeat(101)}`],
  ['GET', '/v1/documents/'],
  ['GET', `/v1/documents/${theirs}`],
  ['GET', '/v1/documents', auth(otherKey)],
  ['GET', `/v1/documents/${ids[0]}`, auth(faqsOnly)],
  ['GET', '/v1/documents', auth('sk_not_a_real_key')],
  ['GET', `/v1/documents/${ids[0]}`, {}],
  ['GET', '/v1/documents', { authorization: 'Basic abc' }],
];

const describe = (r) => ({
  status: r.status,
  headers: r.rawHeaders.map((v, i) => (i % 2 && MOVING.has(r.rawHeaders[i - 1].toLowerCase()) ? '*' : v)),
  body: r.body.toString('base64'),
});
let same = 0;
const differ = [];
for (const [method, path, headers = auth(key)] of cases) {
  for (let round = 0; round < 2; round++) {
    const [x, y] = [describe(await request(PORTS.A, method, path, headers)), describe(await request(PORTS.B, method, path, headers))];
    if (JSON.stringify(x) === JSON.stringify(y)) same++;
    else differ.push({ method, path, round, a: { ...x, body: Buffer.from(x.body, 'base64').toString() }, b: { ...y, body: Buffer.from(y.body, 'base64').toString() } });
  }
}
for (const c of Object.values(servers)) c.kill('SIGTERM');
await Promise.all(Object.values(servers).map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.on('exit', r)))));
await drop();
rmSync(dir, { recursive: true, force: true });
console.log(`${values.db}: ${cases.length} requests, twice each: ${same} identical, ${differ.length} different`);
for (const d of differ) console.log(JSON.stringify(d, null, 1));
process.exitCode = differ.length ? 1 : 0;
