/**
 * Outbound HTTP for webhook deliveries.
 *
 * `WebhookSender` is the port the delivery worker uses; `createUndiciSender` is the implementation.
 * It never throws: every outcome, including DNS failures, refused connections, SSRF refusals and
 * timeouts, becomes a `SendResult`.
 *
 * SSRF: the sender owns a dedicated undici `Agent` whose connector (1) refuses literal private IPs
 * before connecting, (2) resolves host names through a guarded `lookup`, so the addresses checked are
 * the ones the socket connects to (no DNS-rebinding window between check and use), and (3) re-checks
 * the socket's remote address once connected. Redirects are never followed: a 3xx is a failure.
 */
import net from 'node:net';
import type { Socket } from 'node:net';
import { Agent, buildConnector } from 'undici';
import { createGuardedLookup, isPrivateAddress, validateWebhookUrl, type CallbackLookupFn } from './ssrf.js';

export const MAX_RESPONSE_BODY_BYTES = 4096;

export interface SendRequest {
  url: string;
  headers: Record<string, string>;
  body: string | Buffer;
  timeoutMs: number;
}

export interface SendResult {
  /** true for any 2xx received within the timeout */
  ok: boolean;
  /** HTTP status, or null when no response was received */
  statusCode: number | null;
  durationMs: number;
  /** null when ok; 'timeout', an HTTP status description, or the connection/DNS/SSRF error text */
  error: string | null;
  /** the first 4 KiB of the response body (UTF-8), null when no response was received */
  responseBody: string | null;
  /** the receiver answered 410 Gone: the webhook must be disabled at once */
  gone: boolean;
}

export interface WebhookSender {
  send(req: SendRequest): Promise<SendResult>;
}

export interface UndiciSenderOptions {
  /** WEBHOOK_ALLOW_PRIVATE_URLS */
  allowPrivate: boolean;
  /** maximum concurrent connections per origin (default 10; null: no cap, the caller bounds concurrency) */
  connectionsPerOrigin?: number | null;
  /** TCP/TLS connect timeout, ms (default 10 s; the overall request timeout still applies) */
  connectTimeoutMs?: number;
  /** User-Agent sent when the caller's headers do not set one */
  userAgent?: string;
  /** replaces dns.lookup (tests; the SSRF guard is applied on top of it) */
  lookup?: CallbackLookupFn;
}

export interface ClosableWebhookSender extends WebhookSender {
  close(): Promise<void>;
}

function ssrfError(message: string): NodeJS.ErrnoException {
  const e: NodeJS.ErrnoException = new Error(message);
  e.code = 'ESSRF';
  return e;
}

function bareHost(hostname: string): string {
  return hostname.startsWith('[') && hostname.endsWith(']') ? hostname.slice(1, -1) : hostname;
}

const TIMEOUT_CODES = new Set(['UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT', 'UND_ERR_CONNECT_TIMEOUT', 'ETIMEDOUT']);

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return String(err);
  let msg = err.message;
  if (!msg && err instanceof AggregateError && err.errors.length) {
    // Node's happy-eyeballs connect reports every address it tried in an AggregateError with no message.
    msg = err.errors.map((e: unknown) => (e instanceof Error ? e.message : String(e))).join('; ');
  }
  const code = (err as NodeJS.ErrnoException).code;
  if (!msg) msg = code ?? err.name;
  const cause = (err as { cause?: unknown }).cause;
  if (cause instanceof Error && cause.message && !msg.includes(cause.message)) msg += `: ${cause.message}`;
  return msg;
}

async function readCapped(body: AsyncIterable<Buffer> & { destroy?: (e?: Error) => void }, max: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  try {
    for await (const chunk of body) {
      chunks.push(chunk);
      size += chunk.length;
      if (size >= max) break; // leaving the loop destroys the stream: the rest is discarded
    }
  } catch {
    // aborted (timeout) or reset mid-body: keep what arrived
  } finally {
    body.destroy?.();
  }
  const buf = Buffer.concat(chunks).subarray(0, max);
  // stream mode drops an incomplete multi-byte sequence cut at the 4 KiB boundary. U+0000 (a binary or gzip
  // answer) becomes U+FFFD as undecodable bytes do: PostgreSQL text cannot hold it, and the failed INSERT rolled
  // back the whole batch of attempt records, so every delivery in it was sent again at each lease expiry.
  return new TextDecoder('utf-8', { fatal: false }).decode(buf, { stream: true }).replaceAll('\0', '\uFFFD');
}

