import { Redis } from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { AuthContext } from '../modules/accounts/accounts.schemas.js';
import { silentLogger, type Logger } from '../lib/log.js';
import { ApiError } from './errors.js';

export interface RateLimitOutcome {
  headers: Record<string, string>;
}

const WINDOWS = { minute: 60, day: 86_400 } as const;

/** How long a rate-limit command may wait for Redis before this node falls back to its own counters. */
const REDIS_COMMAND_TIMEOUT_MS = 500;
/** At most one "Redis is failing" warning per this period, however many requests fall back. */
const FALLBACK_LOG_INTERVAL_MS = 60_000;
/**
 * After a Redis command fails, this node counts on its own for this long before one request asks Redis again,
 * doubling while it keeps failing: a Redis that stalls (the connection open, nothing answering) would otherwise
 * cost every request the command timeout (measured: 506–635 ms per request for as long as the stall lasted).
 */
export const REDIS_PAUSE_MS = { first: 1_000, max: 30_000 } as const;

/**
 * Two fixed windows per account (minute and day). Counters live in memory, or in Redis when REDIS_URL is set
 * so that every API node draws on the same quota. If Redis fails or stops answering (a command gets
 * REDIS_COMMAND_TIMEOUT_MS), the request is counted in this node's memory instead of failing, and so are the
 * requests that follow, without asking Redis, until a pause (REDIS_PAUSE_MS) has passed and one request finds it
 * answering again. The operator is told when it fails and when it is back: limits are per node meanwhile.
 */
