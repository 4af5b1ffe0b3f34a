import { Redis } from 'ioredis';
import type { AuthContext } from '../modules/accounts/accounts.schemas.js';
import { silentLogger, type Logger } from '../lib/log.js';
import { ApiError } from './errors.js';

export interface RateLimitOutcome {
  headers: Record<string, string>;
}

const WINDOWS = { minute: 60, day: 86_400 } as const;

/**
 * The address a client is counted under: an IPv4 address as it is (an IPv4-mapped IPv6 one as IPv4), an IPv6 one by
 * its first 64 bits, since one subscriber usually gets a whole /64 and could otherwise use a new address per request.
 */
export function clientBlock(ip: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(ip);
  if (mapped) return mapped[1]!;
  if (!ip.includes(':')) return ip;
  const [head = '', tail = ''] = ip.toLowerCase().split('::');
  const left = head ? head.split(':') : [];
  const right = ip.includes('::') ? (tail ? tail.split(':') : []) : [];
  const groups = ip.includes('::') ? [...left, ...Array<string>(Math.max(0, 8 - left.length - right.length)).fill('0'), ...right] : left;
  return `${groups.slice(0, 4).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/64`;
}

/**
 * Counts one request in a chain of budgets, in order, in one round trip. KEYS: each budget's minute and day counters;
 * ARGV: the number of budgets, then each one's minute and day limits (a day limit of 0: no day window). Each counter is
 * a fixed window that starts at its first request (SET NX with the window's expiry, then INCR), as the
 * rate-limiter-flexible counters these replace, under the same keys, so nodes of both versions share them. The minute
 * counts every request; the day counts only what the minute admitted (refused by the minute, the day is read, not
 * counted); a budget that refuses ends the chain, so the budgets after it do not count the request. Answers Redis's
 * clock (Unix ms), then per budget reached: the minute's count and milliseconds left, then (with a day window) the
 * day's count and milliseconds left, or -1, -1 when refused by the minute and no day counter exists yet. A window's
 * reset is told by Redis's clock, so every node names the same second whatever its own clock says.
 */
