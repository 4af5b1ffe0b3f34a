import { isUtf8 } from 'node:buffer';
import { parse as parseQueryString } from 'fast-querystring';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { invalidRequest, noRoute } from './errors.js';

/**
 * True when a parsed JSON value carries a prototype-pollution key at any depth: an own `__proto__`, or a
 * `constructor` object with its own `prototype`. Iterative, because a hostile body can nest 100,000 deep.
 */
export function hasPollutionKey(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    if (Array.isArray(v)) {
      for (const x of v) if (x !== null && typeof x === 'object') stack.push(x);
      continue;
    }
    if (Object.hasOwn(v, '__proto__')) return true;
    const ctor = (v as Record<string, unknown>).constructor;
    if (Object.hasOwn(v, 'constructor') && ctor !== null && typeof ctor === 'object' && Object.hasOwn(ctor, 'prototype')) return true;
    for (const x of Object.values(v)) if (x !== null && typeof x === 'object') stack.push(x);
  }
  return false;
}

/** How deeply a body may nest objects and arrays (the body itself is level 1). */
export const MAX_BODY_DEPTH = 64;

/**
 * True when `value` nests objects/arrays more than `max` levels deep. Iterative, and it stops at the first
 * branch past the limit: a 1 MiB body can nest 500,000 deep, and every recursive consumer (JSON.stringify of
 * `metadata`, the Idempotency-Key fingerprint) would overflow the stack on it.
 */
export function nestsDeeperThan(value: unknown, max: number): boolean {
  if (value === null || typeof value !== 'object') return false;
  const stack: object[] = [value];
  const depths: number[] = [1];
  while (stack.length) {
    const v = stack.pop()!;
    const depth = depths.pop()!;
    if (depth > max) return true;
    for (const x of Array.isArray(v) ? v : Object.values(v)) {
      if (x !== null && typeof x === 'object') {
        stack.push(x);
        depths.push(depth + 1);
      }
    }
  }
  return false;
}

/**
 * A lone UTF-16 surrogate: with the `u` flag a well-formed pair is one astral code point, so only an unpaired
 * half is in category Cs. (String.prototype.isWellFormed is ES2024, past this project's lib.)
 */
const LONE_SURROGATE = /\p{Cs}/u;

/** What is wrong with a text: NUL (PostgreSQL text cannot hold it) or not well-formed UTF-16. */
function textRule(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL (\\u0000) characters';
  // SQLite stores a lone surrogate as 3 WTF-8 bytes, PostgreSQL as one U+FFFD: neither is what was sent.
  if (LONE_SURROGATE.test(s)) return 'must be well-formed Unicode (no unpaired UTF-16 surrogates such as \\ud800)';
  return null;
}

