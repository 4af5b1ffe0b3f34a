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

  return {
    /** Consumes one request from both windows; throws 429 RATE_LIMITED past either. */
    async consume(auth: AuthContext): Promise<RateLimitOutcome> {
      const minute = await take('minute', auth.limits.minute, auth.accountId);
      const headers: Record<string, string> = {
        'x-ratelimit-limit': String(auth.limits.minute),
        'x-ratelimit-remaining': String(Math.max(0, minute.res.remainingPoints)),
        'x-ratelimit-reset': String(Math.ceil((Date.now() + minute.res.msBeforeNext) / 1000)),
      };
      if (minute.limited) {
        throw new ApiError('RATE_LIMITED', `rate limit of ${auth.limits.minute} requests per minute exceeded`, {
          ...headers,
          'retry-after': String(Math.max(1, Math.ceil(minute.res.msBeforeNext / 1000))),
        });
      }
      const day = await take('day', auth.limits.day, auth.accountId);
      if (day.limited) {
        throw new ApiError('RATE_LIMITED', `rate limit of ${auth.limits.day} requests per day exceeded`, {
          ...headers,
          'retry-after': String(Math.max(1, Math.ceil(day.res.msBeforeNext / 1000))),
        });
      }
      return { headers };
    },
    /** Resolves once Redis is connected (at once without Redis); until then the insurance limiter answers. */
    ready(): Promise<void> {
      if (!redis || redis.status === 'ready') return Promise.resolve();
      return new Promise((resolve) => redis.once('ready', () => resolve()));
    },
    async close() {
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
