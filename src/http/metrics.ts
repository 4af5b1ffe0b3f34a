import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { FastifyInstance, FastifyReply, FastifyRequest, onResponseHookHandler } from 'fastify';
import { pathOf, type Logger } from '../lib/log.js';
import { EXPOSITION_CONTENT_TYPE, labelPairs, type Exposition } from '../lib/prometheus.js';
import { ApiError, ERROR_STATUS, failureBody } from './errors.js';
import { hooksOf } from './json.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `false`: the route's requests are not counted (the metrics endpoint itself). */
    metrics?: false;
  }
}

/**
 * Upper bounds, in seconds, of the request duration histogram: reads answer in a few milliseconds, writes on SQLite
 * wait for a shared sync (~2–5 ms), chat replies with an LLM take up to LLM_TIMEOUT (10 s).
 */
export const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10] as const;
const BOUNDS = [...DURATION_BUCKETS.map(String), '+Inf'];

/** One method of one route: its label pairs, written once, and what its requests added up to. */
interface Series {
  labels: string;
  /** Responses by status code: a handful of codes per route. */
  codes: Map<number, number>;
  /** Observations per bucket (not cumulative), the last one past every bound. */
  buckets: Float64Array;
  sum: number;
}

const newSeries = (method: string, route: string): Series => ({
  labels: labelPairs({ method, route }),
  codes: new Map(),
  buckets: new Float64Array(BOUNDS.length),
  sum: 0,
});

function observe(s: Series, code: number, ms: number) {
  s.codes.set(code, (s.codes.get(code) ?? 0) + 1);
  const seconds = ms / 1000;
  let i = 0;
  while (i < DURATION_BUCKETS.length && seconds > DURATION_BUCKETS[i]!) i++;
  s.buckets[i]! += 1;
  s.sum += seconds;
}

/** The `route` label of a request no route matched (a real route pattern always starts with `/`). */
export const UNMATCHED_ROUTE = 'unmatched';

/**
 * Requests counted per route pattern (`/v1/documents/:id`, never the URL asked for: one series per route, however
 * many ids are requested), method and status code, with a duration histogram per route and method.
 */
export function createHttpMetrics() {
  const series: Series[] = [];
  /** By method; Node's parser knows a fixed set of methods, so these stay few. */
  const unmatched = new Map<string, Series>();

  return {
    /**
     * Gives every route registered from now on an onResponse hook of its own, bound to the route's series: the
     * labels are written once here, and a request costs a map update and a bucket search, no lookup of its route.
     * Fastify knows the duration already (reply.elapsedTime, from its start time and the response's finish).
     */
    register(app: FastifyInstance) {
      app.addHook('onRoute', (route) => {
        if (route.config?.metrics === false) return;
        const methods = hooksOf(route.method);
        let hook: onResponseHookHandler;
        if (methods.length === 1) {
          const s = newSeries(methods[0]!, route.url);
          series.push(s);
          hook = (_req: FastifyRequest, reply: FastifyReply, done: () => void) => {
            observe(s, reply.statusCode, reply.elapsedTime);
            done();
          };
        } else {
          const byMethod = new Map(methods.map((m) => [m, newSeries(m, route.url)]));
          series.push(...byMethod.values());
          hook = (req: FastifyRequest, reply: FastifyReply, done: () => void) => {
            const s = byMethod.get(req.method);
            if (s) observe(s, reply.statusCode, reply.elapsedTime);
            done();
          };
        }
        route.onResponse = [...hooksOf(route.onResponse), hook] as typeof route.onResponse;
      });
    },

    /**
     * A request no route matched (a 404, a 429 past the rate limit, a 400 for an undecodable URL), counted as its
     * answer is sent: Fastify's not-found handler takes no onResponse hook of its own, and a hook for every request
     * would cost the matched ones too.
     */
    unmatched(method: string, code: number, ms: number) {
      let s = unmatched.get(method);
      if (!s) unmatched.set(method, (s = newSeries(method, UNMATCHED_ROUTE)));
      observe(s, code, ms);
    },

    collect(out: Exposition) {
      const all = [...series, ...unmatched.values()].filter((s) => s.codes.size > 0);
      out.family('parley_http_requests_total', 'counter', 'HTTP requests answered, by method, route pattern and status code.');
      for (const s of all) for (const [code, n] of s.codes) out.sample('parley_http_requests_total', `${s.labels},code="${code}"`, n);
      out.family('parley_http_request_duration_seconds', 'histogram', 'Time from the request arriving to its response being sent, by method and route pattern.');
      for (const s of all) out.histogram('parley_http_request_duration_seconds', s.labels, BOUNDS, s.buckets, s.sum);
    },
  };
}

