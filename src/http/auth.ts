import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { AccountsService } from '../modules/accounts/accounts.service.js';
import type { AuthContext, Scope } from '../modules/accounts/accounts.schemas.js';
import { ApiError } from './errors.js';
import { hooksOf } from './json.js';
import type { RateLimiter } from './rate-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext;
  }
  interface FastifyContextConfig {
    /** The scope a key needs for this route; routes without one are public (health, OpenAPI). */
    scope?: Scope;
    /** A second scope the key needs as well (a route that reads two kinds of resource). */
    alsoScope?: Scope;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/** How many Authorization headers a request carries (rawHeaders alternates names and values). */
function authorizationCount(raw: string[]): number {
  let n = 0;
  for (let i = 0; i < raw.length; i += 2) if (raw[i]!.length === 13 && raw[i]!.toLowerCase() === 'authorization') n++;
  return n;
}

/**
 * Requests meterUnmatched has counted. An unknown route reaches it through the not-found handler, or, when its
 * body cannot be parsed (Fastify parses before the not-found handler runs), through the error handler: counted
 * once either way.
 */
const metered = new WeakSet<FastifyRequest>();

/**
 * The caller's address, for the rate limit of public keys only: req.ip walks X-Forwarded-For when TRUST_PROXY is
 * set, work a server key's request has no use for.
 */
const clientOf = (req: FastifyRequest, auth: AuthContext) => (auth.keyType === 'public' ? req.ip : undefined);

/**
 * For a request no route matched. With a valid key it is counted and answered with the rate-limit headers, like
 * every authenticated response (CONTRACT §3) — probing unknown paths is not free — and past the limit it is a 429
 * (thrown). A missing or invalid key changes nothing: the answer stays the 404.
 */
export async function meterUnmatched(req: FastifyRequest, reply: FastifyReply, accounts: AccountsService, limiter: RateLimiter) {
  if (metered.has(req)) return;
  metered.add(req);
  const m = BEARER.exec(req.headers.authorization ?? '');
  if (!m) return;
  const auth = accounts.cachedAuth(m[1]!) ?? (await accounts.authenticate(m[1]!));
  if (!auth) return;
  const { headers } = await limiter.consume(auth, clientOf(req, auth));
  reply.headers(headers);
}

/**
 * Authentication, then rate limiting, then permission, in onRequest so a refused request never has its
 * body parsed. Failed authentication does not consume any account's quota (CONTRACT §3).
 *
 * A callback hook that finishes synchronously when it can (key in the short-TTL cache, in-memory limiter):
 * an async hook costs a promise and a trip through the microtask queue on every request.
 */
export function registerAuth(app: FastifyInstance, accounts: AccountsService, limiter: RateLimiter) {
  app.decorateRequest('auth', null as unknown as AuthContext);

  /** The rate limit and permission steps, once the key is known. */
  function admit(req: FastifyRequest, reply: FastifyReply, auth: AuthContext | null, scope: Scope, also: Scope | undefined, done: (err?: Error) => void) {
    if (!auth) return done(new ApiError('UNAUTHORIZED', 'invalid or revoked API key'));
    req.auth = auth;
    const permit = () => {
      if (auth.keyType === 'server' && auth.plan === 'free') {
        return done(new ApiError('FORBIDDEN', 'server API keys need the Pro plan or above; this account is on the Free plan'));
      }
      if (!auth.scopes.has(scope)) return done(new ApiError('FORBIDDEN', `this API key lacks the ${scope} scope`));
      if (also && !auth.scopes.has(also)) return done(new ApiError('FORBIDDEN', `this API key lacks the ${also} scope`));
      done();
    };
    let outcome: ReturnType<RateLimiter['consume']>;
    try {
      outcome = limiter.consume(auth, clientOf(req, auth));
    } catch (err) {
      return done(err as Error); // 429
    }
    if (outcome instanceof Promise) {
      outcome.then(
        ({ headers }) => {
          reply.headers(headers);
          permit();
        },
        (err: Error) => done(err),
      );
    } else {
      reply.headers(outcome.headers);
      permit();
    }
  }

  /** The hook of a route that needs `scope` (and `also`). */
  const authenticate = (scope: Scope, also?: Scope) => (req: FastifyRequest, reply: FastifyReply, done: (err?: Error) => void) => {
    const header = req.headers.authorization;
    if (!header) return done(new ApiError('UNAUTHORIZED', 'missing Authorization header; send "Authorization: Bearer <API_KEY>"'));
    const m = BEARER.exec(header);
    if (!m) return done(new ApiError('UNAUTHORIZED', 'Authorization header must be "Bearer <API_KEY>"'));
    // Node keeps the first of two Authorization headers; a proxy or a log may read the other and put the request
    // down to another account. Two are refused rather than one picked.
    if (authorizationCount(req.raw.rawHeaders) > 1) return done(new ApiError('INVALID_REQUEST', 'the Authorization header is sent more than once; send one'));
    const secret = m[1]!;
    const cached = accounts.cachedAuth(secret);
    if (cached) return admit(req, reply, cached, scope, also, done);
    accounts.authenticate(secret).then(
      (auth) => admit(req, reply, auth, scope, also, done),
      (err: Error) => done(err),
    );
  };
  // Bound to each route that names a scope, as the last of its onRequest hooks (a route's own run after the global
  // ones: the request id and CORS headers are set first, so refusals carry them): routes without one (health, the
  // OpenAPI document, the dashboard) and unmatched requests (meterUnmatched) do not run it, and the scope is known
  // without reading req.routeOptions, which Fastify builds afresh on every read.
  app.addHook('onRoute', (route) => {
    const config = route.config as { scope?: Scope; alsoScope?: Scope } | undefined;
    if (!config?.scope) return;
    route.onRequest = [...hooksOf(route.onRequest), authenticate(config.scope, config.alsoScope)] as typeof route.onRequest;
  });
}
