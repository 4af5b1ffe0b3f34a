import { isIP } from 'node:net';
import { parseDuration } from './lib/duration.js';
import { DEFAULT_RETRY_DELAYS, parseRetryDelays } from './modules/webhooks/retry.js';

export interface Config {
  port: number;
  host: string;
  databaseUrl: string;
  /** SQLite's commit durability: `full` survives an OS crash or power loss, `normal` only a process crash. */
  sqliteSynchronous: 'full' | 'normal';
  /** PostgreSQL: a query with no answer after this long fails and its connection is closed; 0 turns it off. */
  databaseQueryTimeoutMs: number;
  redisUrl: string | null;
  /** Prefix of the rate-limit counters' Redis keys, so several deployments can share one Redis. */
  redisKeyPrefix: string;
  /** Percentage of each of an account's rate-limit windows its public (pk_) keys may use; 100 sets no separate budget. */
  publicKeyRateShare: number;
  /** Requests per minute one client address may make with an account's public keys; 0 sets no such budget. */
  publicKeyRatePerClient: number;
  /** Fastify's trustProxy: whether (or which) proxies' X-Forwarded-For names the client. */
  trustProxy: boolean | number | string[];
  webhookRetryDelaysMs: number[];
  /**
   * After a webhook's secret changes, how long its deliveries still carry a Standard Webhooks signature made with the
   * previous secret too (0: not at all), so a receiver may switch to the new secret at any moment within it.
   */
  webhookSecretOverlapMs: number;
  webhookTimeoutMs: number;
  webhookAllowPrivateUrls: boolean;
  /** How many webhooks (enabled or not) one account may have: each event writes a delivery per subscribed webhook. */
  webhookMaxPerAccount: number;
  conversationIdleTimeoutMs: number;
  /** Conversations that ended longer ago than this are erased by the worker; 0 keeps them. */
  conversationRetentionMs: number;
  /** Finished webhook deliveries and emitted events older than this are deleted by the worker; 0 keeps them. */
  deliveryRetentionMs: number;
  workerPollIntervalMs: number;
  rundownIntervalMs: number;
  /**
   * How many complete windows before the last one each scheduler run also looks at, making the scheduled rundowns a
   * worker missed (down over a window's end); 0 makes the last one's only.
   */
  rundownBackfill: number;
  /** How long a verified API key is remembered in memory; 0 turns the cache off. */
  authCacheTtlMs: number;
  logLevel: string;
  /**
   * The Prometheus endpoint (GET /metrics), off (null) unless METRICS_TOKEN is set; `port`: a listener of its own
   * as well (the only one a standalone worker has), null for none.
   */
  metrics: { token: string; port: number | null; host: string } | null;
  llm: { baseUrl: string; apiKey: string | null; model: string; timeoutMs: number } | null;
  /**
   * Tests only (TEST_ACCOUNT_DELETE_STOP_AFTER): `parley accounts delete` stops itself (SIGSTOP) once this many of its
   * chunks have committed, so a test can look at the database part way and kill it at a known point; null otherwise.
   */
  testAccountDeleteStopAfter: number | null;
}

/**
 * RUNDOWN_BACKFILL's ceiling. Every scheduler run (about once a minute) checks each account against this many windows
 * (an index probe each) whether or not anything is missing, about half a second per run on PostgreSQL for 100
 * accounts at 1000, and one run after a long outage makes up to this many rundowns per account. 1000 is close to
 * three years of daily windows or six weeks of hourly ones, past which a digest is history rather than news
 * (POST /v1/rundowns still makes any period).
 */
export const MAX_RUNDOWN_BACKFILL = 1000;

/** Node's setTimeout honours at most 2^31-1 ms (~596h); 500h leaves room for the margins added to timeouts. */
const MAX_TIMER_MS = 500 * 3_600_000;

/** `http://` or `https://` (as written, no leading space), a host, and a URL the WHATWG parser reads. */
function isHttpUrl(text: string): boolean {
  if (!/^https?:\/\/[^/\s]+/.test(text)) return false;
  try {
    new URL(text);
    return true;
  } catch {
    return false;
  }
}

/** A host name or an IPv4/IPv6 address; anything else could only fail later, at listen, less clearly. */
const isHostName = (text: string) =>
  /^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*|[0-9A-Fa-f:.]*:[0-9A-Fa-f:.]*)$/.test(text);

