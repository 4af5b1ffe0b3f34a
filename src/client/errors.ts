import type { Static } from 'typebox';
import type { ErrorEnvelope } from '../http/schemas.js';

/** The spec's closed set of error codes. */
export type ParleyErrorCode = Static<typeof ErrorEnvelope>['error']['code'];

/**
 * The service answered, with a failure. `code` is always one of the closed set: an answer that is not Parley's
 * failure envelope (a proxy's 502 page) gets the code its status stands for, so a caller never has to handle a
 * code outside the set.
 */
export class ParleyError extends Error {
  override readonly name = 'ParleyError';
  readonly code: ParleyErrorCode;
  readonly status: number;
  /** X-Request-Id of the failed answer: quote it when asking the operator to look at the logs. */
  readonly requestId: string | null;
  /** Seconds the answer asked to wait (Retry-After: the service's 429s, a proxy's 503); null without one. */
  readonly retryAfter: number | null;
  /**
   * Why an Idempotency-Key refused the request (its Idempotency-Status header), null for any other failure:
   * `in-progress` (429: the first request still runs), `key-reused` (400: the key belongs to another request),
   * `answer-lost` (400: it was carried out but its answer lost; check the outcome, do not send it again).
   */
  readonly idempotencyStatus: 'in-progress' | 'key-reused' | 'answer-lost' | null;
  /** Every header of the failed answer, names lower-cased. */
  readonly headers: Record<string, string>;

  constructor(init: { code: ParleyErrorCode; status: number; message: string; headers: Record<string, string> }) {
    super(init.message);
    this.code = init.code;
    this.status = init.status;
    this.headers = init.headers;
    this.requestId = init.headers['x-request-id'] ?? null;
    this.retryAfter = parseRetryAfter(init.headers['retry-after']);
    const status = init.headers['idempotency-status'];
    this.idempotencyStatus = status === 'in-progress' || status === 'key-reused' || status === 'answer-lost' ? status : null;
  }
}

/**
 * No answer arrived: the connection was refused or broke, or DNS failed. A write may or may not have happened;
 * calling again with the same `idempotencyKey` is safe.
 */
export class ParleyConnectionError extends Error {
  override readonly name: string = 'ParleyConnectionError';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
  }
}

/** No answer within `timeoutMs` (per attempt). A kind of connection error, for the same reasons. */
export class ParleyTimeoutError extends ParleyConnectionError {
  override readonly name = 'ParleyTimeoutError';
}

/** A webhook delivery failed verification; `reason` says which check, for logs (never tell the sender). */
export class WebhookVerificationError extends Error {
  override readonly name = 'WebhookVerificationError';
  constructor(
    readonly reason:
      | 'missing_headers'
      | 'invalid_timestamp'
      | 'timestamp_out_of_tolerance'
      | 'invalid_signature'
      | 'invalid_payload',
    message: string,
  ) {
    super(message);
  }
}

/** Retry-After in seconds (the service sends whole seconds; an HTTP date from a proxy is read too). */
export function parseRetryAfter(value: string | undefined): number | null {
  if (value === undefined || value.trim() === '') return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim());
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

const CODE_OF_STATUS: Record<number, ParleyErrorCode> = {
  400: 'INVALID_REQUEST',
  401: 'UNAUTHORIZED',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  429: 'RATE_LIMITED',
};

/** The closed set itself: the codes statuses stand for, and the one every 5xx stands for. */
const ERROR_CODES = new Set<string>([...Object.values(CODE_OF_STATUS), 'SERVER_ERROR']);
export const isParleyErrorCode = (code: unknown): code is ParleyErrorCode => typeof code === 'string' && ERROR_CODES.has(code);

/** The code a status stands for, for answers that are not the failure envelope. */
export const codeOfStatus = (status: number): ParleyErrorCode => CODE_OF_STATUS[status] ?? (status >= 500 ? 'SERVER_ERROR' : 'INVALID_REQUEST');
