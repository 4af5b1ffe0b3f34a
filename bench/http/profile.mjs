// Summarises a .cpuprofile by self time per function (top N), then by package / area, for finding what a
// benchmark spends time on.
//   node bench/http/profile.mjs PROFILE.cpuprofile [N]
import { readFileSync } from 'node:fs';

const prof = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const top = Number(process.argv[3] ?? 30);
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const self = new Map();
const areas = new Map();
const dt = prof.timeDeltas;
const areaOf = (url, name) => {
  if (!url) return name.startsWith('(') ? name : `native ${name}`;
  const m = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (m) return m[1];
  if (url.includes('/dist/')) return `ours ${url.replace(/^.*\/dist\//, '').split('/').slice(0, 2).join('/')}`;
  if (url.startsWith('node:')) return 'node internals';
  return url;
};
prof.samples.forEach((id, i) => {
  const n = byId.get(id);
  const f = n.callFrame;
  const key = `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*node_modules\//, '').replace(/^file:\/\/.*\/dist\//, 'dist/')}:${f.lineNumber + 1}`;
  self.set(key, (self.get(key) ?? 0) + (dt[i] ?? 0));
  const a = areaOf(f.url, f.functionName);
  areas.set(a, (areas.get(a) ?? 0) + (dt[i] ?? 0));
});
const total = [...self.values()].reduce((a, b) => a + b, 0);
for (const [k, v] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, top)) {
  console.log(`${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`);
}
console.log('\nby area (self time):');
for (const [k, v] of [...areas.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) {
  console.log(`${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`);
}
