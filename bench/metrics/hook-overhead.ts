// What counting a request costs, without a database: two Fastify apps answering the same routes, one with the
// metrics' onResponse hooks (src/http/metrics.ts), one without, each sent the same requests over keep-alive
// connections from this process, in alternating rounds; the CPU time of the whole process per request (client
// included, the same for both), so the difference is the hooks'. (app.inject is no use here: light-my-request keeps
// every request it made in memory, ~10 kB each, with or without the hooks.)
// Usage: node --import tsx bench/metrics/hook-overhead.ts [--requests 20000] [--rounds 10]
import type { AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import Fastify from 'fastify';
import { Agent, request } from 'undici';
import { createHttpMetrics } from '../../src/http/metrics.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '20000' }, rounds: { type: 'string', default: '10' } } });
const requests = Number(values.requests);
const rounds = Number(values.rounds);
const CONNECTIONS = 10;

async function makeApp(counted: boolean) {
  const app = Fastify({ logger: false });
  if (counted) createHttpMetrics().register(app);
  // A few routes, so the counted app keeps several series as the service does.
  for (const path of ['/v1/documents', '/v1/documents/:id', '/v1/faqs', '/v1/faqs/:id']) {
    app.get(path, async () => ({ success: true, data: { ok: true } }));
  }
  await app.listen({ port: 0, host: '127.0.0.1' });
  return { app, base: `http://127.0.0.1:${(app.server.address() as AddressInfo).port}` };
}

const agent = new Agent({ connections: CONNECTIONS });
async function cpuPerRequest(base: string) {
  const start = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (next < requests) {
        const i = next++;
        const r = await request(`${base}${i % 2 ? '/v1/documents/doc_1' : '/v1/faqs'}`, { dispatcher: agent });
        await r.body.text();
        if (r.statusCode !== 200) throw new Error(`status ${r.statusCode}`);
      }
    }),
  );
  const used = process.cpuUsage(start);
  return (used.user + used.system) / requests;
}

const plain = await makeApp(false);
const counted = await makeApp(true);
await cpuPerRequest(plain.base);
await cpuPerRequest(counted.base);
const results: { plain: number[]; counted: number[] } = { plain: [], counted: [] };
for (let round = 0; round < rounds; round++) {
  // Alternating which goes first, so a drift of the machine favours neither.
  if (round % 2) results.counted.push(await cpuPerRequest(counted.base));
  results.plain.push(await cpuPerRequest(plain.base));
  if (round % 2 === 0) results.counted.push(await cpuPerRequest(counted.base));
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`without hooks: ${results.plain.map((x) => x.toFixed(1)).join(', ')} µs/request (median ${median(results.plain).toFixed(2)})`);
console.log(`with hooks:    ${results.counted.map((x) => x.toFixed(1)).join(', ')} µs/request (median ${median(results.counted).toFixed(2)})`);
console.log(`difference of the medians: ${(median(results.counted) - median(results.plain)).toFixed(2)} µs/request`);
await agent.close();
await plain.app.close();
await counted.app.close();
