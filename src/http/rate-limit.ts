import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { AuthContext } from '../modules/accounts/accounts.schemas.js';
import { ApiError } from './errors.js';

export interface RateLimitOutcome {
  headers: Record<string, string>;
}

const WINDOWS = { minute: 60, day: 86_400 } as const;

/**
 * Two fixed windows per account (minute and day). Counters live in memory, or in Redis when REDIS_URL is set
 * so that every API node draws on the same quota; if Redis stops answering, an in-memory limiter takes over
 * for that node rather than failing requests.
 */
export function createRateLimiter(opts: { redisUrl: string | null; keyPrefix?: string }) {
  const redis = opts.redisUrl
    ? new Redis(opts.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, lazyConnect: false })
    : null;
  redis?.on('error', () => {
    /* reported through the insurance limiter taking over; ioredis reconnects by itself */
  });
  const limiters = new Map<string, RateLimiterAbstract>();
  const prefix = opts.keyPrefix ?? 'parley:rl';

  const limiterFor = (window: keyof typeof WINDOWS, points: number) => {
    const id = `${window}:${points}`;
    let limiter = limiters.get(id);
    if (!limiter) {
      const common = { points, duration: WINDOWS[window], keyPrefix: `${prefix}:${window}` };
      limiter = redis
        ? new RateLimiterRedis({ ...common, storeClient: redis, insuranceLimiter: new RateLimiterMemory(common) })
        : new RateLimiterMemory(common);
      limiters.set(id, limiter);
    }
    return limiter;
  };

  async function take(window: keyof typeof WINDOWS, points: number, key: string): Promise<{ res: RateLimiterRes; limited: boolean }> {
    try {
      return { res: await limiterFor(window, points).consume(key), limited: false };
    } catch (e) {
      if (e instanceof RateLimiterRes) return { res: e, limited: true };
      throw e;
    }
  }

  /**
   * Without Redis the counters are plain fixed windows kept here, consumed synchronously: the library's
   * in-memory limiter answers through a promise per window, two per request, which showed in the benchmark
   * profile. Same semantics as its RateLimiterMemory: a window starts at an account's first request, every
   * request (refused ones too) counts, and a new limit starts new counters.
   */
  const memory = new Map<string, Map<string, { consumed: number; expiresAt: number }>>();
  function takeNow(window: keyof typeof WINDOWS, points: number, key: string, now: number) {
    const id = `${window}:${points}`;
    let counters = memory.get(id);
    if (!counters) memory.set(id, (counters = new Map()));
    let c = counters.get(key);
    if (!c || c.expiresAt <= now) counters.set(key, (c = { consumed: 0, expiresAt: now + WINDOWS[window] * 1000 }));
    c.consumed += 1;
    return { remaining: Math.max(0, points - c.consumed), msBeforeNext: c.expiresAt - now, limited: c.consumed > points };
  }
  // Expired counters are dropped now and then, so accounts that stopped calling do not stay in memory.
  const sweeper = redis
    ? null
    : setInterval(() => {
        const now = Date.now();
        for (const counters of memory.values()) for (const [k, c] of counters) if (c.expiresAt <= now) counters.delete(k);
      }, 60_000).unref();

  function outcome(
    auth: AuthContext,
    minute: { remaining: number; msBeforeNext: number; limited: boolean },
    day: () => { msBeforeNext: number; limited: boolean } | Promise<{ msBeforeNext: number; limited: boolean }>,
    now: number,
  ) {
    const headers: Record<string, string> = {
      'x-ratelimit-limit': String(auth.limits.minute),
      'x-ratelimit-remaining': String(Math.max(0, minute.remaining)),
      'x-ratelimit-reset': String(Math.ceil((now + minute.msBeforeNext) / 1000)),
    };
    if (minute.limited) {
      throw new ApiError('RATE_LIMITED', `rate limit of ${auth.limits.minute} requests per minute exceeded`, {
        ...headers,
        'retry-after': String(Math.max(1, Math.ceil(minute.msBeforeNext / 1000))),
      });
    }
    const dayLimited = (d: { msBeforeNext: number; limited: boolean }): RateLimitOutcome => {
      if (d.limited) {
        throw new ApiError('RATE_LIMITED', `rate limit of ${auth.limits.day} requests per day exceeded`, {
          ...headers,
          'retry-after': String(Math.max(1, Math.ceil(d.msBeforeNext / 1000))),
        });
      }
      return { headers };
    };
    const d = day();
    return d instanceof Promise ? d.then(dayLimited) : dayLimited(d);
  }

  return {
    /**
     * Consumes one request from both windows; throws 429 RATE_LIMITED past either. Synchronous (returns the
     * outcome itself) without Redis, a promise with it.
     */
    consume(auth: AuthContext): RateLimitOutcome | Promise<RateLimitOutcome> {
      if (!redis) {
        const now = Date.now();
        const minute = takeNow('minute', auth.limits.minute, auth.accountId, now);
        return outcome(auth, minute, () => takeNow('day', auth.limits.day, auth.accountId, now), now);
      }
      return (async () => {
        const m = await take('minute', auth.limits.minute, auth.accountId);
        const minute = { remaining: m.res.remainingPoints, msBeforeNext: m.res.msBeforeNext, limited: m.limited };
        return outcome(
          auth,
          minute,
          async () => {
            const d = await take('day', auth.limits.day, auth.accountId);
            return { msBeforeNext: d.res.msBeforeNext, limited: d.limited };
          },
          Date.now(),
        );
      })();
    },
    /** Resolves once Redis is connected (at once without Redis); until then the insurance limiter answers. */
    ready(): Promise<void> {
      if (!redis || redis.status === 'ready') return Promise.resolve();
      return new Promise((resolve) => redis.once('ready', () => resolve()));
    },
    async close() {
      if (sweeper) clearInterval(sweeper);
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
