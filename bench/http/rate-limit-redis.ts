// What counting one request costs with REDIS_URL set: the rate limiter's consume() against the local Redis, for a
// server key (the account's budget) and a public key under PUBLIC_KEY_RATE_SHARE and PUBLIC_KEY_RATE_PER_CLIENT (the
// client's, the public keys' and the account's budgets), one request at a time, so each figure is the round trips
// one request waits for. Limits are high enough that nothing is refused.
//   node --import tsx bench/http/rate-limit-redis.ts [--requests 5000] [--redis redis://127.0.0.1:6379]
import { randomBytes } from 'node:crypto';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { createRateLimiter } from '../../src/http/rate-limit.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '5000' }, redis: { type: 'string', default: 'redis://127.0.0.1:6379' } } });
const requests = Number(values.requests);
const prefix = `bench:rl:${randomBytes(4).toString('hex')}`;
const limiter = createRateLimiter({ redisUrl: values.redis!, keyPrefix: prefix, publicSharePercent: 50, publicPerClient: 1_000_000 });
await limiter.ready();
const limits = { minute: 10_000_000, day: 100_000_000 };
const auth = (keyType: 'server' | 'public') => ({ accountId: 'acct_bench', plan: 'enterprise' as const, limits, keyId: 'key_bench', keyType, scopes: new Set<string>() });

async function measure(keyType: 'server' | 'public') {
  const times: number[] = [];
  const a = auth(keyType);
  for (let i = 0; i < requests; i++) {
    const t = process.hrtime.bigint();
    await limiter.consume(a, '203.0.113.7');
    times.push(Number(process.hrtime.bigint() - t) / 1000);
  }
  times.sort((x, y) => x - y);
  const at = (q: number) => times[Math.min(times.length - 1, Math.floor(q * times.length))]!.toFixed(0);
  return { p50: at(0.5), p99: at(0.99) };
}

// Warm up (connection, script load), then measure.
await measure('server');
const server = await measure('server');
const pub = await measure('public');
console.log(JSON.stringify({ requests, serverKeyMicros: server, publicKeyMicros: pub }));
await limiter.close();
const redis = new Redis(values.redis!);
const keys = await redis.keys(`${prefix}*`);
if (keys.length) await redis.del(...keys);
await redis.quit();