export function createRateLimiter(opts: {
  redisUrl: string | null;
  keyPrefix?: string;
  log?: Logger;
  /** The clock of the windows and of the pause after a Redis failure (tests). */
  now?: () => number;
  pauseMs?: { first: number; max: number };
}) {
  const log = opts.log ?? silentLogger;
  const clock = opts.now ?? Date.now;
  const pauses = opts.pauseMs ?? REDIS_PAUSE_MS;
  const redis = opts.redisUrl
    ? new Redis(opts.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1, commandTimeout: REDIS_COMMAND_TIMEOUT_MS, lazyConnect: false })
    : null;
  let lastFallbackLog = -Infinity;
  let fallingBack = false;
  const fellBack = (err: unknown) => {
    const now = clock();
    fallingBack = true;
    if (now - lastFallbackLog < FALLBACK_LOG_INTERVAL_MS) return;
    lastFallbackLog = now;
    log.warn({ err: (err as Error)?.message ?? String(err) }, 'Redis unavailable for rate limits: each node counts on its own until it is back');
  };
  /** While paused, requests do not ask Redis; once the pause is over, one request at a time does (`asking`). */
  let pause = 0;
  let pausedUntil = 0;
  let asking = false;
  const useRedis = () => {
    if (pause === 0) return true;
    if (asking || clock() < pausedUntil) return false;
    asking = true;
    return true;
  };
  const failed = (err: unknown) => {
    asking = false;
    const now = clock();
    // Requests that were already waiting when Redis stalled fail together: the pause they started is not theirs to
    // lengthen. Only the first failure, or the one request that asked after the pause, sets the next.
    if (now >= pausedUntil) {
      pause = pause === 0 ? pauses.first : Math.min(pause * 2, pauses.max);
      pausedUntil = now + pause;
    }
    fellBack(err);
  };
  const answered = () => {
    asking = false;
    pause = 0;
    if (!fallingBack) return;
    fallingBack = false;
    lastFallbackLog = -Infinity;
    log.info({}, 'Redis is back: rate limits are shared again');
  };
  redis?.on('error', (err) => fellBack(err)); // ioredis reconnects by itself
  // A new connection answers: no need to wait for the pause to end.
  redis?.on('ready', answered);
  const limiters = new Map<string, RateLimiterAbstract>();
  const prefix = opts.keyPrefix ?? 'parley:rl';

  const limiterFor = (window: keyof typeof WINDOWS, points: number) => {
    const id = `${window}:${points}`;
    let limiter = limiters.get(id);
    if (!limiter) {
      const common = { points, duration: WINDOWS[window], keyPrefix: `${prefix}:${window}` };
      limiter = redis ? new RateLimiterRedis({ ...common, storeClient: redis }) : new RateLimiterMemory(common);
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
  // Expired counters are dropped now and then, so accounts that stopped calling do not stay in memory (with
  // Redis, these are the counters of the times it failed).
  const sweeper = setInterval(() => {
    const now = clock();
    for (const counters of memory.values()) for (const [k, c] of counters) if (c.expiresAt <= now) counters.delete(k);
  }, 60_000).unref();

  /** The day window as it stands, not counting this request: used up (the next request would be refused) or not. */
  type DayState = { msBeforeNext: number; usedUp: boolean } | null;

  function outcome(
    auth: AuthContext,
    minute: { remaining: number; msBeforeNext: number; limited: boolean },
    day: () => { msBeforeNext: number; limited: boolean } | Promise<{ msBeforeNext: number; limited: boolean }>,
    dayState: () => DayState | Promise<DayState>,
    now: number,
  ) {
    const headers: Record<string, string> = {
      'x-ratelimit-limit': String(auth.limits.minute),
      'x-ratelimit-remaining': String(Math.max(0, minute.remaining)),
      'x-ratelimit-reset': String(Math.ceil((now + minute.msBeforeNext) / 1000)),
    };
    const refuse = (window: 'minute' | 'day', msBeforeNext: number) =>
      new ApiError('RATE_LIMITED', `rate limit of ${auth.limits[window]} requests per ${window} exceeded`, {
        ...headers,
        'retry-after': String(Math.max(1, Math.ceil(msBeforeNext / 1000))),
      });
    if (minute.limited) {
      // A refusal by the minute window is not counted in the day's. When the day is used up too, waiting for the
      // minute to reset would only earn another 429: Retry-After points at the day's reset instead.
      const refuseMinute = (d: DayState): never => {
        throw d?.usedUp ? refuse('day', Math.max(d.msBeforeNext, minute.msBeforeNext)) : refuse('minute', minute.msBeforeNext);
      };
      const d = dayState();
      return d instanceof Promise ? d.then(refuseMinute) : refuseMinute(d);
    }
    const dayLimited = (d: { msBeforeNext: number; limited: boolean }): RateLimitOutcome => {
      if (d.limited) throw refuse('day', d.msBeforeNext);
      return { headers };
    };
    const d = day();
    return d instanceof Promise ? d.then(dayLimited) : dayLimited(d);
  }

  /** The day window counted by this node, read without counting. */
  function dayHere(auth: AuthContext, now: number): DayState {
    const c = memory.get(`day:${auth.limits.day}`)?.get(auth.accountId);
    return c && c.expiresAt > now ? { msBeforeNext: c.expiresAt - now, usedUp: c.consumed >= auth.limits.day } : null;
  }

  /** Both windows counted by this node alone (no Redis, or Redis failing). */
  function consumeHere(auth: AuthContext) {
    const now = clock();
    return outcome(
      auth,
      takeNow('minute', auth.limits.minute, auth.accountId, now),
      () => takeNow('day', auth.limits.day, auth.accountId, now),
      () => dayHere(auth, now),
      now,
    );
  }

  return {
    /**
     * Consumes one request from both windows; throws 429 RATE_LIMITED past either. Synchronous (returns the
     * outcome itself) without Redis, a promise with it.
     */
    consume(auth: AuthContext): RateLimitOutcome | Promise<RateLimitOutcome> {
      if (!redis || !useRedis()) return consumeHere(auth);
      return (async () => {
        let m: Awaited<ReturnType<typeof take>>;
        try {
          m = await take('minute', auth.limits.minute, auth.accountId);
        } catch (err) {
          // Redis failed or timed out: this node's own counters answer (see createRateLimiter).
          failed(err);
          return consumeHere(auth);
        }
        answered();
        const minute = { remaining: m.res.remainingPoints, msBeforeNext: m.res.msBeforeNext, limited: m.limited };
        return outcome(
          auth,
          minute,
          async () => {
            try {
              const d = await take('day', auth.limits.day, auth.accountId);
              return { msBeforeNext: d.res.msBeforeNext, limited: d.limited };
            } catch (err) {
              failed(err);
              return takeNow('day', auth.limits.day, auth.accountId, clock());
            }
          },
          async () => {
            try {
              const d = await limiterFor('day', auth.limits.day).get(auth.accountId);
              return d ? { msBeforeNext: d.msBeforeNext, usedUp: d.consumedPoints >= auth.limits.day } : null;
            } catch (err) {
              failed(err);
              return dayHere(auth, clock());
            }
          },
          clock(),
        );
      })();
    },
    /** Resolves once Redis is connected (at once without Redis); until then this node's counters answer. */
    ready(): Promise<void> {
      if (!redis || redis.status === 'ready') return Promise.resolve();
      return new Promise((resolve) => redis.once('ready', () => resolve()));
    },
    async close() {
      clearInterval(sweeper);
      if (redis) await redis.quit().catch(() => redis.disconnect());
    },
  };
}

export type RateLimiter = ReturnType<typeof createRateLimiter>;
