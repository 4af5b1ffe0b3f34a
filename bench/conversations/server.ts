/*
 * Child process of run.ts: the Parley API on one port and, for the baseline, a bare node:http server on
 * another that answers each path with the exact bytes Parley answered for it (sent over IPC by run.ts).
 */
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { buildApp } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createContext } from '../../src/context.js';
import { openDatabase } from '../../src/db/database.js';
import { systemClock } from '../../src/lib/clock.js';

const config = loadConfig();
const database = openDatabase(config.databaseUrl);
const ctx = createContext(config, database, systemClock);
const app = await buildApp(ctx);
await app.listen({ port: 0, host: '127.0.0.1' });

const bodies = new Map<string, Buffer>();
const bare = createServer((req, res) => {
  const body = bodies.get(req.url ?? '');
  if (!body) {
    res.writeHead(404).end();
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': body.length });
  res.end(body);
});
await new Promise<void>((resolve) => bare.listen(0, '127.0.0.1', resolve));

process.on('message', (m: { type: string; path?: string; body?: string }) => {
  if (m.type === 'body') {
    bodies.set(m.path!, Buffer.from(m.body!, 'utf8'));
    process.send!({ type: 'ack' });
  } else if (m.type === 'stop') {
    bare.close();
    void app.close().then(() => database.close()).then(() => process.exit(0));
  }
});
process.send!({ type: 'ready', parley: (app.server.address() as AddressInfo).port, bare: (bare.address() as AddressInfo).port });