const member = (path: string, key: string) => (/^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`);

/**
 * The first string (value or key) at any depth that holds NUL or a lone surrogate, as a message naming its
 * place (`body.metadata.note must be well-formed Unicode …`); null when every text is fine. Iterative.
 */
export function findTextProblem(value: unknown, root: string): string | null {
  const stack: [unknown, string][] = [[value, root]];
  while (stack.length) {
    const [v, path] = stack.pop()!;
    if (typeof v === 'string') {
      const rule = textRule(v);
      if (rule) return `${path} ${rule}`;
    } else if (Array.isArray(v)) {
      for (let i = v.length - 1; i >= 0; i--) stack.push([v[i], `${path}[${i}]`]);
    } else if (v !== null && typeof v === 'object') {
      const entries = Object.entries(v);
      for (let i = entries.length - 1; i >= 0; i--) {
        const [k, x] = entries[i]!;
        const rule = textRule(k);
        if (rule) return `${path} has a key that ${rule}`;
        stack.push([x, member(path, k)]);
      }
    }
  }
  return null;
}

/**
 * True when every key and value of a path or query record is a string without NUL or surrogates, so findTextProblem
 * would find nothing: the usual request, checked without the walk's stack, the paths it builds for its message and
 * the \p{Cs} test. Anything else (a repeated query parameter's array, an emoji) goes to the walk, which decides and
 * words the message.
 */
function plainTexts(values: object): boolean {
  for (const k of Object.keys(values)) {
    const v = (values as Record<string, unknown>)[k];
    if (typeof v !== 'string' || !plainText(v) || !plainText(k)) return false;
  }
  return true;
}
/** Any surrogate, paired or not (a code unit class, cheaper than \p{Cs}). */
const SURROGATE = /[\ud800-\udfff]/;
const plainText = (s: string) => !s.includes('\u0000') && !SURROGATE.test(s);

/** Query and path integers: plain decimal digits, so `1e1`, `0x10`, ` 5` and `5.0` are not read as numbers. */
const DECIMAL_INTEGER = /^-?[0-9]+$/;
const integerFieldsOf = new WeakMap<object, string[]>();

/** The properties a query/path schema types as integers, worked out once per schema object. */
function integerFields(schema: unknown): string[] {
  if (schema === null || typeof schema !== 'object') return [];
  let names = integerFieldsOf.get(schema);
  if (!names) {
    const props = (schema as { properties?: Record<string, { type?: unknown }> }).properties ?? {};
    names = Object.entries(props)
      .filter(([, p]) => p.type === 'integer' || (Array.isArray(p.type) && p.type.includes('integer')))
      .map(([k]) => k);
    integerFieldsOf.set(schema, names);
  }
  return names;
}

/** Marks a parsed query string whose percent-encoding did not decode (see parseQuery). */
const BAD_ENCODING = Symbol('bad percent-encoding');
export const BAD_URL_MESSAGE = 'the URL is not valid (bad percent-encoding)';

/**
 * The query string parser (Fastify's, fast-querystring), which reads an undecodable escape (`%FF`, `%zz`, the
 * UTF-8 of a lone surrogate) as its literal text, so `?customerId=%FF` matched a customer id `%FF`. Such a query
 * is marked, and the guard below answers it 400 as Fastify does an undecodable path. The check costs only
 * queries that contain a `%`.
 */
export function parseQuery(query: string): Record<string, unknown> {
  const parsed = query.length === 0 ? {} : (parseQueryString(query) as Record<string, unknown>);
  if (query.includes('%')) {
    try {
      decodeURIComponent(query);
    } catch {
      Object.defineProperty(parsed, BAD_ENCODING, { value: true });
    }
  }
  return parsed;
}

/**
 * Path and query values, checked before validation:
 * - no U+0000 (PostgreSQL refuses it with an error that would otherwise surface as a 500, and no id, slug or
 *   filter value legitimately contains one) and no lone surrogate (percent-decoding cannot produce one, since the
 *   UTF-8 bytes of a surrogate are invalid and an undecodable path or query is refused, but the rule is the
 *   body's);
 * - a query string that did not decode (parseQuery) is refused as an undecodable path is;
 * - an integer field must be written in decimal digits (a minus sign is let through so that `-1` is refused by
 *   the field's minimum, with that message): ajv's coercion uses Number(), which reads `1e1`, `0x10`, ` 5` and
 *   `5.0` as numbers.
 */
export function registerParamGuard(app: FastifyInstance) {
  // A callback hook: an async one costs a promise and a microtask hop on every request.
  app.addHook('preValidation', (req, _reply, done) => {
    const schema = req.routeOptions.schema;
    // `/v1/documents/` matches `/v1/documents/:id` with an empty id: no such route, as `POST /v1/documents/` (which
    // matches nothing) answers, rather than a 400 about a parameter the caller never meant to give.
    const params = req.params as Record<string, unknown> | undefined;
    if (params && Object.values(params).some((v) => v === '')) return done(noRoute(req));
    for (const [part, values, partSchema] of [
      ['path', req.params, schema?.params],
      ['query', req.query, schema?.querystring],
    ] as const) {
      if (!values || typeof values !== 'object') continue;
      if (BAD_ENCODING in values) return done(invalidRequest(BAD_URL_MESSAGE));
      // A record of plain strings (the usual request) has nothing for the walk to find and no repeated parameter.
      if (!plainTexts(values)) {
        const problem = findTextProblem(values, part);
        if (problem) return done(invalidRequest(problem));
        // The parser reads a repeated parameter as an array, which validation would call a value of the wrong type
        // ("query.limit must be an integer" for limit=5&limit=6). No query field takes a list; an unknown repeated
        // name is left to the unknown-field rule.
        const declared = (partSchema as { properties?: Record<string, unknown> } | undefined)?.properties ?? {};
        for (const [name, v] of Object.entries(values)) {
          if (Array.isArray(v) && Object.hasOwn(declared, name)) {
            return done(invalidRequest(`${part}.${name} must be given once, not ${v.length} times`));
          }
        }
      }
      for (const name of integerFields(partSchema)) {
        const v = (values as Record<string, unknown>)[name];
        if (typeof v === 'string' && !DECIMAL_INTEGER.test(v)) {
          return done(invalidRequest(`${part}.${name} must be an integer written in plain decimal digits (such as 20)`));
        }
      }
    }
    done();
  });
}

/** A body schema none of whose fields is required: such a body may be left out altogether. */
function hasRequiredFields(schema: unknown): boolean {
  const required = (schema as { required?: unknown[] } | null)?.required;
  return Array.isArray(required) && required.length > 0;
}

/**
 * A POST whose body fields are all optional (start a chat, escalate) may come with no body and no
 * Content-Type at all, as many widgets and `curl -X POST` send it: that is read as `{}`. A body that was sent
 * with another Content-Type is still refused by validation.
 *
 * Attached to those routes alone (after the global preValidation hooks, as before): the other routes, the reads
 * among them, do not run it.
 */
export function registerOptionalBody(app: FastifyInstance) {
  const optionalBody = (req: FastifyRequest, _reply: FastifyReply, done: () => void) => {
    if (req.body === undefined) {
      const length = req.headers['content-length'];
      const sentSomething = (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
      if (!sentSomething) req.body = {};
    }
    done();
  };
  app.addHook('onRoute', (route) => {
    const schema = route.schema?.body;
    if (!schema || hasRequiredFields(schema)) return;
    route.preValidation = [...hooksOf(route.preValidation), optionalBody] as typeof route.preValidation;
  });
}

/** A route option's hooks as an array (Fastify takes one function or an array). */
export const hooksOf = <T>(hooks: T | T[] | undefined): T[] => (hooks === undefined ? [] : Array.isArray(hooks) ? hooks : [hooks]);

/**
 * The charset a Content-Type names, lower-cased and unquoted (`application/json; Charset="UTF-8"` → `utf-8`);
 * undefined when it names none.
 */
export function contentTypeCharset(header: string | undefined): string | undefined {
  if (!header) return undefined;
  for (const param of header.split(';').slice(1)) {
    const eq = param.indexOf('=');
    if (eq === -1 || param.slice(0, eq).trim().toLowerCase() !== 'charset') continue;
    return param
      .slice(eq + 1)
      .trim()
      .replace(/^"(.*)"$/, '$1')
      .toLowerCase();
  }
  return undefined;
}

/** JSON is UTF-8 (RFC 8259 §8.1); `utf8` is the common misspelling every decoder accepts as the same. */
const UTF8_NAMES = new Set(['utf-8', 'utf8']);

/**
 * Replaces Fastify's JSON parser so each refusal says what was wrong: not JSON, empty, a charset other than
 * UTF-8, nesting deeper than MAX_BODY_DEPTH, a prototype-pollution key, or a string with NUL or a lone surrogate
 * (Fastify's own parser reports the first and the pollution key as "invalid JSON" and lets the rest through).
 * Every consumer of a parsed body can then recurse over it and store its strings as they are.
 */
export function registerJsonParser(app: FastifyInstance) {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (req, body, done) => {
    const bytes = body as Buffer;
    if (bytes.length === 0) {
      // Many clients send Content-Type: application/json on a bodiless DELETE; only routes taking a body mind.
      const schema = req.routeOptions.schema?.body;
      if (!schema) return done(null, undefined);
      if (!hasRequiredFields(schema)) return done(null, {});
      return done(invalidRequest('body is empty; send a JSON object'), undefined);
    }
    // Bodies are read as sent: a compressed one would be refused as "not valid UTF-8" (gzip), or worse, a plain body
    // labelled compressed would be taken as it is. Either way the header is what to fix.
    const encoding = req.headers['content-encoding']?.trim().toLowerCase();
    if (encoding && encoding !== 'identity') {
      return done(invalidRequest(`header.Content-Encoding "${encoding.slice(0, 40)}" is not supported; send the body uncompressed`), undefined);
    }
    // The body is always decoded as UTF-8: a client that says latin1 would have its text changed silently.
    const charset = contentTypeCharset(req.headers['content-type']);
    if (charset !== undefined && !UTF8_NAMES.has(charset)) {
      return done(invalidRequest('header.Content-Type charset must be utf-8 (JSON bodies are read as UTF-8)'), undefined);
    }
    // Decoding would turn bytes that are not UTF-8 into U+FFFD and store that in place of what was sent.
    if (!isUtf8(bytes)) return done(invalidRequest('body is not valid UTF-8'), undefined);
    const text = bytes.toString('utf8');
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return done(invalidRequest('body is not valid JSON'), undefined);
    }
    // Nesting past the limit takes more than 2 × MAX_BODY_DEPTH characters, so short bodies skip the walk.
    if (text.length > 2 * MAX_BODY_DEPTH && nestsDeeperThan(parsed, MAX_BODY_DEPTH)) {
      return done(invalidRequest(`body must not nest objects and arrays deeper than ${MAX_BODY_DEPTH} levels`), undefined);
    }
    // Only bodies that could spell the keys (possibly \u-escaped) pay for the walk.
    if (/proto|constructor|\\u/.test(text) && hasPollutionKey(parsed)) {
      return done(invalidRequest('body must not contain "__proto__" or "constructor.prototype" keys'), undefined);
    }
    // JSON can carry NUL or a lone surrogate only as a \u escape (raw bytes of a surrogate are not UTF-8, refused
    // above), so bodies without such an escape skip the walk.
    if (/\\u(?:0000|d[89a-f])/i.test(text)) {
      const problem = findTextProblem(parsed, 'body');
      if (problem) return done(invalidRequest(problem), undefined);
    }
    done(null, parsed);
  });
}