/**
 * The undici connector used by the sender's Agent: refuses private literal IPs before connecting,
 * resolves names through the guarded lookup (all addresses checked, the socket connects only to
 * checked ones), and re-checks the connected socket's remote address. Exported for tests and reuse.
 */
export function createGuardedConnector(opts: {
  allowPrivate: boolean;
  lookup?: CallbackLookupFn;
  connectTimeoutMs?: number;
}): buildConnector.connector {
  const allowPrivate = opts.allowPrivate;
  const lookup = createGuardedLookup({ allowPrivate, ...(opts.lookup ? { lookup: opts.lookup } : {}) });
  const baseConnect = buildConnector({
    timeout: opts.connectTimeoutMs ?? 10_000,
    lookup: lookup as unknown as net.LookupFunction,
  });

  return (options, callback) => {
    const host = bareHost(options.hostname);
    // net.connect skips `lookup` for literal IPs, so those are checked here.
    if (!allowPrivate && net.isIP(host) !== 0 && isPrivateAddress(host)) {
      callback(ssrfError(`refused to connect to private address ${host}`), null);
      return;
    }
    baseConnect(options, (...args) => {
      const [err, socket] = args;
      if (err) {
        callback(err, null);
        return;
      }
      const remote = (socket as Socket).remoteAddress;
      if (!allowPrivate && (!remote || isPrivateAddress(remote))) {
        socket.destroy();
        callback(ssrfError(`refused to connect to ${host}: connected address ${remote ?? 'unknown'} is private`), null);
        return;
      }
      callback(null, socket);
    });
  };
}

export function createUndiciSender(opts: UndiciSenderOptions): ClosableWebhookSender {
  const allowPrivate = opts.allowPrivate;
  const userAgent = opts.userAgent ?? 'Parley-Webhooks/1.0';
  const connect = createGuardedConnector({
    allowPrivate,
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
    ...(opts.connectTimeoutMs !== undefined ? { connectTimeoutMs: opts.connectTimeoutMs } : {}),
  });

  const agent = new Agent({
    connect,
    connections: opts.connectionsPerOrigin === undefined ? 10 : opts.connectionsPerOrigin,
    pipelining: 1,
    keepAliveTimeout: 10_000,
    keepAliveMaxTimeout: 60_000,
  });

  async function send(req: SendRequest): Promise<SendResult> {
    const started = performance.now();
    const elapsed = (): number => Math.max(0, Math.round(performance.now() - started));
    const failure = (error: string, statusCode: number | null = null, responseBody: string | null = null): SendResult => ({
      ok: false,
      statusCode,
      durationMs: elapsed(),
      error,
      responseBody,
      gone: statusCode === 410,
    });

    try {
      const checked = validateWebhookUrl(req.url, { allowPrivate });
      if (!checked.ok) return failure(checked.reason);
      const url = checked.url;
      const timeoutMs = Number.isFinite(req.timeoutMs) && req.timeoutMs > 0 ? req.timeoutMs : 30_000;

      const headers: Record<string, string> = { ...req.headers };
      if (!Object.keys(headers).some((k) => k.toLowerCase() === 'user-agent')) headers['User-Agent'] = userAgent;

      const ac = new AbortController();
      let timedOut = false;
      const timer = setTimeout(() => {
        timedOut = true;
        ac.abort(new Error('timeout'));
      }, timeoutMs);
      try {
        let res;
        try {
          res = await agent.request({
            origin: url.origin,
            path: `${url.pathname}${url.search}`,
            method: 'POST',
            headers,
            body: req.body,
            signal: ac.signal,
            headersTimeout: timeoutMs,
            bodyTimeout: timeoutMs,
          });
        } catch (err) {
          const code = (err as NodeJS.ErrnoException)?.code;
          if (timedOut || (code && TIMEOUT_CODES.has(code))) return failure('timeout');
          return failure(describeError(err));
        }
        const statusCode = res.statusCode;
        const responseBody = await readCapped(res.body, MAX_RESPONSE_BODY_BYTES);
        if (statusCode >= 200 && statusCode < 300) {
          return { ok: true, statusCode, durationMs: elapsed(), error: null, responseBody, gone: false };
        }
        const reason =
          statusCode >= 300 && statusCode < 400
            ? `HTTP ${statusCode} (redirects are not followed)`
            : statusCode === 410
              ? 'HTTP 410 Gone'
              : `HTTP ${statusCode}`;
        return failure(reason, statusCode, responseBody);
      } finally {
        clearTimeout(timer);
      }
    } catch (err) {
      return failure(describeError(err));
    }
  }

  return {
    send,
    async close() {
      try {
        await agent.close();
      } catch {
        /* already closed */
      }
    },
  };
}
