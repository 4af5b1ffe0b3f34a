import { randomUUID } from 'node:crypto';
import { codeOfStatus, isParleyErrorCode, ParleyConnectionError, ParleyError, ParleyTimeoutError } from './errors.js';

export interface ParleyOptions {
  /** A server key (`sk_…`) or, for the chat channel only, a public key (`pk_…`). */
  apiKey: string;
  /**
   * Where the service answers: `http://127.0.0.1:3000` or the spec's `{base_url}` with its version,
   * `http://127.0.0.1:3000/v1`. A path not ending in `/v1` gets `/v1` added (so a service behind a prefix,
   * `https://example.com/support`, is `https://example.com/support/v1`).
   */
  baseUrl: string;
  /** Per attempt, until the whole answer has arrived. Default 60 000. */
  timeoutMs?: number;
  /** Retries after the first attempt (429, 5xx, connection errors, timeouts). Default 2; 0 turns them off. */
  maxRetries?: number;
  /** Another fetch (a proxy agent, a test double). Default: the global fetch of Node ≥ 20. */
  fetch?: typeof fetch;
}

/** Per call: these win over the client's options. */
export interface RequestOptions {
  /**
   * The Idempotency-Key of a POST. By default each POST call gets a fresh random one, reused by its own retries;
   * pass your own to make retries across calls (or processes) safe: the service answers a repeat with the first
   * answer instead of running it twice, for 24 hours.
   */
  idempotencyKey?: string;
  /** Aborts the call, including its waits between retries; the call then rejects with the signal's reason. */
  signal?: AbortSignal;
  timeoutMs?: number;
  maxRetries?: number;
}

/** The minute window of the account, as the latest answer that carried the X-RateLimit-* headers told it. */
export interface RateLimit {
  limit: number;
  remaining: number;
  /** Unix time in seconds at which the window resets. */
  reset: number;
}

export type QueryValue = string | number | boolean | undefined;
type Method = 'GET' | 'POST' | 'PUT' | 'DELETE';

interface Answer {
  status: number;
  headers: Record<string, string>;
  text: string;
}

export const DEFAULT_TIMEOUT_MS = 60_000;
export const DEFAULT_MAX_RETRIES = 2;
/**
 * The longest Retry-After the client waits out by itself. A 429 of the per-day window asks for hours: sleeping
 * that long inside a call would look like a hang, so such a 429 is thrown at once, with `retryAfter` set.
 */
export const MAX_RETRY_AFTER_SECONDS = 60;
const INITIAL_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 8_000;

/** Exponential, with jitter so that many clients failed by one outage do not come back in step. */
export function backoffMs(retry: number): number {
  const base = Math.min(INITIAL_BACKOFF_MS * 2 ** retry, MAX_BACKOFF_MS);
  return base * (0.5 + Math.random() / 2);
}

function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function versionedBase(baseUrl: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`new Parley(): baseUrl is not an absolute URL: ${JSON.stringify(baseUrl)}`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new TypeError(`new Parley(): baseUrl must be http(s): ${baseUrl}`);
  if (url.search || url.hash) throw new TypeError(`new Parley(): baseUrl must not have a query or fragment: ${baseUrl}`);
  const path = url.pathname.replace(/\/+$/, '');
  return `${url.origin}${path.endsWith('/v1') ? path : `${path}/v1`}`;
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return undefined;
  }
}

function toError(a: Answer): ParleyError {
  const body = parseJson(a.text) as { success?: unknown; error?: { code?: unknown; message?: unknown } } | undefined;
  const e = body?.success === false ? body.error : undefined;
  if (e && isParleyErrorCode(e.code) && typeof e.message === 'string') {
    return new ParleyError({ code: e.code, status: a.status, message: e.message, headers: a.headers });
  }
  const excerpt = a.text.length > 200 ? `${a.text.slice(0, 200)}…` : a.text;
  return new ParleyError({ code: codeOfStatus(a.status), status: a.status, message: `HTTP ${a.status}, not a Parley answer: ${excerpt}`, headers: a.headers });
}

function toRateLimit(h: Record<string, string>): RateLimit | null {
  const [limit, remaining, reset] = [h['x-ratelimit-limit'], h['x-ratelimit-remaining'], h['x-ratelimit-reset']].map((v) => (v !== undefined && /^\d+$/.test(v) ? Number(v) : NaN));
  return Number.isNaN(limit) || Number.isNaN(remaining) || Number.isNaN(reset) ? null : { limit: limit!, remaining: remaining!, reset: reset! };
}

/** Sends requests: authentication, the envelope, errors, timeouts, retries. One per Parley instance. */
export class Transport {
  readonly base: string;
  lastRateLimit: RateLimit | null = null;
  private readonly apiKey: string;
  private readonly timeoutMs: number;
  private readonly maxRetries: number;
  private readonly fetch: typeof fetch;

