import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { AccountsService } from '../modules/accounts/accounts.service.js';
import type { AuthContext, Scope } from '../modules/accounts/accounts.schemas.js';
import { ApiError } from './errors.js';
import type { RateLimiter } from './rate-limit.js';

declare module 'fastify' {
  interface FastifyRequest {
    auth: AuthContext;
  }
  interface FastifyContextConfig {
    /** The scope a key needs for this route; routes without one are public (health, OpenAPI). */
    scope?: Scope;
  }
}

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Authentication, then rate limiting, then permission, in onRequest so a refused request never has its
 * body parsed. Failed authentication does not consume any account's quota (CONTRACT §3).
 */
export function registerAuth(app: FastifyInstance, accounts: AccountsService, limiter: RateLimiter) {
  app.decorateRequest('auth', null as unknown as AuthContext);
  app.addHook('onRequest', async (req: FastifyRequest, reply) => {
    const scope = req.routeOptions.config?.scope;
    if (!scope) return;
    const header = req.headers.authorization;
    if (!header) throw new ApiError('UNAUTHORIZED', 'missing Authorization header; send "Authorization: Bearer <API_KEY>"');
    const m = BEARER.exec(header);
    if (!m) throw new ApiError('UNAUTHORIZED', 'Authorization header must be "Bearer <API_KEY>"');
    const auth = await accounts.authenticate(m[1]!);
    if (!auth) throw new ApiError('UNAUTHORIZED', 'invalid or revoked API key');
    req.auth = auth;
    const { headers } = await limiter.consume(auth);
    reply.headers(headers);
    if (auth.keyType === 'server' && auth.plan === 'free') {
      throw new ApiError('FORBIDDEN', 'server API keys need the Pro plan or above; this account is on the Free plan');
    }
    if (!auth.scopes.has(scope)) throw new ApiError('FORBIDDEN', `this API key lacks the ${scope} scope`);
  });
}
