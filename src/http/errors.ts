import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { resourceError } from '../db/resource-errors.js';
import { pathOf } from '../lib/log.js';
import { patternRule } from './schemas.js';

/** The closed set of error codes (spec "Errors") and the one place that maps each to its HTTP status. */
export const ERROR_STATUS = {
  INVALID_REQUEST: 400,
  UNAUTHORIZED: 401,
  FORBIDDEN: 403,
  NOT_FOUND: 404,
  RATE_LIMITED: 429,
  SERVER_ERROR: 500,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export class ApiError extends Error {
  readonly status: number;
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly headers: Record<string, string | number> = {},
  ) {
    super(message);
    this.status = ERROR_STATUS[code];
  }
}

export const invalidRequest = (message: string) => new ApiError('INVALID_REQUEST', message);
/**
 * Text with nothing visible: whitespace (including NBSP and the ideographic space), control characters and the
 * default-ignorable code points (zero-width space, joiners, word joiner, BOM, soft hyphen, bidi marks, variation
 * selectors, Hangul fillers), plus the Braille blank.
 */
const INVISIBLE_ONLY = /^[\s\p{Cc}\p{Default_Ignorable_Code_Point}\u2800]*$/u;

/** Whether a text has nothing visible in it ("", spaces, zero-width characters…). */
export const isBlank = (value: string) => INVISIBLE_ONLY.test(value);

/**
 * Refuses a given text with nothing visible in it — only whitespace or invisible characters such as U+200B
 * (a schema's minLength counts them); absent or null is fine.
 */
export function rejectBlank(field: string, value: string | null | undefined) {
  if (value != null && isBlank(value)) throw invalidRequest(`${field} must not be blank`);
}

export const notFound = (what: string, id: string) => new ApiError('NOT_FOUND', `${what} ${id} not found`);
/** An unknown route (or a method the path does not take: the code set has no 405). */
export const noRoute = (req: { method: string; url: string }) => new ApiError('NOT_FOUND', `no route ${req.method} ${pathOf(req.url)}`);

export function failureBody(code: ErrorCode, message: string) {
  return { success: false as const, error: { code, message } };
}

interface AjvError {
  keyword: string;
  instancePath: string;
  message?: string;
  params: Record<string, unknown>;
}

const PART_NAMES: Record<string, string> = { body: 'body', querystring: 'query', params: 'path', headers: 'header' };

/** Turns the first validation error into a sentence that names the field and the rule it broke. */
export function describeValidation(errors: AjvError[], context: string | undefined): string {
  const part = PART_NAMES[context ?? 'body'] ?? 'body';
  const e = errors.find((x) => x.keyword !== 'anyOf' && x.keyword !== 'if') ?? errors[0];
  if (!e) return `${part} is invalid`;
  const path = e.instancePath
    .split('/')
    .filter(Boolean)
    .map((s) => (/^\d+$/.test(s) ? `[${s}]` : `.${s}`))
    .join('')
    .replace(/^\./, '');
  const field = (extra?: unknown) => {
    const name = [path, extra].filter((x) => x !== undefined && x !== '').join('.');
    return name ? `${part}.${name}` : part;
  };
  const p = e.params;
  switch (e.keyword) {
    case 'required':
      return `${field(p.missingProperty)} is required`;
    case 'additionalProperties':
      return `${field(p.additionalProperty)} is not a known field`;
    case 'type':
      return `${field()} must be ${p.type === 'integer' ? 'an integer' : `of type ${String(p.type)}`}`;
    case 'maxLength':
      return `${field()} must be at most ${String(p.limit)} characters`;
    case 'minLength':
      return Number(p.limit) === 1 ? `${field()} must not be empty` : `${field()} must be at least ${String(p.limit)} characters`;
    case 'minimum':
      return `${field()} must be at least ${String(p.limit)}`;
    case 'maximum':
      return `${field()} must be at most ${String(p.limit)}`;
    case 'minItems':
      return `${field()} must have at least ${String(p.limit)} item(s)`;
    case 'maxItems':
      return `${field()} must have at most ${String(p.limit)} items`;
    case 'uniqueItems':
      return `${field()} must not contain duplicates`;
    case 'enum':
      return `${field()} must be one of ${(p.allowedValues as unknown[]).join(', ')}`;
    case 'const':
      return `${field()} must be ${JSON.stringify(p.allowedValue)}`;
    case 'pattern':
      return `${field()} ${patternRule(String(p.pattern)) ?? `must match ${String(p.pattern)}`}`;
    case 'minProperties':
      return `${field()} must contain at least one field`;
    default:
      return `${field()} ${e.message ?? 'is invalid'}`;
  }
}

/** Fastify's own errors (parser, size, media type) mapped onto the closed set. */
function fromFastifyError(err: FastifyError): ApiError | null {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return invalidRequest('body is not valid JSON');
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return invalidRequest('body is larger than the 1 MiB limit');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return invalidRequest('Content-Type must be application/json');
    case 'FST_ERR_CTP_EMPTY_TYPE':
    case 'FST_ERR_CTP_INVALID_TYPE':
      return invalidRequest('Content-Type header is invalid');
    default:
      break;
  }
  if (err instanceof SyntaxError) return invalidRequest('body is not valid JSON');
  if (err.statusCode === 413) return invalidRequest('body is larger than the 1 MiB limit');
  if (err.statusCode === 415) return invalidRequest('Content-Type must be application/json');
  if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) return invalidRequest('malformed request');
  return null;
}

export function errorHandler(err: FastifyError, req: FastifyRequest, reply: FastifyReply) {
  let apiError: ApiError | null = null;
  // An unknown route is 404 whatever its body (Fastify parses the body before the not-found handler runs) —
  // unless its valid key is past the rate limit (auth.ts meterUnmatched).
  if (req.is404 && !(err instanceof ApiError && err.code === 'RATE_LIMITED')) {
    apiError = noRoute(req);
  } else if (err instanceof ApiError) apiError = err;
  else if (err.validation && err.validationContext === 'body' && req.body === undefined && !req.headers['content-type']) {
    // A body sent without Content-Type is never parsed, so "body must be of type object" would mislead.
    apiError = invalidRequest('Content-Type must be application/json (with a JSON object body)');
  } else if (err.validation) apiError = invalidRequest(describeValidation(err.validation as AjvError[], err.validationContext));
  else apiError = fromFastifyError(err);

  if (!apiError) {
    const resource = resourceError(err);
    if (resource) {
      // The database is full, out of memory or connections, restarting or unreachable, or locked: the same request will
      // work later. Still a 500 SERVER_ERROR (the spec pairs the code with that status and has none for 503), with
      // Retry-After saying when to come back; the log says which of these it is and what to do.
      req.log.error({ err, reqId: req.id, req, database: { problem: resource.problem, code: resource.code } }, resource.operatorMessage);
      apiError = new ApiError('SERVER_ERROR', `the service cannot handle this request right now; retry in ${resource.retryAfterSeconds} s (request ${req.id})`, {
        'retry-after': resource.retryAfterSeconds,
      });
    } else {
      // Unknown failure: the client gets a generic body and the request id to quote; the log gets the rest. Both lines
      // name the request (method, path), so at LOG_LEVEL=warn, which drops the per-request lines, a 5xx still says which.
      req.log.error({ err, reqId: req.id, req }, 'unhandled error');
      apiError = new ApiError('SERVER_ERROR', `internal server error (request ${req.id})`);
    }
  }
  for (const [k, v] of Object.entries(apiError.headers)) reply.header(k, v);
  return reply.code(apiError.status).type('application/json').send(failureBody(apiError.code, apiError.message));
}
