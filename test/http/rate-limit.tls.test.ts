import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { connect, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { createServer, type Server } from 'node:tls';
import { Redis } from 'ioredis';

const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';
const ROOT = join(import.meta.dirname, '../..');

// REDIS_URL=rediss://… (Redis behind TLS, as managed services offer it): the limiter's counters travel over TLS.
// A TLS relay with a certificate made for the test stands in for such a Redis; the client trusts it through
// NODE_EXTRA_CA_CERTS, the way an operator trusts a private CA (README, REDIS_URL).
describe('rate limits with Redis over TLS (rediss://)', () => {
  let dir: string;
  let relay: Server;
  let port: number;
  let tlsSessions = 0;
  const keyPrefix = `parley_tls_test_${process.pid}`;

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'parley-tls-'));
    execFileSync('openssl', ['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem'),
      '-days', '1', '-subj', '/CN=127.0.0.1', '-addext', 'subjectAltName=IP:127.0.0.1'], { stdio: 'ignore' });
    const target = new URL(REDIS_URL);
    relay = createServer({ key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) }, (socket) => {
      tlsSessions++;
      const upstream = connect(Number(target.port || 6379), target.hostname);
      socket.pipe(upstream).pipe(socket);
      socket.on('error', () => upstream.destroy());
      upstream.on('error', () => socket.destroy());
    });
    await new Promise<void>((r) => relay.listen(0, '127.0.0.1', r));
    port = (relay.address() as AddressInfo).port;
  });
  after(async () => {
    const redis = new Redis(REDIS_URL);
    const keys = await redis.keys(`${keyPrefix}*`);
    if (keys.length) await redis.del(...keys);
    await redis.quit();
    await new Promise((r) => relay.close(r));
    rmSync(dir, { recursive: true, force: true });
  });

  /** A limiter in a process of its own (NODE_EXTRA_CA_CERTS is read at start-up): what four requests get. */
  async function fourRequests(env: Record<string, string>) {
    const script = `
      const { createRateLimiter } = await import(${JSON.stringify(join(ROOT, 'src/http/rate-limit.ts'))});
      const limiter = createRateLimiter({ redisUrl: process.env.URL, keyPrefix: ${JSON.stringify(keyPrefix)} });
      const connected = await Promise.race([limiter.ready().then(() => true), new Promise((r) => setTimeout(() => r(false), 5000))]);
      const out = [];
      for (let i = 0; i < 4; i++) {
        try {
          const r = await limiter.consume({ accountId: 'acct_tls', limits: { minute: 3, day: 100 } });
          out.push(r.headers['x-ratelimit-remaining']);
        } catch (err) {
          out.push(err.code);
        }
      }
      await limiter.close();
      console.log(JSON.stringify({ connected, out }));`;
    // Not spawnSync: the relay runs in this process and must keep serving while the child talks to it.
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', URL: `rediss://127.0.0.1:${port}`, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c: Buffer) => (stdout += c.toString()));
    child.stderr.on('data', (c: Buffer) => (stderr += c.toString()));
    const code = await new Promise<number | null>((r) => child.on('close', r));
    assert.equal(code, 0, stderr);
    return JSON.parse(stdout.trim().split('\n').at(-1)!) as { connected: boolean; out: string[] };
  }

  test('counters are kept in Redis through the TLS connection', async () => {
    const { connected, out } = await fourRequests({ NODE_EXTRA_CA_CERTS: join(dir, 'cert.pem') });
    assert.equal(connected, true);
    assert.deepEqual(out, ['2', '1', '0', 'RATE_LIMITED']);
    assert.ok(tlsSessions >= 1, 'the client spoke TLS to the relay');
    const redis = new Redis(REDIS_URL);
    try {
      assert.ok((await redis.keys(`${keyPrefix}*acct_tls`)).length >= 1, 'the counter is a Redis key');
    } finally {
      await redis.quit();
    }
  });

  test('a certificate the process does not trust is refused: the node counts on its own, still limiting', async () => {
    const { connected, out } = await fourRequests({});
    assert.equal(connected, false);
    assert.deepEqual(out, ['2', '1', '0', 'RATE_LIMITED']);
  });
});
