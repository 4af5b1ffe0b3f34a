import type { AddressInfo } from 'node:net';
import { after, before } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { buildApp, type App } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { createContext, type AppContext } from '../../src/context.js';
import type { DialectName } from '../../src/db/database.js';
import { createRateLimiter, type RateLimiter } from '../../src/http/rate-limit.js';
import { FakeClock, systemClock, type Clock } from '../../src/lib/clock.js';
import type { Logger } from '../../src/lib/log.js';
import { createTestDatabase, type TestDatabase } from './db.js';

export interface TestResponse<T = any> {
  status: number;
  headers: Headers;
  body: T;
  text: string;
}

export interface TestApp {
  app: App;
  ctx: AppContext;
  database: TestDatabase;
  clock: Clock;
  baseUrl: string;
  config: Config;
  limiter: RateLimiter;
  /** Creates an account with a server key (default plan enterprise with generous limits). */
  account(opts?: { plan?: string; minute?: number; day?: number; keyType?: 'server' | 'public'; scopes?: string[] }): Promise<{ accountId: string; key: string }>;
  /** A real HTTP request to the listening server. `body` objects are sent as JSON. */
  request<T = any>(method: string, path: string, opts?: { key?: string; body?: unknown; headers?: Record<string, string>; raw?: string }): Promise<TestResponse<T>>;
  close(): Promise<void>;
}

export interface TestAppOptions {
  env?: Record<string, string>;
  /** SQLite only: this file instead of an in-memory database (for tests that need another process on it). */
  sqliteFile?: string;
  /** A second app (another process or API node) on this app's database, with its own connections. */
  sameDatabaseAs?: TestApp;
  /** A FakeClock instead of the system clock: at this time (Unix ms), or at the real time for `true`. */
  fakeClock?: boolean | number;
  redisUrl?: string;
  keyPrefix?: string;
  log?: Logger;
  /** The HTTP layer's logger (Fastify's `loggerInstance`, as `parley serve` passes it); none by default. */
  appLogger?: FastifyBaseLogger;
  /** The rate limiter's clock and its pause after a Redis failure. */
  limiter?: { now?: () => number; pauseMs?: { first: number; max: number } };
}

export async function createTestApp(dialect: DialectName, opts: TestAppOptions = {}): Promise<TestApp> {
  const database = await createTestDatabase(
    dialect,
    opts.sameDatabaseAs ? { sameAs: opts.sameDatabaseAs.database } : opts.sqliteFile ? { file: opts.sqliteFile } : {},
  );
  // The key cache is off by default in tests, which change plans and keys straight in the database;
  // test/http/auth-cache.test.ts turns it on.
  const config = loadConfig({ WEBHOOK_ALLOW_PRIVATE_URLS: 'true', AUTH_CACHE_TTL: '0', ...opts.env });
  const clock = typeof opts.fakeClock === 'number' ? new FakeClock(opts.fakeClock) : opts.fakeClock ? new FakeClock(Date.now()) : systemClock;
  const ctx: AppContext = createContext(config, database, clock, opts.log);
  const limiter = createRateLimiter({
    redisUrl: opts.redisUrl ?? null,
    keyPrefix: opts.keyPrefix ?? `test:${Math.random().toString(36).slice(2)}`,
    publicSharePercent: config.publicKeyRateShare,
    publicPerClient: config.publicKeyRatePerClient,
    ...(opts.log ? { log: opts.log } : {}),
    ...opts.limiter,
  });
  const app = await buildApp(ctx, { limiter, ...(opts.appLogger ? { loggerInstance: opts.appLogger } : {}) });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const baseUrl = `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`;

  return {
    app,
    ctx,
    database,
    clock,
    baseUrl,
    config,
    limiter,
    async account(o = {}) {
      const plan = o.plan ?? 'enterprise';
      const acct = await ctx.services.accounts.createAccount({
        name: `test ${plan}`,
        plan,
        ...(plan === 'enterprise' ? { rateLimitMinute: o.minute ?? 100_000, rateLimitDay: o.day ?? 1_000_000 } : {}),
      });
      const key = await ctx.services.accounts.createKey({ accountId: acct.id, type: o.keyType ?? (plan === 'free' ? 'public' : 'server'), scopes: o.scopes });
      return { accountId: acct.id, key: key.key };
    },
    async request(method, path, o = {}) {
      const headers: Record<string, string> = { ...o.headers };
      if (o.key) headers.authorization = `Bearer ${o.key}`;
      let body: string | undefined = o.raw;
      if (o.body !== undefined) {
        body = JSON.stringify(o.body);
        headers['content-type'] ??= 'application/json';
      }
      const res = await fetch(`${baseUrl}${path}`, { method, headers, body });
      const text = await res.text();
      let parsed: unknown = undefined;
      try {
        parsed = text ? JSON.parse(text) : undefined;
      } catch {
        parsed = undefined;
      }
      return { status: res.status, headers: res.headers, body: parsed as any, text };
    },
    async close() {
      await app.close();
      await limiter.close();
      await database.cleanup();
    },
  };
}

/** The app of one describe block, usable in its tests and its own hooks once useTestApp's `before` has run. */
export interface SuiteApp extends TestApp {
  /** The server key of the account made right after the app (an enterprise one, like `account()`'s default). */
  readonly key: string;
  readonly accountId: string;
  /** The app's clock, for an app made with `fakeClock`. */
  readonly fakeClock: FakeClock;
  /**
   * Has `fn` run when the describe block ends, before the app closes, last registered first: a worker must
   * stop while its database is still open, and node:test runs `after` hooks in the order they were declared.
   */
  beforeClose(fn: () => unknown): void;
}

/** Every member of TestApp, so that the handle below forwards them all (a new member fails to compile until listed). */
const TEST_APP_MEMBERS = {
  app: true,
  ctx: true,
  database: true,
  clock: true,
  baseUrl: true,
  config: true,
  limiter: true,
  account: true,
  request: true,
  close: true,
} satisfies Record<keyof TestApp, true>;

/**
 * Declares `before` and `after` hooks in the current describe block: a fresh app with one account for its
 * tests, closed at the end. The handle stands for that app; hooks declared after this call run after it.
 */
export function useTestApp(dialect: DialectName, opts: TestAppOptions = {}): SuiteApp {
  let current: { t: TestApp; first: { accountId: string; key: string } } | undefined;
  const cleanups: Array<() => unknown> = [];
  before(async () => {
    const t = await createTestApp(dialect, opts);
    current = { t, first: await t.account() };
  });
  after(async () => {
    try {
      for (const fn of cleanups.reverse()) await fn();
    } finally {
      await current?.t.close();
    }
  });
  const live = () => {
    if (!current) throw new Error("useTestApp's app is made in its before hook; it is not there yet (or that hook failed)");
    return current;
  };
  const handle = {
    get key() {
      return live().first.key;
    },
    get accountId() {
      return live().first.accountId;
    },
    get fakeClock() {
      const { clock } = live().t;
      if (!(clock instanceof FakeClock)) throw new Error('this app was made without fakeClock');
      return clock;
    },
    beforeClose(fn: () => unknown) {
      cleanups.push(fn);
    },
  };
  // TestApp's methods are closures over the app (none uses `this`), so forwarding them unbound is safe.
  for (const name of Object.keys(TEST_APP_MEMBERS) as (keyof TestApp)[]) {
    Object.defineProperty(handle, name, { get: () => live().t[name], enumerable: true });
  }
  return handle as typeof handle & TestApp;
}