const CHAIN_SCRIPT = `
local function count(key, seconds)
  redis.call('set', key, 0, 'EX', seconds, 'NX')
  local n = redis.call('incrby', key, 1)
  local ttl = redis.call('pttl', key)
  if ttl == -1 then
    redis.call('expire', key, seconds)
    ttl = 1000 * seconds
  end
  return n, ttl
end
local time = redis.call('time')
local out = {tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)}
for i = 1, tonumber(ARGV[1]) do
  local minuteLimit, dayLimit = tonumber(ARGV[2 * i]), tonumber(ARGV[2 * i + 1])
  local m, mttl = count(KEYS[2 * i - 1], ${WINDOWS.minute})
  out[#out + 1] = m
  out[#out + 1] = mttl
  if m > minuteLimit then
    if dayLimit > 0 then
      local d = redis.call('get', KEYS[2 * i])
      if d then
        out[#out + 1] = tonumber(d)
        out[#out + 1] = redis.call('pttl', KEYS[2 * i])
      else
        out[#out + 1] = -1
        out[#out + 1] = -1
      end
    end
    return out
  end
  if dayLimit > 0 then
    local d, dttl = count(KEYS[2 * i], ${WINDOWS.day})
    out[#out + 1] = d
    out[#out + 1] = dttl
    if d > dayLimit then return out end
  end
end
return out
`;

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
  /**
   * The percentage of each of an account's windows that requests with its public (`pk_`) keys may use
   * (PUBLIC_KEY_RATE_SHARE); 100, the default, sets no separate budget. See `consume`.
   */
  publicSharePercent?: number;
  /**
   * Requests per minute one client address may make with an account's public keys (PUBLIC_KEY_RATE_PER_CLIENT); 0,
   * the default, sets no such budget. See `consume`.
   */
  publicPerClient?: number;
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
  redis?.defineCommand('parleyRateChain', { lua: CHAIN_SCRIPT });
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
  /** Requests refused (429), by budget and window, since start (the metrics endpoint reads them). */
  const refusals = { account: { minute: 0, day: 0 }, public: { minute: 0, day: 0 }, client: { minute: 0, day: 0 } };
  const prefix = opts.keyPrefix ?? 'parley:rl';

  /**
   * Without Redis (or while it fails) the counters are plain fixed windows kept here, consumed synchronously (a
   * library's in-memory limiter, used before, answered through a promise per window, which showed in the benchmark
   * profile). As the Redis counters (CHAIN_SCRIPT), a window starts at an account's first request and every request the
   * minute sees counts; here a new limit also starts new counters.
   */
  type Counters = Map<string, { consumed: number; expiresAt: number }>;
  /** Per window, the counters of each limit, by budget key. */
  const memory = { minute: new Map<number, Counters>(), day: new Map<number, Counters>() };
  function takeNow(window: keyof typeof WINDOWS, points: number, key: string, now: number) {
    let counters = memory[window].get(points);
    if (!counters) memory[window].set(points, (counters = new Map()));
    let c = counters.get(key);
    if (!c || c.expiresAt <= now) counters.set(key, (c = { consumed: 0, expiresAt: now + WINDOWS[window] * 1000 }));
    c.consumed += 1;
    return { remaining: Math.max(0, points - c.consumed), msBeforeNext: c.expiresAt - now, limited: c.consumed > points };
  }
  // Expired counters are dropped now and then, so accounts that stopped calling do not stay in memory (with
  // Redis, these are the counters of the times it failed).
  const sweeper = setInterval(() => {
    const now = clock();
    for (const byLimit of [memory.minute, memory.day]) {
      for (const counters of byLimit.values()) for (const [k, c] of counters) if (c.expiresAt <= now) counters.delete(k);
    }
  }, 60_000).unref();

  /**
   * A pair of windows counted under one key: the account's (every request), its public keys' share of them, or one
   * client address's allowance with its public keys. `name` and `note` word the 429.
   */
  interface Budget {
    kind: 'account' | 'public' | 'client';
    key: string;
    /** `day: null`: a budget with a minute window only (nothing is counted for a day). */
    limits: { minute: number; day: number | null };
    name: string;
    note: string;
    /** X-RateLimit-Limit, written once. */
    limitHeader?: string;
  }

  /** The day window as it stands, not counting this request: used up (the next request would be refused) or not. */
  type DayState = { msBeforeNext: number; usedUp: boolean } | null;

  /**
   * What one budget's windows say of this request: its headers, or a 429. `day` counts it in the day window (asked only
   * when the minute admitted it); `dayState` reads the day without counting (asked only when the minute refused it).
   * Null for a budget without a day window.
   */
  function outcome(
    budget: Budget,
    minute: { remaining: number; msBeforeNext: number; limited: boolean },
    day: (() => { msBeforeNext: number; limited: boolean }) | null,
    dayState: (() => DayState) | null,
    now: number,
  ): RateLimitOutcome {
    const headers: Record<string, string> = {
      'x-ratelimit-limit': (budget.limitHeader ??= String(budget.limits.minute)),
      'x-ratelimit-remaining': String(Math.max(0, minute.remaining)),
      'x-ratelimit-reset': String(Math.ceil((now + minute.msBeforeNext) / 1000)),
    };
    const refuse = (window: 'minute' | 'day', msBeforeNext: number) => {
      refusals[budget.kind][window]++;
      return new ApiError('RATE_LIMITED', `${budget.name} of ${budget.limits[window]} requests per ${window} exceeded${budget.note}`, {
        ...headers,
        'retry-after': String(Math.max(1, Math.ceil(msBeforeNext / 1000))),
      });
    };
    if (minute.limited) {
      // A refusal by the minute window is not counted in the day's. When the day is used up too, waiting for the
      // minute to reset would only earn another 429: Retry-After points at the day's reset instead.
      const d = dayState ? dayState() : null;
      throw d?.usedUp ? refuse('day', Math.max(d.msBeforeNext, minute.msBeforeNext)) : refuse('minute', minute.msBeforeNext);
    }
    const d = day?.();
    if (d?.limited) throw refuse('day', d.msBeforeNext);
    return { headers };
  }

  /** The day window counted by this node, read without counting. */
  function dayHere(budget: Budget, day: number, now: number): DayState {
    const c = memory.day.get(day)?.get(budget.key);
    return c && c.expiresAt > now ? { msBeforeNext: c.expiresAt - now, usedUp: c.consumed >= day } : null;
  }

  /** Both windows counted by this node alone (no Redis, or Redis failing). */
  function consumeHere(budget: Budget) {
    const now = clock();
    const day = budget.limits.day;
    return outcome(
      budget,
      takeNow('minute', budget.limits.minute, budget.key, now),
      day === null ? null : () => takeNow('day', day, budget.key, now),
      day === null ? null : () => dayHere(budget, day, now),
      now,
    );
  }

  /**
   * Counts a chain of budgets in Redis with one command (CHAIN_SCRIPT): a round trip per request, where a command per
   * window and budget took two for a server key and up to five for a public one. Answers the script's figures, as
   * `fromRedis` reads them; throws when Redis fails or does not answer in time.
   */
  async function countInRedis(client: Redis, chain: Budget[]): Promise<number[]> {
    const keys = chain.flatMap((b) => [`${prefix}:minute:${b.key}`, `${prefix}:day:${b.key}`]);
    const limits = chain.flatMap((b) => [b.limits.minute, b.limits.day ?? 0]);
    return (await (client as Redis & { parleyRateChain(...args: (string | number)[]): Promise<number[]> }).parleyRateChain(keys.length, ...keys, chain.length, ...limits)) as number[];
  }

  /** The outcome of each budget from the script's figures, read in order (the budgets it did not reach have none). */
  function fromRedis(figures: number[], now: number) {
    let at = 0;
    const next = () => Number(figures[at++]);
    return (budget: Budget) => {
      const consumed = next();
      const msBeforeNext = next();
      const minute = { remaining: Math.max(0, budget.limits.minute - consumed), msBeforeNext, limited: consumed > budget.limits.minute };
      const day = budget.limits.day;
      if (day === null) return outcome(budget, minute, null, null, now);
      const dayConsumed = next();
      const dayMs = next();
      // Refused by the minute: the day as it stands (-1: no counter yet), not counted. Else the day counted.
      const state: DayState = dayConsumed === -1 ? null : { msBeforeNext: dayMs, usedUp: dayConsumed >= day };
      return outcome(budget, minute, () => ({ msBeforeNext: dayMs, limited: dayConsumed > day }), () => state, now);
    };
  }

  /** Counts the request in each budget of the chain, in Redis when it is set and answering, else in this node's memory. */
  function consumeAll(chain: Budget[]): RateLimitOutcome | Promise<RateLimitOutcome> {
    if (!redis || !useRedis()) return consumeChain(chain, 0, null, consumeHere);
    return countInRedis(redis, chain).then(
      (figures) => {
        answered();
        return consumeChain(chain, 0, null, fromRedis(figures.slice(1), Number(figures[0])));
      },
      (err: unknown) => {
        // Redis failed or timed out: this node's own counters answer (see createRateLimiter).
        failed(err);
        return consumeChain(chain, 0, null, consumeHere);
      },
    );
  }

  const share = opts.publicSharePercent ?? 100;
  const accountBudget = (auth: AuthContext): Budget => ({ kind: 'account', key: auth.accountId, limits: auth.limits, name: 'rate limit', note: '' });
  /**
   * The chain of a request counted by its account alone (server keys, and public keys without budgets of their own),
   * made once per key's AuthContext (the key cache hands out the same one while it remembers the key).
   */
  const accountOnly = new WeakMap<AuthContext, Budget[]>();
  const accountChain = (auth: AuthContext) => {
    let chain = accountOnly.get(auth);
    if (!chain) accountOnly.set(auth, (chain = [accountBudget(auth)]));
    return chain;
  };
  /** Public keys' own windows: the share of the account's, at least one request each. */
  const publicBudget = (auth: AuthContext): Budget => ({
    kind: 'public',
    key: `public:${auth.accountId}`,
    limits: { minute: Math.max(1, Math.floor((auth.limits.minute * share) / 100)), day: Math.max(1, Math.floor((auth.limits.day * share) / 100)) },
    name: 'public-key rate limit',
    note: ` (public keys may use ${share}% of the account's ${auth.limits.minute} per minute and ${auth.limits.day} per day)`,
  });

  const perClient = opts.publicPerClient ?? 0;
  /**
   * One client address's allowance with the account's public keys: per minute only. (It had a day window of 1,440
   * minutes' worth, which never bound and cost a counter per request: one more Redis round trip.) IPv6 addresses
   * count per /64, the block one subscriber usually gets.
   */
  const clientBudget = (auth: AuthContext, client: string): Budget => ({
    kind: 'client',
    key: `client:${auth.accountId}:${clientBlock(client)}`,
    limits: { minute: perClient, day: null },
    name: 'rate limit',
    note: ' for one client of public keys',
  });

  /**
   * What a public request's headers say once several budgets counted it: the first budget's limit (the caller's own:
   * its client allowance, else the public share), the lowest remainder, and the reset of the window it comes from.
   */
  function mergeHeaders(first: Record<string, string | number>, later: Record<string, string | number>) {
    const left = Number(later['x-ratelimit-remaining']) < Number(first['x-ratelimit-remaining']) ? later : first;
    return {
      ...later,
      ...first,
      'x-ratelimit-remaining': String(left['x-ratelimit-remaining']),
      'x-ratelimit-reset': String(left['x-ratelimit-reset']),
      ...(later['retry-after'] !== undefined ? { 'retry-after': String(later['retry-after']) } : {}),
    };
  }

  /**
   * Counts the request in each budget in turn; the first to refuse answers the 429 (with the headers merged so far),
   * and the budgets after it do not count it.
   */
  function consumeChain(
    chain: Budget[],
    i: number,
    sofar: Record<string, string | number> | null,
    count: (budget: Budget) => RateLimitOutcome,
  ): RateLimitOutcome {
    let o: RateLimitOutcome;
    try {
      o = count(chain[i]!);
    } catch (err) {
      if (sofar && err instanceof ApiError) throw new ApiError(err.code, err.message, mergeHeaders(sofar, err.headers));
      throw err;
    }
    if (!sofar && i + 1 === chain.length) return o;
    const headers = sofar ? mergeHeaders(sofar, o.headers) : o.headers;
    return i + 1 < chain.length ? consumeChain(chain, i + 1, headers, count) : { headers: headers as Record<string, string> };
  }

  return {
    /**
     * Consumes one request from both windows; throws 429 RATE_LIMITED past either. Synchronous (returns the
     * outcome itself) without Redis, a promise with it. `client` is the caller's address (public keys only).
     */
    consume(auth: AuthContext, client?: string): RateLimitOutcome | Promise<RateLimitOutcome> {
      if (auth.keyType !== 'public' || (share >= 100 && (perClient === 0 || !client))) return consumeAll(accountChain(auth));
      // Public keys sit in web pages, where anyone can spend them: their requests are counted first in budgets of
      // their own (one client's allowance, the public keys' share), and those they refuse never reach the account's
      // windows, so other customers and the owner's server keys keep the rest.
      const chain: Budget[] = [];
      if (perClient > 0 && client) chain.push(clientBudget(auth, client));
      if (share < 100) chain.push(publicBudget(auth));
      chain.push(accountBudget(auth));
      return consumeAll(chain);
    },
    /** Requests refused since start, by budget (the account's, its public keys' share) and window. */
    refusals: refusals as Readonly<Record<'account' | 'public' | 'client', Readonly<Record<'minute' | 'day', number>>>>,
    /** Whether REDIS_URL is set. */
    shared: redis !== null,
    /** With Redis: whether this node is counting on its own because Redis failed (until it answers again). */
    get fallingBack() {
      return fallingBack;
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
