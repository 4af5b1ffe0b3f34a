import type { FastifyInstance } from 'fastify';
import { invalidRequest } from './errors.js';

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

/** True when any string (key or value) at any depth holds U+0000, which PostgreSQL text cannot store. */
export function hasNul(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (v.includes('\u0000')) return true;
    } else if (Array.isArray(v)) {
      for (const x of v) stack.push(x);
    } else if (v !== null && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (k.includes('\u0000')) return true;
        stack.push(x);
      }
    }
  }
  return false;
}

/**
 * Path and query values with U+0000: PostgreSQL refuses them with an error that would otherwise surface as a
 * 500, and no id, slug or filter value legitimately contains one.
 */
export function registerNulGuard(app: FastifyInstance) {
  // A callback hook: an async one costs a promise and a microtask hop on every request.
  app.addHook('preValidation', (req, _reply, done) => {
    for (const [part, values] of [['path', req.params], ['query', req.query]] as const) {
      if (values && typeof values === 'object' && hasNul(values)) return done(invalidRequest(`${part} values must not contain NUL (\\u0000) characters`));
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
 */
export function registerOptionalBody(app: FastifyInstance) {
  app.addHook('preValidation', async (req) => {
    if (req.body !== undefined) return;
    const schema = req.routeOptions.schema?.body;
    if (!schema || hasRequiredFields(schema)) return;
    const length = req.headers['content-length'];
    const sentSomething = (length !== undefined && length !== '0') || req.headers['transfer-encoding'] !== undefined;
    if (!sentSomething) req.body = {};
  });
}

/**
 * Replaces Fastify's JSON parser so each refusal says what was wrong: not JSON, empty, or a prototype-pollution
 * key (Fastify's own parser reports all three as "invalid JSON").
 */
export function registerJsonParser(app: FastifyInstance) {
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = body as string;
    if (text.length === 0) {
      // Many clients send Content-Type: application/json on a bodiless DELETE; only routes taking a body mind.
      const schema = req.routeOptions.schema?.body;
      if (!schema) return done(null, undefined);
      if (!hasRequiredFields(schema)) return done(null, {});
      return done(invalidRequest('body is empty; send a JSON object'), undefined);
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      return done(invalidRequest('body is not valid JSON'), undefined);
    }
    // Only bodies that could spell the keys (possibly \u-escaped) pay for the walk.
    if (/proto|constructor|\\u/.test(text) && hasPollutionKey(parsed)) {
      return done(invalidRequest('body must not contain "__proto__" or "constructor.prototype" keys'), undefined);
    }
    // JSON can only carry NUL as an escape, so bodies without one skip the walk.
    if (/\\u0000/i.test(text) && hasNul(parsed)) {
      return done(invalidRequest('body must not contain NUL (\\u0000) characters'), undefined);
    }
    done(null, parsed);
  });
}
