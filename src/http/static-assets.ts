import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { FastifyReply, FastifyRequest, RouteShorthandOptionsWithHandler } from 'fastify';

/**
 * Static files the service serves outside /v1 without a key (the staff dashboard, the customer chat widget): read
 * once at start, revalidated by ETag on every load.
 */
export interface StaticAsset {
  body: Buffer;
  type: string;
  etag: string;
}

/**
 * If-None-Match as RFC 9110 §13.1.2 reads it: `*`, or a list of tags compared weakly (`W/"x"` matches `"x"`), as a
 * caching proxy may send them; browsers send the exact tag.
 */
export function etagMatches(header: string | undefined, etag: string): boolean {
  if (!header) return false;
  if (header.trim() === '*') return true;
  return header.split(',').some((tag) => tag.trim().replace(/^W\//, '') === etag);
}

/**
 * Reads `dir + file` now (a missing asset stops the process at start, not at first use), passes its text through
 * `fill` (placeholders the server fills in), and tags it with a hash of what will be sent.
 */
export function loadAsset(dir: string, file: string, type: string, fill: (text: string) => string = (t) => t): StaticAsset {
  const body = Buffer.from(fill(readFileSync(`${dir}${file}`, 'utf8')));
  return { body, type, etag: `"${createHash('sha256').update(body).digest('base64url').slice(0, 27)}"` };
}

/**
 * A route serving one asset: `headers` (the caller's security headers) on every answer, `nosniff`, `no-cache`
 * (revalidate every time, so a new release is picked up at once; the ETag keeps that cheap) and the ETag, then a 304
 * when the client already holds it. Hidden from the OpenAPI document: these are not part of the API.
 */
export function serveAsset(asset: StaticAsset, headers: Record<string, string> = {}): RouteShorthandOptionsWithHandler {
  return {
    schema: { hide: true },
    handler: async (req: FastifyRequest, reply: FastifyReply) => {
      reply.headers(headers).header('x-content-type-options', 'nosniff').header('cache-control', 'no-cache').header('etag', asset.etag);
      if (etagMatches(req.headers['if-none-match'], asset.etag)) return reply.code(304).send();
      return reply.type(asset.type).send(asset.body);
    },
  };
}