export type HttpMetrics = ReturnType<typeof createHttpMetrics>;

const BEARER = /^Bearer\s+(\S+)\s*$/i;

/**
 * Checks `Authorization: Bearer <METRICS_TOKEN>` in constant time: both sides are hashed first, so neither the
 * comparison nor a length check tells anything about the token.
 */
export function metricsAuthorizer(token: string) {
  const want = createHash('sha256').update(token).digest();
  return (header: string | undefined): ApiError | null => {
    if (!header) return new ApiError('UNAUTHORIZED', 'missing Authorization header; send "Authorization: Bearer <METRICS_TOKEN>"');
    const m = BEARER.exec(header);
    const got = createHash('sha256')
      .update(m?.[1] ?? '')
      .digest();
    return m && timingSafeEqual(got, want) ? null : new ApiError('UNAUTHORIZED', 'invalid metrics token');
  };
}

/** What renders a scrape (src/metrics.ts). */
export interface MetricsSource {
  render(): Promise<string>;
}

/**
 * GET /metrics on the API. Outside /v1, without an API key (the metrics token instead), so no account's rate limit
 * counts it, and hidden from the OpenAPI document: it is the operator's, not the API's. Its own requests are not
 * counted, or every scrape would change what the next one reads.
 */
export function registerMetricsRoute(app: FastifyInstance, source: MetricsSource, token: string) {
  const authorize = metricsAuthorizer(token);
  app.get('/metrics', { schema: { hide: true }, config: { metrics: false } }, async (req, reply) => {
    const refused = authorize(req.headers.authorization);
    if (refused) throw refused;
    return reply.type(EXPOSITION_CONTENT_TYPE).send(await source.render());
  });
}

/**
 * The same endpoint on a listener of its own (METRICS_PORT): `parley worker` has no other, and an operator may
 * prefer to keep the metrics off the API's address. Plain node:http, answering only GET and HEAD /metrics.
 */
export async function startMetricsServer(opts: { host: string; port: number; token: string; source: MetricsSource; log: Logger }) {
  const authorize = metricsAuthorizer(opts.token);
  const send = (res: http.ServerResponse, status: number, type: string, body: string, head: boolean) => {
    res.writeHead(status, { 'content-type': type, 'content-length': Buffer.byteLength(body), 'x-content-type-options': 'nosniff' });
    res.end(head ? undefined : body);
  };
  const fail = (res: http.ServerResponse, err: ApiError, head: boolean) =>
    send(res, ERROR_STATUS[err.code], 'application/json; charset=utf-8', JSON.stringify(failureBody(err.code, err.message)), head);
  const server = http.createServer((req, res) => {
    const path = pathOf(req.url ?? '/');
    const head = req.method === 'HEAD';
    // A body, if any, is not read: drained so the connection can carry the next request.
    req.resume();
    if (path !== '/metrics' || (req.method !== 'GET' && !head)) return fail(res, new ApiError('NOT_FOUND', `no route ${req.method} ${path}`), head);
    const refused = authorize(req.headers.authorization);
    if (refused) return fail(res, refused, head);
    opts.source.render().then(
      (text) => send(res, 200, EXPOSITION_CONTENT_TYPE, text, head),
      (err: unknown) => {
        opts.log.error({ err }, 'metrics scrape failed');
        fail(res, new ApiError('SERVER_ERROR', 'internal server error'), head);
      },
    );
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const { address, port } = server.address() as AddressInfo;
  return {
    url: `http://${address.includes(':') ? `[${address}]` : address}:${port}/metrics`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
