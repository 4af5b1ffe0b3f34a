// Summarises a .cpuprofile by self time per function (top N), then by package / area, then (with --inclusive) the
// time spent in and under chosen functions, for finding what a benchmark spends time on.
//   node bench/http/profile.mjs PROFILE.cpuprofile [N] [--last SECONDS] [--requests COUNT] [--inclusive NAME,NAME…]
// --last keeps only the samples of the profile's last SECONDS (the measured run; run.mjs stops the service right
// after it), leaving out start-up, seeding and warm-up. --requests turns percentages into µs per request as well.
import { readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { last: { type: 'string' }, requests: { type: 'string' }, inclusive: { type: 'string' } },
});
const prof = JSON.parse(readFileSync(positionals[0], 'utf8'));
const top = Number(positionals[1] ?? 30);
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const self = new Map();
const areas = new Map();
const inclusive = new Map((values.inclusive ?? '').split(',').filter(Boolean).map((name) => [name, 0]));
const dt = prof.timeDeltas;
const areaOf = (url, name) => {
  if (!url) return name.startsWith('(') ? name : `native ${name}`;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  if (url.includes('/dist/')) return `ours ${url.replace(/^.*\/dist\//, '').split('/').slice(0, 2).join('/')}`;
  if (url.startsWith('node:')) return 'node internals';
  return url;
};
// Sample times (µs from the profile's start) to keep the window.
const times = [];
let t = prof.startTime;
for (const d of dt) times.push((t += d));
const from = values.last ? prof.endTime - Number(values.last) * 1e6 : -Infinity;
prof.samples.forEach((id, i) => {
  if (times[i] < from) return;
  const n = byId.get(id);
  const f = n.callFrame;
  const d = dt[i] ?? 0;
  const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, 'dist/')}:${f.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + d);
  const a = areaOf(f.url, f.functionName);
  areas.set(a, (areas.get(a) ?? 0) + d);
  if (inclusive.size) {
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const cf = byId.get(at).callFrame;
      const label = `${cf.functionName} ${cf.url.replace(/^.*\//, '')}:${cf.lineNumber + 1}`;
      for (const name of inclusive.keys()) if (!seen.has(name) && label.includes(name)) seen.add(name);
    }
    for (const name of seen) inclusive.set(name, inclusive.get(name) + d);
  }
});
const total = [...self.values()].reduce((a, b) => a + b, 0);
const idle = self.get('(idle) :0') ?? 0;
const requests = Number(values.requests ?? NaN);
const fmt = (v) => `${((v / total) * 100).toFixed(1).padStart(5)}%${requests ? `  ${(v / requests).toFixed(2).padStart(6)} µs/req` : ''}`;
console.log(`samples: ${(total / 1e6).toFixed(2)} s, of which idle ${((idle / total) * 100).toFixed(1)}%`);
for (const [k, v] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${fmt(v)}  ${k}`);
console.log('\nby area (self time):');
for (const [k, v] of [...areas.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log(`${fmt(v)}  ${k}`);
if (inclusive.size) {
  console.log('\ninclusive (in or under a frame whose "name file:line" contains):');
  for (const [k, v] of inclusive) console.log(`${fmt(v)}  ${k}`);
}