/** Error messages end up in logs and terminals: a URL's password never does. */
export function withoutPassword(url: string): string {
  return url.replace(/^([a-z][a-z0-9+.-]*:\/\/[^:@/]*):[^@/]*@/i, '$1:***@');
}

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`invalid configuration:\n  ${problems.join('\n  ')}`);
  }
}

/**
 * The only place that reads the environment: everything else receives a Config, so tests can build one
 * without touching process.env and a bad deployment fails at start naming every bad variable at once.
 */
export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  const problems: string[] = [];
  const str = (name: string, fallback: string) => {
    const v = env[name];
    return v === undefined || v === '' ? fallback : v;
  };
  const int = (name: string, fallback: number, min: number, max: number) => {
    const raw = str(name, String(fallback));
    // Plain decimal digits: Number() would also take " 80", "0x50" and "8e1".
    const n = /^\d+$/.test(raw) ? Number(raw) : NaN;
    if (!Number.isInteger(n) || n < min || n > max) {
      problems.push(`${name}=${JSON.stringify(raw)}: must be an integer from ${min} to ${max}`);
      return fallback;
    }
    return n;
  };
  const duration = (name: string, fallback: string, opts: { allowZero?: boolean; timer?: boolean } = {}) => {
    const raw = str(name, fallback);
    const ms = parseDuration(raw);
    if (ms === null || ms < 0 || (ms === 0 && !opts.allowZero)) {
      problems.push(`${name}=${JSON.stringify(raw)}: must be a ${opts.allowZero ? 'duration (0 turns it off)' : 'positive duration'} such as 250ms, 30s, 5m or 2h`);
      return parseDuration(fallback)!;
    }
    // Node's timers fire at once past 2^31-1 ms (with a warning each time): a "600h" timeout would time out
    // every delivery, a "600h" poll interval would spin.
    if (opts.timer && ms > MAX_TIMER_MS) {
      problems.push(`${name}=${JSON.stringify(raw)}: must be at most 500h`);
      return parseDuration(fallback)!;
    }
    return ms;
  };
  const bool = (name: string, fallback: boolean) => {
    const raw = str(name, String(fallback)).toLowerCase();
    if (['true', '1', 'yes'].includes(raw)) return true;
    if (['false', '0', 'no'].includes(raw)) return false;
    problems.push(`${name}=${JSON.stringify(raw)}: must be true or false`);
    return fallback;
  };

  // Checked whether or not LLM_BASE_URL is set: a typo must not wait until the day the endpoint is switched on.
  const llmTimeoutMs = duration('LLM_TIMEOUT', '10s', { timer: true });
  const databaseUrl = str('DATABASE_URL', 'sqlite:./data/parley.db');
  if (!/^(sqlite:|postgres(ql)?:\/\/)/.test(databaseUrl)) {
    problems.push(`DATABASE_URL=${JSON.stringify(withoutPassword(databaseUrl))}: must start with sqlite: or postgres://`);
  } else if (/^sqlite:\s*$/.test(databaseUrl)) {
    // better-sqlite3 opens an empty path as a private in-memory database: everything written would vanish at exit
    // (typically `sqlite:$UNSET_VARIABLE`). An in-memory database is asked for by name.
    problems.push(`DATABASE_URL=${JSON.stringify(databaseUrl)}: names no file (sqlite:./data/parley.db; sqlite::memory: for a throwaway database)`);
  }
  const sqliteSynchronous = str('SQLITE_SYNCHRONOUS', 'full').toLowerCase();
  if (sqliteSynchronous !== 'full' && sqliteSynchronous !== 'normal') {
    problems.push(`SQLITE_SYNCHRONOUS=${JSON.stringify(sqliteSynchronous)}: must be full or normal`);
  }
  const redisUrl = str('REDIS_URL', '') || null;
  if (redisUrl && !/^rediss?:\/\//.test(redisUrl)) {
    problems.push(`REDIS_URL=${JSON.stringify(withoutPassword(redisUrl))}: must start with redis:// or rediss://`);
  }

  const redisKeyPrefix = str('REDIS_KEY_PREFIX', 'parley:rl');
  if (!/^[\x21-\x7e]{1,100}$/.test(redisKeyPrefix)) {
    problems.push(`REDIS_KEY_PREFIX=${JSON.stringify(redisKeyPrefix)}: must be 1 to 100 printable ASCII characters without spaces`);
  }
  // A percentage, written 50 or 50%: a fraction (0.5) would read as half a percent to some and half to others.
  const rawShare = str('PUBLIC_KEY_RATE_SHARE', '100');
  const shareMatch = /^(\d{1,3})%?$/.exec(rawShare);
  const publicKeyRateShare = shareMatch ? Number(shareMatch[1]) : NaN;
  if (!(publicKeyRateShare >= 1 && publicKeyRateShare <= 100)) {
    problems.push(`PUBLIC_KEY_RATE_SHARE=${JSON.stringify(rawShare)}: must be a percentage from 1 to 100, such as 50%`);
  }

  // Which proxies may say who the client is (X-Forwarded-For): none by default, since a client could otherwise claim
  // any address; `true` (every hop: only behind a proxy that overwrites the header), a hop count, or addresses/CIDRs.
  const rawTrust = str('TRUST_PROXY', 'false').trim();
  let trustProxy: boolean | number | string[] = false;
  if (/^(true|false)$/i.test(rawTrust)) trustProxy = rawTrust.toLowerCase() === 'true';
  else if (/^\d{1,2}$/.test(rawTrust)) trustProxy = Number(rawTrust);
  else {
    const list = rawTrust.split(',').map((e) => e.trim());
    const bad = list.find((e) => {
      const [addr = '', bits, extra] = e.split('/');
      const v = isIP(addr);
      return v === 0 || extra !== undefined || (bits !== undefined && !(/^\d{1,3}$/.test(bits) && Number(bits) <= (v === 4 ? 32 : 128)));
    });
    if (bad !== undefined) problems.push(`TRUST_PROXY=${JSON.stringify(rawTrust)}: must be true, false, a number of proxy hops, or addresses and CIDR blocks separated by commas (${JSON.stringify(bad)} is none of these)`);
    else trustProxy = list;
  }

  const rawDelays = str('WEBHOOK_RETRY_DELAYS', DEFAULT_RETRY_DELAYS);
  let webhookRetryDelaysMs: number[] = [];
  try {
    webhookRetryDelaysMs = parseRetryDelays(rawDelays);
    // The spec's schedule is five attempts, and the fifth failure disables the webhook: a shorter list would
    // disable it early, a longer one retry past the point the spec stops.
    if (webhookRetryDelaysMs.length !== 5) {
      problems.push(`WEBHOOK_RETRY_DELAYS: must list 5 delays, one before each of attempts 1..5 (got ${webhookRetryDelaysMs.length})`);
      webhookRetryDelaysMs = parseRetryDelays(DEFAULT_RETRY_DELAYS);
    }
  } catch (err) {
    problems.push((err as Error).message);
    webhookRetryDelaysMs = parseRetryDelays(DEFAULT_RETRY_DELAYS);
  }

  /**
   * How long the worker keeps something before deleting it: 0 keeps it, anything else at least `least`. A bare number
   * is milliseconds, so DELIVERY_RETENTION=30 would empty every delivery history at once: refused.
   */
  const retentionOf = (name: string, fallback: string, least: string, zero: string, example: string) => {
    const ms = duration(name, fallback, { allowZero: true });
    if (ms === 0 || ms >= parseDuration(least)!) return ms;
    problems.push(`${name}=${JSON.stringify(str(name, ''))}: must be 0 (${zero}) or at least ${least}, such as ${example} (a bare number is milliseconds)`);
    return parseDuration(fallback)!;
  };
  const retention = retentionOf('DELIVERY_RETENTION', '30d', '1h', 'keep everything', '30d');
  // Off unless set: conversations are the owner's records and its analytics.
  const conversationRetentionMs = retentionOf('CONVERSATION_RETENTION', '0', '1d', 'keep every conversation', '365d');

  const metricsToken = str('METRICS_TOKEN', '');
  if (metricsToken && !/^[\x21-\x7e]{16,256}$/.test(metricsToken)) {
    // The value itself stays out of the message: it is a secret.
    problems.push(`METRICS_TOKEN: must be 16 to 256 printable ASCII characters without spaces (e.g. the output of openssl rand -hex 32)`);
  }
  const metricsPort = env.METRICS_PORT ? int('METRICS_PORT', 0, 0, 65535) : null;
  const metricsHost = str('METRICS_HOST', '127.0.0.1');
  if (metricsPort !== null && !metricsToken) {
    problems.push('METRICS_PORT is set but METRICS_TOKEN is not: the metrics endpoint is served only with a token (Authorization: Bearer <METRICS_TOKEN>)');
  }
  if (env.METRICS_HOST && metricsPort === null) problems.push('METRICS_HOST is set but METRICS_PORT is not: set both to serve the metrics on a port of their own');
  if (!isHostName(metricsHost)) problems.push(`METRICS_HOST=${JSON.stringify(metricsHost)}: must be an IP address or a host name`);

  const llmBase = str('LLM_BASE_URL', '');
  if (llmBase && !isHttpUrl(llmBase)) {
    problems.push(`LLM_BASE_URL=${JSON.stringify(withoutPassword(llmBase))}: must be an http:// or https:// URL such as https://api.openai.com/v1`);
  }
  const config: Config = {
    port: int('PORT', 3000, 0, 65535),
    host: str('HOST', '127.0.0.1'),
    databaseUrl,
    sqliteSynchronous: sqliteSynchronous === 'normal' ? 'normal' : 'full',
    databaseQueryTimeoutMs: duration('DATABASE_QUERY_TIMEOUT', '30s', { allowZero: true, timer: true }),
    redisUrl,
    redisKeyPrefix,
    publicKeyRateShare: publicKeyRateShare >= 1 && publicKeyRateShare <= 100 ? publicKeyRateShare : 100,
    publicKeyRatePerClient: int('PUBLIC_KEY_RATE_PER_CLIENT', 0, 0, 1_000_000),
    trustProxy,
    webhookRetryDelaysMs,
    webhookSecretOverlapMs: duration('WEBHOOK_SECRET_OVERLAP', '24h', { allowZero: true }),
    webhookTimeoutMs: duration('WEBHOOK_TIMEOUT', '30s', { timer: true }),
    webhookAllowPrivateUrls: bool('WEBHOOK_ALLOW_PRIVATE_URLS', false),
    webhookMaxPerAccount: int('WEBHOOK_MAX_PER_ACCOUNT', 20, 1, 1000),
    conversationIdleTimeoutMs: duration('CONVERSATION_IDLE_TIMEOUT', '30m'),
    deliveryRetentionMs: retention,
    conversationRetentionMs,
    workerPollIntervalMs: duration('WORKER_POLL_INTERVAL', '50ms', { timer: true }),
    rundownIntervalMs: duration('RUNDOWN_INTERVAL', '24h'),
    // A count of windows, not a duration: a run's work stays bounded whatever RUNDOWN_INTERVAL is. 7: a week of daily ones.
    rundownBackfill: int('RUNDOWN_BACKFILL', 7, 0, MAX_RUNDOWN_BACKFILL),
    authCacheTtlMs: duration('AUTH_CACHE_TTL', '1s', { allowZero: true }),
    logLevel: str('LOG_LEVEL', 'info'),
    metrics: metricsToken ? { token: metricsToken, port: metricsPort, host: metricsHost } : null,
    llm: llmBase
      ? {
          baseUrl: llmBase.replace(/\/+$/, ''),
          apiKey: str('LLM_API_KEY', '') || null,
          model: str('LLM_MODEL', 'gpt-4o-mini'),
          timeoutMs: llmTimeoutMs,
        }
      : null,
    testAccountDeleteStopAfter: env.TEST_ACCOUNT_DELETE_STOP_AFTER ? int('TEST_ACCOUNT_DELETE_STOP_AFTER', 1, 1, 1_000_000) : null,
  };
  if (!isHostName(config.host)) {
    problems.push(`HOST=${JSON.stringify(config.host)}: must be an IP address or a host name`);
  }
  if (!['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].includes(config.logLevel)) {
    problems.push(`LOG_LEVEL=${JSON.stringify(config.logLevel)}: must be one of fatal, error, warn, info, debug, trace, silent`);
  }
  if (problems.length) throw new ConfigError(problems);
  return config;
}