  constructor(opts: ParleyOptions) {
    if (!opts || typeof opts.apiKey !== 'string' || opts.apiKey.trim() === '') {
      throw new TypeError('new Parley(): apiKey is required (a server key sk_… or, for chat only, a public key pk_…)');
    }
    if (typeof opts.baseUrl !== 'string' || opts.baseUrl.trim() === '') {
      throw new TypeError('new Parley(): baseUrl is required, e.g. http://127.0.0.1:3000 (the /v1 is added when missing)');
    }
    this.apiKey = opts.apiKey.trim();
    this.base = versionedBase(opts.baseUrl.trim());
    this.timeoutMs = positive('timeoutMs', opts.timeoutMs, DEFAULT_TIMEOUT_MS);
    this.maxRetries = count('maxRetries', opts.maxRetries, DEFAULT_MAX_RETRIES);
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== 'function') throw new TypeError('new Parley(): no fetch available (Node ≥ 20 has one; or pass options.fetch)');
    this.fetch = f;
  }

  get<T>(path: string, query?: Record<string, QueryValue>, options?: RequestOptions) {
    return this.request<T>('GET', path, { query, options });
  }
  post<T>(path: string, body: unknown, options?: RequestOptions) {
    return this.request<T>('POST', path, { body, options });
  }
  put<T>(path: string, body: unknown, options?: RequestOptions) {
    return this.request<T>('PUT', path, { body, options });
  }
  delete<T>(path: string, options?: RequestOptions, query?: Record<string, QueryValue>) {
    return this.request<T>('DELETE', path, { query, options });
  }

  async request<T>(method: Method, path: string, req: { query?: Record<string, QueryValue> | undefined; body?: unknown; options?: RequestOptions | undefined }): Promise<T> {
    const options = req.options ?? {};
    const timeoutMs = positive('timeoutMs', options.timeoutMs, this.timeoutMs);
    const maxRetries = count('maxRetries', options.maxRetries, this.maxRetries);
    const url = this.url(path, req.query);
    const headers: Record<string, string> = { authorization: `Bearer ${this.apiKey}`, accept: 'application/json', 'user-agent': 'parley-client-node' };
    // One key for the call, so that every retry of it is recognised by the service as the same request.
    if (method === 'POST') headers['idempotency-key'] = options.idempotencyKey ?? randomUUID();
    let body: string | undefined;
    if (req.body !== undefined) {
      body = JSON.stringify(req.body);
      headers['content-type'] = 'application/json';
    }
    // A POST is retried only with a key: without one the service could run it twice.
    const retryable = method !== 'POST' || headers['idempotency-key'] !== undefined;

    for (let retry = 0; ; retry++) {
      const canRetry = retryable && retry < maxRetries;
      let answer: Answer;
      try {
        answer = await this.attempt(method, url, headers, body, timeoutMs, options.signal);
      } catch (err) {
        if (!(err instanceof ParleyConnectionError) || !canRetry) throw err;
        await sleep(backoffMs(retry), options.signal);
        continue;
      }
      this.lastRateLimit = toRateLimit(answer.headers) ?? this.lastRateLimit;
      if (answer.status >= 200 && answer.status < 300) return unwrap<T>(answer);
      const error = toError(answer);
      const wait = canRetry ? retryDelayMs(error, retry) : null;
      if (wait === null) throw error;
      await sleep(wait, options.signal);
    }
  }

  private url(path: string, query: Record<string, QueryValue> | undefined): string {
    const qs = new URLSearchParams();
    for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined) qs.append(k, String(v));
    const s = qs.toString();
    return `${this.base}${path}${s ? `?${s}` : ''}`;
  }

  private async attempt(method: Method, url: string, headers: Record<string, string>, body: string | undefined, timeoutMs: number, signal: AbortSignal | undefined): Promise<Answer> {
    const timeout = AbortSignal.timeout(timeoutMs);
    try {
      const res = await this.fetch(url, { method, headers, body, signal: signal ? AbortSignal.any([signal, timeout]) : timeout, redirect: 'manual' });
      // A redirect is answered as what it is (a 3xx, not a Parley answer), not followed with the key to another place.
      // Read under the same signal: a server that sends headers and then stalls is a timeout too.
      const text = await res.text();
      return { status: res.status, headers: Object.fromEntries(res.headers), text };
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (timeout.aborted) throw new ParleyTimeoutError(`${method} ${url}: no answer within ${timeoutMs} ms`, { cause: err });
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      throw new ParleyConnectionError(`${method} ${url} failed: ${cause?.code ?? cause?.message ?? (err as Error).message}`, { cause: err });
    }
  }
}

/**
 * null: not retried. A 429 or a 5xx waits its Retry-After when it sends one (the service's 429s; its 500s of a database
 * that is full, unreachable or locked, which a retry half a second later would only meet again) and it is short
 * enough, else the backoff; other 4xx never.
 */
function retryDelayMs(error: ParleyError, retry: number): number | null {
  if (error.status !== 429 && error.status < 500) return null;
  if (error.retryAfter === null) return backoffMs(retry);
  return error.retryAfter <= MAX_RETRY_AFTER_SECONDS ? error.retryAfter * 1000 : null;
}

function unwrap<T>(a: Answer): T {
  const body = parseJson(a.text) as { success?: unknown; data?: unknown } | undefined;
  if (body?.success === true && 'data' in body) return body.data as T;
  throw new ParleyError({ code: 'SERVER_ERROR', status: a.status, message: `HTTP ${a.status} without Parley's success envelope`, headers: a.headers });
}

function positive(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isFinite(value) || value <= 0) throw new TypeError(`Parley: ${name} must be a positive number of milliseconds, got ${value}`);
  return value;
}

function count(name: string, value: number | undefined, fallback: number): number {
  if (value === undefined) return fallback;
  if (!Number.isInteger(value) || value < 0) throw new TypeError(`Parley: ${name} must be a whole number ≥ 0, got ${value}`);
  return value;
}
