import { Type, type TSchema } from 'typebox';

/** A string enum as `{type: string, enum: [...]}`: ajv then reports "must be one of …" and OpenAPI shows the values. */
export const StringEnum = <const T extends readonly string[]>(values: T, opts: Record<string, unknown> = {}) =>
  Type.Unsafe<T[number]>({ type: 'string', enum: [...values], ...opts });

/**
 * The text patterns the schemas use, each with its rule in words: a value that fails one is refused with the rule
 * (describeValidation in errors.ts), not with "has an invalid format" or the regular expression.
 */
export const TEXT_PATTERNS = {
  slug: { pattern: '^[a-z0-9]+(-[a-z0-9]+)*$', rule: 'must be a slug: lowercase letters and digits in groups joined by single hyphens (e.g. "shipping-returns")' },
  identifier: { pattern: '^[A-Za-z][A-Za-z0-9_]*$', rule: 'must start with a letter and contain only letters, digits and underscores' },
  code: { pattern: '^[a-z0-9_.-]+$', rule: 'must contain only lowercase letters, digits, "_", "." and "-"' },
  // Identity fields end up in list filters, logs, CSV exports and the owner's CRM: a line break or NUL there is
  // never meant and breaks whatever reads it line by line.
  singleLine: { pattern: '^[^\\u0000-\\u001f\\u007f]*$', rule: 'must not contain control characters (line breaks, tabs, NUL…)' },
} as const;

/** The rule in words behind a schema pattern, when it is one of TEXT_PATTERNS. */
export const patternRule = (pattern: string): string | undefined => Object.values(TEXT_PATTERNS).find((p) => p.pattern === pattern)?.rule;

export const Timestamp = Type.String({ format: 'date-time', description: 'ISO 8601, UTC' });
export const NullableTimestamp = Type.Union([Timestamp, Type.Null()]);

/** The success envelope of every response. */
export const Envelope = <T extends TSchema>(data: T) =>
  Type.Object({ success: Type.Literal(true), data }, { additionalProperties: false });

export const ErrorEnvelope = Type.Object(
  {
    success: Type.Literal(false),
    error: Type.Object({
      code: StringEnum(['INVALID_REQUEST', 'UNAUTHORIZED', 'FORBIDDEN', 'NOT_FOUND', 'RATE_LIMITED', 'SERVER_ERROR'] as const),
      message: Type.String(),
    }),
  },
  { $id: 'ErrorEnvelope' },
);

/** What each failure status means, as the OpenAPI response description (the spec's "Errors" table). */
const ERROR_DESCRIPTIONS: Record<number, string> = {
  400: 'INVALID_REQUEST: malformed request (the message names the field and the rule)',
  401: 'UNAUTHORIZED: missing, invalid or revoked API key',
  403: 'FORBIDDEN: the key lacks the scope, or a server key on the Free plan',
  404: 'NOT_FOUND: no such resource in this account',
  429: 'RATE_LIMITED: past the per-minute or per-day limit; see Retry-After',
  500: 'SERVER_ERROR: internal error; the message carries the request id. With Retry-After: the database is full, out of memory or connections, restarting or unreachable, or locked by another process; the same request works later',
};

const errorRef = (code: number) => Type.Unsafe({ $ref: 'ErrorEnvelope#', description: ERROR_DESCRIPTIONS[code] ?? 'failure' });

/** Response schemas for a route: its success shape plus the failures every authenticated route can answer. */
export function responses<T extends TSchema>(status: 200 | 201 | 202, data: T, extra: number[] = []) {
  const success = Envelope(data);
  const description = { 200: 'OK', 201: 'Created', 202: 'Accepted' }[status];
  const out: Record<number, TSchema> = { [status]: { ...success, description } as TSchema };
  for (const code of [400, 401, 403, 429, 500, ...extra]) out[code] = errorRef(code);
  return out;
}

/**
 * The query string of an endpoint that takes no parameters: empty, so `?fields=title` is refused naming the
 * parameter like an unknown one on a list, instead of being silently ignored. app.ts gives it to every API route
 * that declares no querystring of its own.
 */
export const NoQuery = Type.Object({}, { additionalProperties: false });

/**
 * The body of a write that takes none (a DELETE, a delivery retry): it may be left out or be `{}`, and a field in
 * it is refused naming it (`DELETE …` with `{"force": true}` must not quietly delete). app.ts gives it to every
 * API write route that declares no body of its own.
 */
export const NoBody = Type.Object({}, { additionalProperties: false, description: 'no fields; the body may be left out' });

export const IdParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) }, { additionalProperties: false });

/** How integer query parameters must be written (src/http/json.ts refuses what Number() alone would read). */
export const DECIMAL_DIGITS = 'plain decimal digits (1e1, 0x10 and 5.0 are refused)';

/** limit 1..100 (default 20) and offset ≥ 0 for every list (CONTRACT §4). */
export const PageQuery = {
  limit: Type.Integer({ minimum: 1, maximum: 100, default: 20, description: DECIMAL_DIGITS }),
  // Any offset ≥ 0 (CONTRACT §4): past the end is an empty page with the real total. The bound is only where a
  // JSON number stops being an exact integer.
  offset: Type.Integer({ minimum: 0, maximum: Number.MAX_SAFE_INTEGER, default: 0, description: DECIMAL_DIGITS }),
};

export const Deleted = Type.Object({ deleted: Type.Boolean() });
